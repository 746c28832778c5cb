// The trial cost model: predicts a training trial's resource request (peak memory, cores) and
// the core-seconds it takes to reach a step, from its hyperparameters, fitted to the usage and
// progress of earlier trials of the same study, each with a margin taken from the model's own
// recent errors. CostModelAccuracy keeps the score of the predictions made before trials ran.
#ifndef EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_
#define EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace evoscale::load_model {

// Numeric hyperparameters of a trial (categorical ones are left out or one-hot encoded by
// the caller).
using TrialParams = std::map<std::string, double>;

// One point of a trial's progress: it had reached `step` `elapsed_seconds` wall seconds after
// it started (evoscale's Measurement.step and elapsed_seconds).
struct StepElapsed {
  int64_t step = 0;
  double elapsed_seconds = 0;
};

struct TrialTelemetry {
  TrialParams params;
  double peak_cpu_cores = 0;     // the cores it kept busy (mean over its run is fine)
  double peak_memory_bytes = 0;
  double gpus_used = 0;  // Peak number of GPUs busy (fractional where shared).
  // Its progress in measurement order: steps never go down, nor does elapsed time as they go
  // up. Points at step 0 or 0 seconds are kept but teach nothing. Empty: it teaches no time.
  std::vector<StepElapsed> curve;
  // The cores it held (its request) while it ran: its core-seconds to a step are cores_held x
  // the elapsed seconds there. 0: unknown, counted as one core, as a study's budget counts it.
  double cores_held = 0;
  // Stopped before its end (early stopping, StopTrial): its curve is valid up to where it
  // stopped and teaches time, but its peaks are lower bounds of a whole run's, so the usage
  // fits (memory, CPU, GPUs) leave it out.
  bool stopped = false;
};

// OK, or INVALID_ARGUMENT naming the field: negative or non-finite usage, cores_held or
// parameters; a negative step or a negative or non-finite elapsed_seconds in the curve; a
// curve whose step or elapsed time goes down.
absl::Status ValidateTrialTelemetry(const TrialTelemetry& telemetry);

struct TrialResourceRequest {
  double cpu_cores = 0;
  int64_t memory_bytes = 0;
  int gpus = 0;
  // The fitted peak memory before the margin, and the margin (request = fit x (1 + margin));
  // 0 before any trial.
  double memory_fit_bytes = 0;
  double memory_margin = 0;
  bool learned = false;  // false: the defaults (no trial that ran to its end yet)
  std::string explanation;

  // Core-seconds to reach step s: core_seconds_coefficient x s^step_exponent, the fit before
  // its margin (an upper estimate is that x (1 + core_seconds_margin)). Before any trial with
  // a curve: core_seconds_learned false, the coefficient and margin 0, the exponent 1.
  double core_seconds_coefficient = 0;
  double step_exponent = 1;
  double core_seconds_margin = 0;
  bool core_seconds_learned = false;
  std::string core_seconds_explanation;
  // The fitted core-seconds to reach `step` (0 for step <= 0 or before any trial with a curve).
  double core_seconds_to(int64_t step) const;
  double core_seconds_upper_to(int64_t step) const {
    return core_seconds_to(step) * (1 + core_seconds_margin);
  }
};

struct TrialResourceModelOptions {
  // Margin = the worst relative under-prediction among the leave-one-out predictions of the
  // `recent_errors` latest trials, plus min_margin; at most max_margin.
  double min_margin = 0.05;
  double max_margin = 1.0;
  int recent_errors = 8;
  // Until min_trials_to_fit trials: the largest usage seen, x (1 + first_margin).
  int min_trials_to_fit = 3;
  double first_margin = 0.2;
  int max_trials = 256;                   // fitted on the latest ones
  double default_cpu_cores = 1.0;         // Before any trial has finished.
  double default_memory_bytes = 2.0 * (1 << 30);
  int default_gpus = 0;
  double min_cpu_cores = 0.1;
  double min_memory_bytes = 64.0 * (1 << 20);
  double ridge = 1e-6;                    // On standardised features.
  // A fit keeps a feature only if its weight is at least this many standard errors from 0.
  double min_feature_t = 3.0;
  // The study's exponent of elapsed time in steps is clamped to this range; 1 until some trial
  // has reported two steps.
  double min_step_exponent = 0.2;
  double max_step_exponent = 2.0;
};

// Per resource (memory, CPU), a linear least-squares model chosen by leave-one-out error:
// forward selection over the parameters and their logarithms, for the usage itself and for its
// logarithm (a power law), keeping a feature only while it lowers the mean leave-one-out
// relative error, then dropping, weakest first, those whose weights are not min_feature_t
// standard errors away from 0 (noise lowers a leave-one-out error by chance too). Its
// leave-one-out errors on the latest trials set the margin, so a model that
// predicts well asks for little more than it predicts, and one that has just been wrong asks
// for more.
// Time: core_seconds(params, s) = c(params) x s^g. The exponent g is the study's, fitted by
// least squares of log elapsed seconds on log step over every point of the latest trials'
// curves, with an intercept per trial (steps cost non-linearly: a quarter of the data can cost
// half the time); c(params) by the same forward-selected least squares on log c_i, where c_i is
// a trial's latest cumulative core-seconds over its step^g (its total cost, the least noisy
// point), so that stopped trials teach time up to where they stopped. Its margin, as memory's,
// is its worst recent leave-one-out under-prediction plus min_margin.
// Not thread-safe. AddTrial is O(1) (it keeps every trial's telemetry, curve included); the
// first Predict after it refits (O(features^2 x trials x features^2) per fit plus O(points) for
// the exponent, under a millisecond for 256 trials and 10 parameters); later Predicts are
// O(features).
class TrialResourceModel {
 public:
  explicit TrialResourceModel(TrialResourceModelOptions options = {});

