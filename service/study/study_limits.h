// The study API's limits and defaults: what one request may ask for or one trial may hold, and
// what a spec that leaves a setting at 0 gets. Requests beyond a limit are INVALID_ARGUMENT
// (or, for a trial's measurements, RESOURCE_EXHAUSTED) naming the field.
#ifndef EVOSCALE_SERVICE_STUDY_STUDY_LIMITS_H_
#define EVOSCALE_SERVICE_STUDY_STUDY_LIMITS_H_

namespace evoscale::service {

inline constexpr int kMaxSuggestionCount = 1000;
inline constexpr int kMaxPageSize = 1000;
inline constexpr int kDefaultPageSize = 100;
inline constexpr double kDefaultHeartbeatTimeoutSeconds = 600;
inline constexpr int kDefaultMaxTrialRetries = 3;
inline constexpr int kMaxMeasurementsPerTrial = 100000;

// The cost model's prediction for a managed trial, as the scheduler notes it in the trial's
// metadata before its first run (RerunTrialRequest.metadata): core-seconds to step s =
// coefficient x s^exponent, and the memory it was given from the model (absent while the
// request was the template's). Study.cost_model is computed from them.
inline constexpr char kCostModelCoefficient[] = "evoscale/cost_model.core_seconds_coefficient";
inline constexpr char kCostModelExponent[] = "evoscale/cost_model.step_exponent";
inline constexpr char kCostModelMemory[] = "evoscale/cost_model.memory_bytes";

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_STUDY_LIMITS_H_
