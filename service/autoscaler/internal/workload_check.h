// A workload definition on its own, before it replaces any state: its fields checked.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_WORKLOAD_CHECK_H_
#define EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_WORKLOAD_CHECK_H_

#include "absl/status/status.h"
#include "evoscale/v1/autoscaler.pb.h"

namespace evoscale::service {

inline constexpr int kMaxWorkloadNameLength = 253;

// OK, or INVALID_ARGUMENT naming the first field of `w` that is out of its range (its name's
// form and length, an unknown kind or policy, rates, replicas, percentiles, delays).
absl::Status CheckWorkload(const v1::Workload& w);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_WORKLOAD_CHECK_H_
