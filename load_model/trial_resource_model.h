// Predicts the resource request of a training trial from its hyperparameters, fitted to the
// telemetry of earlier trials of the same study, with a safety margin.
#ifndef EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_
#define EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace evoscale::load_model {

// Numeric hyperparameters of a trial (categorical ones are left out or one-hot encoded by
// the caller).
using TrialParams = std::map<std::string, double>;

struct TrialTelemetry {
  TrialParams params;
  double peak_cpu_cores = 0;
  double peak_memory_bytes = 0;
  double gpus_used = 0;  // Peak number of GPUs busy (fractional where shared).
};

struct TrialResourceRequest {
  double cpu_cores = 0;
  int64_t memory_bytes = 0;
  int gpus = 0;
  std::string explanation;
};

struct TrialResourceModelOptions {
  double safety_margin = 0.2;             // Request = (fit + 2 rmse) x (1 + margin).
  double default_cpu_cores = 1.0;         // Before any trial has finished.
  double default_memory_bytes = 2.0 * (1 << 30);
  int default_gpus = 0;
  double min_cpu_cores = 0.1;
  double min_memory_bytes = 64.0 * (1 << 20);
  double ridge = 1e-3;                    // On standardised features.
};

// Linear least squares per resource on the numeric parameters (standardised), once there
// are more trials than parameters; before that, the largest observed usage with the margin.
// Not thread-safe; AddTrial is O(1) amortised, Predict refits (O(trials x params^2)).
class TrialResourceModel {
 public:
  explicit TrialResourceModel(TrialResourceModelOptions options = {});

  // INVALID_ARGUMENT naming the field for negative or non-finite usage or parameters.
  absl::Status AddTrial(const TrialTelemetry& telemetry);
  TrialResourceRequest Predict(const TrialParams& params) const;
  int num_trials() const { return static_cast<int>(trials_.size()); }

 private:
  const TrialResourceModelOptions options_;
  std::vector<TrialTelemetry> trials_;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_TRIAL_RESOURCE_MODEL_H_
