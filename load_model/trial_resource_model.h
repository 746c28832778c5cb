// Predicts the resource request of a training trial from its hyperparameters, fitted to the
// usage of earlier trials of the same study, with a margin taken from the model's own errors.
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

struct TrialTelemetry {
  TrialParams params;
  double peak_cpu_cores = 0;     // the cores it kept busy (mean over its run is fine)
  double peak_memory_bytes = 0;
  double gpus_used = 0;  // Peak number of GPUs busy (fractional where shared).
};

struct TrialResourceRequest {
  double cpu_cores = 0;
  int64_t memory_bytes = 0;
  int gpus = 0;
  // The fitted peak memory before the margin, and the margin (request = fit x (1 + margin));
  // 0 before any trial.
  double memory_fit_bytes = 0;
  double memory_margin = 0;
  bool learned = false;  // false: the defaults (no finished trial yet)
  std::string explanation;
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
};

// Per resource (memory, CPU), a linear least-squares model chosen by leave-one-out error:
// forward selection over the parameters and their logarithms, for the usage itself and for its
// logarithm (a power law), keeping a feature only while it lowers the mean leave-one-out
// relative error. Its leave-one-out errors on the latest trials set the margin, so a model that
// predicts well asks for little more than it predicts, and one that has just been wrong asks
// for more.
// Not thread-safe. AddTrial is O(1); the first Predict after it refits
// (O(features^2 x trials x features^2), under a millisecond for 256 trials and 10 parameters);
// later Predicts are O(features).
class TrialResourceModel {
 public:
  explicit TrialResourceModel(TrialResourceModelOptions options = {});

  // INVALID_ARGUMENT naming the field for negative or non-finite usage or parameters.
  absl::Status AddTrial(const TrialTelemetry& telemetry);
  // A run with `params` was OOM-killed at `limit_bytes`: it needed more than the fit then
  // gave times (1 + margin). Counted as an under-prediction of at least that much until
  // `recent_errors` more trials have finished. No-op before any trial.
  void AddOutOfMemory(const TrialParams& params, double limit_bytes);
  // Takes over the OOM kills `older` (an earlier fit of the same study) has seen.
  void MergeOutOfMemory(const TrialResourceModel& older);
  TrialResourceRequest Predict(const TrialParams& params) const;
  int num_trials() const { return static_cast<int>(trials_.size()); }

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
  // FitResource's ridge fits and feature selection over one window of trials (in the .cc).
  class Fitter;
  Fit FitResource(double TrialTelemetry::*target) const;
  static double Evaluate(const Fit& fit, const TrialParams& params);

  const TrialResourceModelOptions options_;
  std::vector<TrialTelemetry> trials_;
  // OOM kills: (trials_.size() when it happened, the under-prediction it shows).
  std::vector<std::pair<int, double>> out_of_memory_;
  // Refitted on the first Predict after AddTrial.
  mutable std::optional<Fit> memory_fit_, cpu_fit_;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_
