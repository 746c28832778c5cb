#include "load_model/trial_resource_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

// A feature's twin: the parameter of a log feature, the log feature of a parameter.
std::string Twin(const std::string& feature) {
  return absl::StartsWith(feature, kLog) ? feature.substr(sizeof(kLog) - 1) : kLog + feature;
}

// The trials a fit sees: the latest `max_trials` of `all`.
std::vector<TrialTelemetry> LatestTrials(const std::vector<TrialTelemetry>& all, int max_trials) {
  const size_t first = all.size() > size_t(max_trials) ? all.size() - max_trials : 0;
  return std::vector<TrialTelemetry>(all.begin() + first, all.end());
}

// Candidate features: each parameter that varies over `trials`, and its logarithm where it is
// positive. `floors` gets each log feature's smallest value seen.
std::vector<std::string> CandidateFeatures(const std::vector<TrialTelemetry>& trials,
                                           std::map<std::string, double>* floors) {
  std::set<std::string> names;
  for (const auto& t : trials) {
    for (const auto& [name, v] : t.params) names.insert(name);
  }
  std::vector<std::string> candidates;
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
      (*floors)[kLog + name] = lo;
    }
  }
  return candidates;
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

// The fits FitResource compares: of one usage (`target`) over one window of trials, linear or
// a power law (a log target), on a subset of the candidate features.
class TrialResourceModel::Fitter {
 public:
  // A fit and its leave-one-out predictions (in the usage's own units), one per trial.
  struct Scored {
    Fit fit;
    std::vector<double> loo;
  };

  Fitter(const TrialResourceModelOptions& options, const std::vector<TrialTelemetry>& all,
         double TrialTelemetry::*target);

  // Whether every trial's usage is positive, as a log target needs.
  bool AllPositive() const;
  // Forward selection from no feature, adding the candidate that lowers the leave-one-out
  // error most while it pays.
  Scored SelectFeatures(bool log_target) const;
  // The margin: the worst under-prediction among the latest trials, left out one at a time.
  double Margin(const std::vector<double>& loo) const;

 private:
  // Ridge fit of `features`; its leave-one-out predictions through the hat matrix:
  // y_-i = (yhat_i - h_ii y_i) / (1 - h_ii).
  Scored FitWith(bool log_target, const std::vector<std::string>& features) const;
  // The design matrix of `features` (intercept first), each feature standardized; their
  // floors, means and scales go into `fit`.
  Eigen::MatrixXd Design(const std::vector<std::string>& features, Fit* fit) const;
  // A feature's floor: a log feature's smallest value seen, else tiny.
  double FloorOf(const std::string& feature) const;

  const TrialResourceModelOptions& options_;
  const std::vector<TrialTelemetry> trials_;
  const int n_;
  std::vector<double> y_;  // each trial's usage
  double y_floor_ = 0;     // the smallest usage a relative error or a logarithm divides by
  std::map<std::string, double> floors_;
  std::vector<std::string> candidates_;
};

TrialResourceModel::Fitter::Fitter(const TrialResourceModelOptions& options,
                                   const std::vector<TrialTelemetry>& all,
                                   double TrialTelemetry::*target)
    : options_(options),
      trials_(LatestTrials(all, options.max_trials)),
      n_(static_cast<int>(trials_.size())),
      y_(n_) {
  double y_scale = 0;
  for (int i = 0; i < n_; ++i) {
    y_[i] = trials_[i].*target;
    y_scale += std::abs(y_[i]) / n_;
  }
  y_floor_ = std::max(y_scale * 1e-3, 1e-12);
  candidates_ = CandidateFeatures(trials_, &floors_);
}

bool TrialResourceModel::Fitter::AllPositive() const {
  bool all_positive = true;
  for (double v : y_) all_positive = all_positive && v > 0;
  return all_positive;
}

