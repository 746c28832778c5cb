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

// The latest `max_trials` of `all` (the window a fit sees).
template <typename T>
std::vector<T> Latest(const std::vector<T>& all, int max_trials) {
  const size_t first = all.size() > size_t(max_trials) ? all.size() - max_trials : 0;
  return std::vector<T>(all.begin() + first, all.end());
}

// Candidate features: each parameter that varies over `trials`, and its logarithm where it is
// positive. `floors` gets each log feature's smallest value seen.
std::vector<std::string> CandidateFeatures(const std::vector<TrialParams>& trials,
                                           std::map<std::string, double>* floors) {
  std::set<std::string> names;
  for (const TrialParams& t : trials) {
    for (const auto& [name, v] : t) names.insert(name);
  }
  std::vector<std::string> candidates;
  for (const std::string& name : names) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const TrialParams& t : trials) {
      const auto it = t.find(name);
      const double v = it == t.end() ? 0.0 : it->second;
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

bool Usable(const StepElapsed& point) { return point.step > 0 && point.elapsed_seconds > 0; }

// The latest point of `curve` with a positive step and elapsed time, if any.
std::optional<StepElapsed> LatestUsable(const std::vector<StepElapsed>& curve) {
  for (auto it = curve.rbegin(); it != curve.rend(); ++it) {
    if (Usable(*it)) return *it;
  }
  return std::nullopt;
}

double CoresHeld(const TrialTelemetry& t) { return t.cores_held > 0 ? t.cores_held : 1.0; }

// The pooled least-squares slope of log elapsed seconds on log step, each trial with its own
// intercept (both sides centred on the trial's mean); nullopt when no trial has two steps.
std::optional<double> PooledStepExponent(const std::vector<const TrialTelemetry*>& trials) {
  double sxy = 0, sxx = 0;
  for (const TrialTelemetry* t : trials) {
    std::vector<std::pair<double, double>> points;  // (log step, log elapsed)
    double mean_x = 0, mean_y = 0;
    for (const StepElapsed& p : t->curve) {
      if (!Usable(p)) continue;
      points.emplace_back(std::log(double(p.step)), std::log(p.elapsed_seconds));
      mean_x += points.back().first;
      mean_y += points.back().second;
    }
    if (points.size() < 2) continue;
    mean_x /= points.size();
    mean_y /= points.size();
    for (const auto& [x, y] : points) {
      sxy += (x - mean_x) * (y - mean_y);
      sxx += (x - mean_x) * (x - mean_x);
    }
  }
  if (!(sxx > 1e-12)) return std::nullopt;
  return sxy / sxx;
}

// The median of `v` (0 when empty).
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  return (v[mid] + *std::max_element(v.begin(), v.begin() + mid)) / 2;
}

absl::Status ValidateCurve(const TrialTelemetry& t) {
  if (!std::isfinite(t.cores_held) || t.cores_held < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "trial telemetry: cores_held %g must be finite and >= 0", t.cores_held));
  }
  for (size_t i = 0; i < t.curve.size(); ++i) {
    const StepElapsed& p = t.curve[i];
    if (p.step < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("trial telemetry: curve[%d].step %d must be >= 0", i, p.step));
    }
    if (!std::isfinite(p.elapsed_seconds) || p.elapsed_seconds < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trial telemetry: curve[%d].elapsed_seconds %g must be finite and >= 0", i,
          p.elapsed_seconds));
    }
    if (i == 0) continue;
    const StepElapsed& before = t.curve[i - 1];
    if (p.step < before.step) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trial telemetry: curve[%d].step %d is below curve[%d].step %d", i, p.step, i - 1,
          before.step));
    }
    if (p.elapsed_seconds < before.elapsed_seconds) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trial telemetry: curve[%d].elapsed_seconds %g at step %d is below %g at step %d", i,
          p.elapsed_seconds, p.step, before.elapsed_seconds, before.step));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrialTelemetry(const TrialTelemetry& t) {
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
  return ValidateCurve(t);
}

double TrialResourceRequest::core_seconds_to(int64_t step) const {
  if (!core_seconds_learned || step <= 0) return 0;
  return core_seconds_coefficient * std::pow(double(step), step_exponent);
}