  // ValidateTrialTelemetry's INVALID_ARGUMENT (nothing added) for bad telemetry.
  absl::Status AddTrial(const TrialTelemetry& telemetry);
  // A run with `params` was OOM-killed at `limit_bytes`: it needed more than the fit then
  // gave times (1 + margin). Counted as an under-prediction of at least that much until
  // `recent_errors` more trials have finished. No-op before any trial that ran to its end.
  void AddOutOfMemory(const TrialParams& params, double limit_bytes);
  // Takes over the OOM kills `older` (an earlier fit of the same study) has seen.
  void MergeOutOfMemory(const TrialResourceModel& older);
  // The request and the core-seconds curve for a trial with `params`.
  TrialResourceRequest Predict(const TrialParams& params) const;
  // Predict(params).core_seconds_to(step): the fitted core-seconds to reach `step`; 0 before
  // any trial with a curve.
  double PredictCoreSeconds(const TrialParams& params, int64_t step) const;
  // The study's fitted exponent of elapsed time in steps (1 before two steps of one trial).
  double step_exponent() const;
  int num_trials() const { return static_cast<int>(trials_.size()); }  // all added
  int num_usage_trials() const { return usage_trials_; }  // ran to their end: usage fits
  int num_timed_trials() const { return timed_trials_; }  // with a point: the time fit

 private:
  // One resource's fitted model.
  struct Fit {
    bool log_target = false;
    std::vector<std::string> features;  // "name" or "log:name"
    std::vector<double> floor;          // a log feature's smallest fitted value (its clamp)
    std::vector<double> mean, scale;    // of each feature over the trials
    std::vector<double> weights;        // intercept first
    double margin = 0;
    double loo_error = 0;  // mean relative leave-one-out error
  };
  // The time model: the study's step exponent and the fit of log c(params).
  struct TimeFit {
    double exponent = 1;
    Fit coefficient;
    int trials = 0;  // the trials it was fitted on
  };
  // FitResource's ridge fits and feature selection over one window of trials (in the .cc).
  class Fitter;
  // The fit of `values` (one per trial, oldest first) on `params`; only power laws when
  // `log_only`.
  Fit FitResource(const std::vector<TrialParams>& params, const std::vector<double>& values,
                  bool log_only) const;
  // The fit of one usage over the trials that ran to their end.
  Fit FitUsage(double TrialTelemetry::*target) const;
  TimeFit FitTime() const;
  // Fills `req`'s memory, CPU and GPUs; then its core-seconds curve.
  void PredictUsage(const TrialParams& params, TrialResourceRequest* req) const;
  void PredictTime(const TrialParams& params, TrialResourceRequest* req) const;
  static double Evaluate(const Fit& fit, const TrialParams& params);

  const TrialResourceModelOptions options_;
  std::vector<TrialTelemetry> trials_;
  int usage_trials_ = 0;  // of trials_, not stopped
  int timed_trials_ = 0;  // of trials_, with a point of positive step and elapsed time
  // OOM kills: (usage_trials_ when it happened, the under-prediction it shows).
  std::vector<std::pair<int, double>> out_of_memory_;
  // Refitted on the first Predict after AddTrial.
  mutable std::optional<Fit> memory_fit_, cpu_fit_;
  mutable std::optional<TimeFit> time_fit_;
};

// How well the predictions made for a study's trials before they ran did, once they ended
// (the fields of evoscale.v1.CostModelReport). Fractions: 0.12 is 12%.
struct CostModelReport {
  int predicted_trials = 0;  // ended trials that had a learned prediction
  // Of those, the ones with a core-seconds prediction and a point to score it at (the latest
  // point of their curve), and the median over them of |predicted - actual| / actual
  // core-seconds to the step they reached.
  int core_seconds_trials = 0;
  double core_seconds_median_abs_pct_error = 0;
  // Of those, the ones with a learned memory request and a measured peak; how many peaked
  // above the request (a stopped trial too: it would have been killed); and the median of
  // (request - peak) / peak over those that ran to their end (a stopped trial's peak is a
  // lower bound, so its slack would flatter nothing but the margin).
  int memory_trials = 0;
  int memory_under_predictions = 0;
  double memory_median_slack = 0;
};

// The accuracy bookkeeping of one study's cost model: the prediction made for each trial before
// it ran (from the trials that had ended before it), scored when the trial ends.
// Not thread-safe. RecordPrediction and RecordOutcome are O(log pending); Report is
// O(trials log trials); memory is O(trials).
class CostModelAccuracy {
 public:
  // Records what was predicted for trial `trial_id` before it ran. The first prediction of a
  // trial is the one scored (a later one, e.g. at a retry, knew more); one that learned
  // nothing (neither `learned` nor `core_seconds_learned`) is not recorded.
  void RecordPrediction(int64_t trial_id, const TrialResourceRequest& predicted);
  // Trial `trial_id` ended with `telemetry`: scores its prediction and forgets it. OK and
  // nothing scored for a trial without a recorded prediction; ValidateTrialTelemetry's
  // INVALID_ARGUMENT (nothing scored, the prediction kept) for bad telemetry.
  absl::Status RecordOutcome(int64_t trial_id, const TrialTelemetry& telemetry);
  CostModelReport Report() const;
  int pending() const { return static_cast<int>(pending_.size()); }

 private:
  std::map<int64_t, TrialResourceRequest> pending_;  // by trial id, not yet ended
  int predicted_trials_ = 0;
  std::vector<double> core_seconds_errors_;  // |predicted - actual| / actual, one per trial
  int memory_trials_ = 0;
  int memory_under_predictions_ = 0;
  std::vector<double> memory_slack_;  // (request - peak) / peak of trials that ran to the end
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_
