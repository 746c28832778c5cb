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

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_STUDY_LIMITS_H_