TrialResourceModel::TrialResourceModel(TrialResourceModelOptions options)
    : options_(options) {}

absl::Status TrialResourceModel::AddTrial(const TrialTelemetry& t) {
  if (absl::Status st = ValidateTrialTelemetry(t); !st.ok()) return st;
  trials_.push_back(t);
  usage_trials_ += t.stopped ? 0 : 1;
  timed_trials_ += LatestUsable(t.curve) ? 1 : 0;
  memory_fit_.reset();
  cpu_fit_.reset();
  time_fit_.reset();
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
    // Each feature's |weight| over its standard error; infinite without a residual degree
    // of freedom or residual.
    std::vector<double> t;
  };

  // `params` and `values`: one per trial, oldest first; the latest max_trials are fitted.
  Fitter(const TrialResourceModelOptions& options, const std::vector<TrialParams>& params,
         const std::vector<double>& values);

  // Whether every trial's usage is positive, as a log target needs.
  bool AllPositive() const;
  // Forward selection from no feature, adding the candidate that lowers the leave-one-out
  // error most while it pays.
  Scored SelectFeatures(bool log_target) const;
  // Drops the features of `current` whose weights are not clearly away from 0, weakest first.
  Scored Prune(bool log_target, Scored current) const;
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
  const std::vector<TrialParams> trials_;
  const int n_;
  std::vector<double> y_;  // each trial's value (a usage, or a time coefficient)
  double y_floor_ = 0;     // the smallest usage a relative error or a logarithm divides by
  std::map<std::string, double> floors_;
  std::vector<std::string> candidates_;
};

