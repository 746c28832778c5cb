#include "load_model/trial_resource_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <Eigen/Dense>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace evoscale::load_model {
namespace {

constexpr char kLog[] = "log:";

// A feature's value for `params`: the parameter, or its logarithm for "log:name"; a missing
// parameter (conditional) counts as 0, and its logarithm as that of `floor`.
double FeatureValue(const std::string& feature, const TrialParams& params, double floor) {
  const bool log = absl::StartsWith(feature, kLog);
  const auto it = params.find(log ? feature.substr(sizeof(kLog) - 1) : feature);
  const double v = it == params.end() ? 0.0 : it->second;
  return log ? std::log(std::max(v, floor)) : v;
}

}  // namespace

TrialResourceModel::TrialResourceModel(TrialResourceModelOptions options)
    : options_(options) {}

absl::Status TrialResourceModel::AddTrial(const TrialTelemetry& t) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (bad(t.peak_cpu_cores)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("trial telemetry: peak_cpu_cores %g must be finite and >= 0",
                        t.peak_cpu_cores));
  }
  if (bad(t.peak_memory_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("trial telemetry: peak_memory_bytes %g must be finite and >= 0",
                        t.peak_memory_bytes));
  }
  if (bad(t.gpus_used)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "trial telemetry: gpus_used %g must be finite and >= 0", t.gpus_used));
  }
  for (const auto& [name, value] : t.params) {
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("trial telemetry: parameter \"%s\" is not finite", name));
    }
  }
  trials_.push_back(t);
  memory_fit_.reset();
  cpu_fit_.reset();
  return absl::OkStatus();
}

TrialResourceModel::Fit TrialResourceModel::FitResource(double TrialTelemetry::*target) const {
  const size_t first =
      trials_.size() > size_t(options_.max_trials) ? trials_.size() - options_.max_trials : 0;
  const std::vector<TrialTelemetry> trials(trials_.begin() + first, trials_.end());
  const int n = static_cast<int>(trials.size());
  std::vector<double> y(n);
  double y_scale = 0;
  for (int i = 0; i < n; ++i) {
    y[i] = trials[i].*target;
    y_scale += std::abs(y[i]) / n;
  }
  const double y_floor = std::max(y_scale * 1e-3, 1e-12);

  // Candidate features: each parameter that varies, and its logarithm where it is positive.
  std::set<std::string> names;
  for (const auto& t : trials) {
    for (const auto& [name, v] : t.params) names.insert(name);
  }
  std::vector<std::string> candidates;
  std::map<std::string, double> floors;  // smallest value seen, for log features
  for (const std::string& name : names) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& t : trials) {
      const auto it = t.params.find(name);
      const double v = it == t.params.end() ? 0.0 : it->second;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (!(hi > lo)) continue;
    candidates.push_back(name);
    if (lo > 0) {
      candidates.push_back(kLog + name);
      floors[kLog + name] = lo;
    }
  }
  auto floor_of = [&](const std::string& f) {
    const auto it = floors.find(f);
    return it == floors.end() ? 1e-300 : it->second;
  };

  // Ridge fit of `features`; its leave-one-out predictions (in the usage's own units) through
  // the hat matrix: y_-i = (yhat_i - h_ii y_i) / (1 - h_ii).
  struct Trial {
    Fit fit;
    std::vector<double> loo;
  };
  auto fit_with = [&](bool log_target, const std::vector<std::string>& features) {
    Trial out;
    Fit& fit = out.fit;
    fit.log_target = log_target;
    fit.features = features;
    const int k = static_cast<int>(features.size()) + 1;
    Eigen::MatrixXd x(n, k);
    Eigen::VectorXd t(n);
    for (int i = 0; i < n; ++i) {
      x(i, 0) = 1.0;
      t(i) = log_target ? std::log(std::max(y[i], y_floor)) : y[i];
    }
    for (int j = 1; j < k; ++j) {
      double s = 0, s2 = 0;
      for (int i = 0; i < n; ++i) {
        x(i, j) = FeatureValue(features[j - 1], trials[i].params, floor_of(features[j - 1]));
        s += x(i, j);
        s2 += x(i, j) * x(i, j);
      }
      const double mean = s / n, var = s2 / n - mean * mean;
      const double scale = var > 1e-24 ? std::sqrt(var) : 1.0;
      fit.floor.push_back(floor_of(features[j - 1]));
      fit.mean.push_back(mean);
      fit.scale.push_back(scale);
      x.col(j) = (x.col(j).array() - mean) / scale;
    }
    Eigen::MatrixXd a = x.transpose() * x;
    a.diagonal().tail(k - 1).array() += options_.ridge * n;
    const Eigen::LDLT<Eigen::MatrixXd> ldlt = a.ldlt();
    const Eigen::VectorXd w = ldlt.solve(x.transpose() * t);
    fit.weights.assign(w.data(), w.data() + k);
    const Eigen::MatrixXd a_inv_xt = ldlt.solve(x.transpose());  // k x n
    double err = 0;
    out.loo.resize(n);
    for (int i = 0; i < n; ++i) {
      const double h = x.row(i).dot(a_inv_xt.col(i));
      const double fitted = x.row(i).dot(w);
      double loo = h < 1 - 1e-9 ? (fitted - h * t(i)) / (1 - h)
                                : std::numeric_limits<double>::infinity();
      if (log_target) loo = std::exp(std::min(loo, 700.0));
      out.loo[i] = loo;
      err += std::abs(loo - y[i]) / std::max(std::abs(y[i]), y_floor);
    }
    fit.loo_error = std::isfinite(err) ? err / n : std::numeric_limits<double>::infinity();
    return out;
  };

  std::optional<Trial> best;
  bool all_positive = true;
  for (double v : y) all_positive = all_positive && v > 0;
  for (bool log_target : {false, true}) {
    if (log_target && !all_positive) continue;
    std::vector<std::string> chosen;
    Trial current = fit_with(log_target, chosen);
    // Forward selection while it pays; at most n - 2 features, so that leaving one trial out
    // still leaves a determined fit.
    while (static_cast<int>(chosen.size()) + 2 < n) {
      std::optional<Trial> step;
      for (const std::string& c : candidates) {
        if (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) continue;
        // A parameter and its logarithm together only bend the curve the data already fixes.
        const std::string twin =
            absl::StartsWith(c, kLog) ? c.substr(sizeof(kLog) - 1) : kLog + c;
        if (std::find(chosen.begin(), chosen.end(), twin) != chosen.end()) continue;
        std::vector<std::string> with = chosen;
        with.push_back(c);
        Trial t = fit_with(log_target, with);
        if (!step || t.fit.loo_error < step->fit.loo_error) step = std::move(t);
      }
      if (!step || !(step->fit.loo_error < current.fit.loo_error * (1 - 1e-3))) break;
      chosen = step->fit.features;
      current = *std::move(step);
    }
    if (!best || current.fit.loo_error < best->fit.loo_error) best = std::move(current);
  }
  // The margin: the worst under-prediction among the latest trials, left out one at a time.
  double worst = 0;
  for (int i = std::max(0, n - options_.recent_errors); i < n; ++i) {
    const double loo = best->loo[i];
    worst = std::max(worst, loo > 0 ? y[i] / loo - 1 : options_.max_margin);
  }
  best->fit.margin = std::clamp(worst + options_.min_margin, options_.min_margin,
                                options_.max_margin);
  return best->fit;
}