double TrialResourceModel::Fitter::FloorOf(const std::string& feature) const {
  const auto it = floors_.find(feature);
  return it == floors_.end() ? 1e-300 : it->second;
}

Eigen::MatrixXd TrialResourceModel::Fitter::Design(const std::vector<std::string>& features,
                                                   Fit* fit) const {
  const int k = static_cast<int>(features.size()) + 1;
  Eigen::MatrixXd x(n_, k);
  for (int i = 0; i < n_; ++i) x(i, 0) = 1.0;
  for (int j = 1; j < k; ++j) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n_; ++i) {
      x(i, j) = FeatureValue(features[j - 1], trials_[i].params, FloorOf(features[j - 1]));
      s += x(i, j);
      s2 += x(i, j) * x(i, j);
    }
    const double mean = s / n_, var = s2 / n_ - mean * mean;
    const double scale = var > 1e-24 ? std::sqrt(var) : 1.0;
    fit->floor.push_back(FloorOf(features[j - 1]));
    fit->mean.push_back(mean);
    fit->scale.push_back(scale);
    x.col(j) = (x.col(j).array() - mean) / scale;
  }
  return x;
}

TrialResourceModel::Fitter::Scored TrialResourceModel::Fitter::FitWith(
    bool log_target, const std::vector<std::string>& features) const {
  Scored out;
  Fit& fit = out.fit;
  fit.log_target = log_target;
  fit.features = features;
  const int n = n_, k = static_cast<int>(features.size()) + 1;
  const Eigen::MatrixXd x = Design(features, &fit);
  Eigen::VectorXd t(n);
  for (int i = 0; i < n; ++i) t(i) = log_target ? std::log(std::max(y_[i], y_floor_)) : y_[i];
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
    err += std::abs(loo - y_[i]) / std::max(std::abs(y_[i]), y_floor_);
  }
  fit.loo_error = std::isfinite(err) ? err / n : std::numeric_limits<double>::infinity();
  return out;
}

TrialResourceModel::Fitter::Scored TrialResourceModel::Fitter::SelectFeatures(
    bool log_target) const {
  std::vector<std::string> chosen;
  Scored current = FitWith(log_target, chosen);
  // At most n - 2 features, so that leaving one trial out still leaves a determined fit.
  while (static_cast<int>(chosen.size()) + 2 < n_) {
    std::optional<Scored> step;
    for (const std::string& c : candidates_) {
      if (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) continue;
      // A parameter and its logarithm together only bend the curve the data already fixes.
      if (std::find(chosen.begin(), chosen.end(), Twin(c)) != chosen.end()) continue;
      std::vector<std::string> with = chosen;
      with.push_back(c);
      Scored t = FitWith(log_target, with);
      if (!step || t.fit.loo_error < step->fit.loo_error) step = std::move(t);
    }
    if (!step || !(step->fit.loo_error < current.fit.loo_error * (1 - 1e-3))) break;
    chosen = step->fit.features;
    current = *std::move(step);
  }
  return current;
}

double TrialResourceModel::Fitter::Margin(const std::vector<double>& loo) const {
  double worst = 0;
  for (int i = std::max(0, n_ - options_.recent_errors); i < n_; ++i) {
    worst = std::max(worst, loo[i] > 0 ? y_[i] / loo[i] - 1 : options_.max_margin);
  }
  return std::clamp(worst + options_.min_margin, options_.min_margin, options_.max_margin);
}

TrialResourceModel::Fit TrialResourceModel::FitResource(double TrialTelemetry::*target) const {
  const Fitter fitter(options_, trials_, target);
  std::optional<Fitter::Scored> best;
  for (bool log_target : {false, true}) {
    if (log_target && !fitter.AllPositive()) continue;
    Fitter::Scored current = fitter.SelectFeatures(log_target);
    if (!best || current.fit.loo_error < best->fit.loo_error) best = std::move(current);
  }
  best->fit.margin = fitter.Margin(best->loo);
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