TrialResourceModel::Fitter::Fitter(const TrialResourceModelOptions& options,
                                   const std::vector<TrialParams>& params,
                                   const std::vector<double>& values)
    : options_(options),
      trials_(Latest(params, options.max_trials)),
      n_(static_cast<int>(trials_.size())),
      y_(Latest(values, options.max_trials)) {
  double y_scale = 0;
  for (int i = 0; i < n_; ++i) {
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
      x(i, j) = FeatureValue(features[j - 1], trials_[i], FloorOf(features[j - 1]));
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

  out.t.assign(k - 1, std::numeric_limits<double>::infinity());
  if (n > k) {
    const double residual_variance = (x * w - t).squaredNorm() / (n - k);
    const Eigen::MatrixXd a_inv = ldlt.solve(Eigen::MatrixXd::Identity(k, k));
    for (int j = 1; j < k; ++j) {
      const double se = std::sqrt(residual_variance * a_inv(j, j));
      if (se > 0) out.t[j - 1] = std::abs(w(j)) / se;
    }
  }
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
  return Prune(log_target, std::move(current));
}

TrialResourceModel::Fitter::Scored TrialResourceModel::Fitter::Prune(bool log_target,
                                                                     Scored current) const {
  // A feature of noise can lower the leave-one-out error by chance; the least clear one goes
  // while any weight is within min_feature_t standard errors of 0. (Judged on the whole
  // selection, not as each joins: a real effect can look weak while another is left out.)
  while (!current.t.empty()) {
    const auto weakest = std::min_element(current.t.begin(), current.t.end());
    if (*weakest >= options_.min_feature_t) break;
    std::vector<std::string> kept = current.fit.features;
    kept.erase(kept.begin() + (weakest - current.t.begin()));
    current = FitWith(log_target, kept);
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

TrialResourceModel::Fit TrialResourceModel::FitResource(const std::vector<TrialParams>& params,
                                                        const std::vector<double>& values,
                                                        bool log_only) const {
  const Fitter fitter(options_, params, values);
  std::optional<Fitter::Scored> best;
  for (bool log_target : {false, true}) {
    if (log_target ? !fitter.AllPositive() : log_only) continue;
    Fitter::Scored current = fitter.SelectFeatures(log_target);
    if (!best || current.fit.loo_error < best->fit.loo_error) best = std::move(current);
  }
  best->fit.margin = fitter.Margin(best->loo);
  return best->fit;
}

TrialResourceModel::Fit TrialResourceModel::FitUsage(double TrialTelemetry::*target) const {
  std::vector<TrialParams> params;
  std::vector<double> values;
  for (const TrialTelemetry& t : trials_) {
    if (t.stopped) continue;
    params.push_back(t.params);
    values.push_back(t.*target);
  }
  return FitResource(params, values, /*log_only=*/false);
}

TrialResourceModel::TimeFit TrialResourceModel::FitTime() const {
  std::vector<const TrialTelemetry*> timed;
  for (const TrialTelemetry& t : trials_) {
    if (LatestUsable(t.curve)) timed.push_back(&t);
  }
  timed = Latest(timed, options_.max_trials);
  TimeFit fit;
  fit.trials = static_cast<int>(timed.size());
  fit.exponent = std::clamp(PooledStepExponent(timed).value_or(1.0),
                            options_.min_step_exponent, options_.max_step_exponent);
  // c_i from each trial's latest point: its whole cost so far, where timing noise weighs least.
  std::vector<TrialParams> params;
  std::vector<double> coefficients;
  for (const TrialTelemetry* t : timed) {
    const StepElapsed last = *LatestUsable(t->curve);
    params.push_back(t->params);
    coefficients.push_back(CoresHeld(*t) * last.elapsed_seconds /
                           std::pow(double(last.step), fit.exponent));
  }
  fit.coefficient = FitResource(params, coefficients, /*log_only=*/true);
  return fit;
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
  if (usage_trials_ == 0 || !std::isfinite(limit_bytes) || limit_bytes <= 0) return;
  TrialResourceRequest req;
  PredictUsage(params, &req);
  const double fit = req.memory_fit_bytes;
  if (fit > 0) out_of_memory_.emplace_back(usage_trials_, limit_bytes / fit - 1);
}

void TrialResourceModel::MergeOutOfMemory(const TrialResourceModel& older) {
  out_of_memory_.insert(out_of_memory_.end(), older.out_of_memory_.begin(),
                        older.out_of_memory_.end());
}

void TrialResourceModel::PredictUsage(const TrialParams& params,
                                      TrialResourceRequest* req) const {
  if (usage_trials_ == 0) {
    req->cpu_cores = options_.default_cpu_cores;
    req->memory_bytes = static_cast<int64_t>(options_.default_memory_bytes);
    req->gpus = options_.default_gpus;
    req->explanation = "no trials that ran to their end yet: defaults";
    return;
  }
  req->learned = true;
  const int n = usage_trials_;
  double max_cpu = 0, max_mem = 0, max_gpu = 0;
  for (const auto& t : trials_) {
    if (t.stopped) continue;
    max_cpu = std::max(max_cpu, t.peak_cpu_cores);
    max_mem = std::max(max_mem, t.peak_memory_bytes);
    max_gpu = std::max(max_gpu, t.gpus_used);
  }
  double cpu = max_cpu, mem = max_mem;
  double cpu_margin = options_.first_margin, mem_margin = options_.first_margin;
  std::string how = absl::StrFormat("largest of %d trial%s", n, n == 1 ? "" : "s");
  if (n >= options_.min_trials_to_fit) {
    if (!memory_fit_) memory_fit_ = FitUsage(&TrialTelemetry::peak_memory_bytes);
    if (!cpu_fit_) cpu_fit_ = FitUsage(&TrialTelemetry::peak_cpu_cores);
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
  req->memory_fit_bytes = std::max(mem, 0.0);
  req->memory_margin = mem_margin;
  req->cpu_cores = std::max(cpu * (1 + cpu_margin), options_.min_cpu_cores);
  req->memory_bytes = static_cast<int64_t>(
      std::ceil(std::max(mem * (1 + mem_margin), options_.min_memory_bytes)));
  // GPUs are whole devices; a trial that used a fraction of one still needs one.
  req->gpus = max_gpu > 0 ? std::max(1, static_cast<int>(std::ceil(max_gpu - 1e-9))) : 0;
  req->explanation = absl::StrFormat("memory: %s, margin %.0f%%", how, 100 * mem_margin);
}

void TrialResourceModel::PredictTime(const TrialParams& params, TrialResourceRequest* req) const {
  if (timed_trials_ == 0) {
    req->core_seconds_explanation = "no trial with elapsed time yet";
    return;
  }
  if (!time_fit_) time_fit_ = FitTime();
  const TimeFit& fit = *time_fit_;
  req->core_seconds_learned = true;
  req->step_exponent = fit.exponent;
  if (fit.trials < options_.min_trials_to_fit) {
    // Too few to choose features by: the mean power law of those there are.
    double log_sum = 0;
    for (const TrialTelemetry& t : trials_) {
      const std::optional<StepElapsed> last = LatestUsable(t.curve);
      if (last) {
        log_sum += std::log(CoresHeld(t) * last->elapsed_seconds) -
                   fit.exponent * std::log(double(last->step));
      }
    }
    req->core_seconds_coefficient = std::exp(log_sum / fit.trials);
    req->core_seconds_margin = options_.first_margin;
    req->core_seconds_explanation = absl::StrFormat(
        "core-seconds: mean of %d trial%s x step^%.2f, margin %.0f%%", fit.trials,
        fit.trials == 1 ? "" : "s", fit.exponent, 100 * req->core_seconds_margin);
    return;
  }
  req->core_seconds_coefficient = Evaluate(fit.coefficient, params);
  req->core_seconds_margin = fit.coefficient.margin;
  const std::string on = fit.coefficient.features.empty()
                             ? "no parameter"
                             : absl::StrJoin(fit.coefficient.features, ", ");
  req->core_seconds_explanation = absl::StrFormat(
      "core-seconds: power-law fit on %s over %d trials x step^%.2f (leave-one-out error "
      "%.1f%%), margin %.0f%%",
      on, fit.trials, fit.exponent, 100 * fit.coefficient.loo_error,
      100 * req->core_seconds_margin);
}

TrialResourceRequest TrialResourceModel::Predict(const TrialParams& params) const {
  TrialResourceRequest req;
  PredictUsage(params, &req);
  PredictTime(params, &req);
  return req;
}

double TrialResourceModel::PredictCoreSeconds(const TrialParams& params, int64_t step) const {
  TrialResourceRequest req;
  PredictTime(params, &req);
  return req.core_seconds_to(step);
}

double TrialResourceModel::step_exponent() const {
  if (timed_trials_ == 0) return 1;
  if (!time_fit_) time_fit_ = FitTime();
  return time_fit_->exponent;
}

void CostModelAccuracy::RecordPrediction(int64_t trial_id, const TrialResourceRequest& predicted) {
  if (predicted.learned || predicted.core_seconds_learned) pending_.emplace(trial_id, predicted);
}

absl::Status CostModelAccuracy::RecordOutcome(int64_t trial_id, const TrialTelemetry& telemetry) {
  if (absl::Status st = ValidateTrialTelemetry(telemetry); !st.ok()) return st;
  const auto it = pending_.find(trial_id);
  if (it == pending_.end()) return absl::OkStatus();
  const TrialResourceRequest predicted = std::move(it->second);
  pending_.erase(it);
  ++predicted_trials_;
  const std::optional<StepElapsed> last = LatestUsable(telemetry.curve);
  if (predicted.core_seconds_learned && last) {
    const double actual = CoresHeld(telemetry) * last->elapsed_seconds;
    core_seconds_errors_.push_back(std::abs(predicted.core_seconds_to(last->step) - actual) /
                                   actual);
  }
  if (predicted.learned && telemetry.peak_memory_bytes > 0) {
    ++memory_trials_;
    const double request = static_cast<double>(predicted.memory_bytes);
    memory_under_predictions_ += telemetry.peak_memory_bytes > request ? 1 : 0;
    if (!telemetry.stopped) {
      memory_slack_.push_back((request - telemetry.peak_memory_bytes) /
                              telemetry.peak_memory_bytes);
    }
  }
  return absl::OkStatus();
}

CostModelReport CostModelAccuracy::Report() const {
  CostModelReport report;
  report.predicted_trials = predicted_trials_;
  report.core_seconds_trials = static_cast<int>(core_seconds_errors_.size());
  report.core_seconds_median_abs_pct_error = Median(core_seconds_errors_);
  report.memory_trials = memory_trials_;
  report.memory_under_predictions = memory_under_predictions_;
  report.memory_median_slack = Median(memory_slack_);
  return report;
}

}  // namespace evoscale::load_model