double TrialResourceModel::Evaluate(const Fit& fit, const TrialParams& params) {
  double v = fit.weights[0];
  for (size_t j = 0; j < fit.features.size(); ++j) {
    // The log of a value at or below 0 is taken at the smallest value the fit has seen.
    v += fit.weights[j + 1] * (FeatureValue(fit.features[j], params, fit.floor[j]) - fit.mean[j]) /
         fit.scale[j];
  }
  return fit.log_target ? std::exp(std::min(v, 700.0)) : v;
}

void TrialResourceModel::AddOutOfMemory(const TrialParams& params, double limit_bytes) {
  if (trials_.empty() || !std::isfinite(limit_bytes) || limit_bytes <= 0) return;
  const double fit = Predict(params).memory_fit_bytes;
  if (fit > 0) out_of_memory_.emplace_back(num_trials(), limit_bytes / fit - 1);
}

void TrialResourceModel::MergeOutOfMemory(const TrialResourceModel& older) {
  out_of_memory_.insert(out_of_memory_.end(), older.out_of_memory_.begin(),
                        older.out_of_memory_.end());
}

TrialResourceRequest TrialResourceModel::Predict(const TrialParams& params) const {
  TrialResourceRequest req;
  if (trials_.empty()) {
    req.cpu_cores = options_.default_cpu_cores;
    req.memory_bytes = static_cast<int64_t>(options_.default_memory_bytes);
    req.gpus = options_.default_gpus;
    req.explanation = "no finished trials yet: defaults";
    return req;
  }
  req.learned = true;
  const int n = static_cast<int>(trials_.size());
  double max_cpu = 0, max_mem = 0, max_gpu = 0;
  for (const auto& t : trials_) {
    max_cpu = std::max(max_cpu, t.peak_cpu_cores);
    max_mem = std::max(max_mem, t.peak_memory_bytes);
    max_gpu = std::max(max_gpu, t.gpus_used);
  }
  double cpu = max_cpu, mem = max_mem;
  double cpu_margin = options_.first_margin, mem_margin = options_.first_margin;
  std::string how = absl::StrFormat("largest of %d trial%s", n, n == 1 ? "" : "s");
  if (n >= options_.min_trials_to_fit) {
    if (!memory_fit_) memory_fit_ = FitResource(&TrialTelemetry::peak_memory_bytes);
    if (!cpu_fit_) cpu_fit_ = FitResource(&TrialTelemetry::peak_cpu_cores);
    mem = Evaluate(*memory_fit_, params);
    cpu = Evaluate(*cpu_fit_, params);
    mem_margin = memory_fit_->margin;
    cpu_margin = cpu_fit_->margin;
    const std::string on =
        memory_fit_->features.empty() ? "no parameter" : absl::StrJoin(memory_fit_->features, ", ");
    how = absl::StrFormat("%s fit on %s over %d trials (leave-one-out error %.1f%%)",
                          memory_fit_->log_target ? "power-law" : "linear", on, n,
                          100 * memory_fit_->loo_error);
  }
  for (const auto& [when, lacked] : out_of_memory_) {
    if (when + options_.recent_errors > n) {
      mem_margin = std::min(std::max(mem_margin, lacked + 2 * options_.min_margin),
                            std::max(options_.max_margin, lacked + 2 * options_.min_margin));
    }
  }
  req.memory_fit_bytes = std::max(mem, 0.0);
  req.memory_margin = mem_margin;
  req.cpu_cores = std::max(cpu * (1 + cpu_margin), options_.min_cpu_cores);
  req.memory_bytes = static_cast<int64_t>(
      std::ceil(std::max(mem * (1 + mem_margin), options_.min_memory_bytes)));
  // GPUs are whole devices; a trial that used a fraction of one still needs one.
  req.gpus = max_gpu > 0 ? std::max(1, static_cast<int>(std::ceil(max_gpu - 1e-9))) : 0;
  req.explanation = absl::StrFormat("memory: %s, margin %.0f%%", how, 100 * mem_margin);
  return req;
}

}  // namespace evoscale::load_model
