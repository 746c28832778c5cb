#include "service/autoscaler/internal/workload_check.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace evoscale::service {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using ::absl::StrFormat;

absl::Status CheckWorkload(const v1::Workload& w) {
  const std::string& n = w.name();
  if (n.empty()) return InvalidArgumentError("workload.name: must not be empty");
  if (n.size() > kMaxWorkloadNameLength) {
    return InvalidArgumentError(StrCat("workload.name: longer than ", kMaxWorkloadNameLength));
  }
  auto ok_char = [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '.' || c == '/';
  };
  if (!std::all_of(n.begin(), n.end(), ok_char) || !absl::ascii_isalnum(n.front()) ||
      !absl::ascii_isalnum(n.back())) {
    return InvalidArgumentError(StrCat(
        "workload.name: \"", n,
        "\" must be lower-case letters, digits, '-', '.' and '/', starting and ending with a "
        "letter or digit"));
  }
  if (!v1::Workload::Kind_IsValid(w.kind())) {
    return InvalidArgumentError(StrCat("workload.kind: unknown kind ", w.kind()));
  }
  if (!v1::Workload::Policy_IsValid(w.policy())) {
    return InvalidArgumentError(StrCat("workload.policy: unknown policy ", w.policy()));
  }
  if (!(w.target_utilization() >= 0 && w.target_utilization() <= 1)) {
    return InvalidArgumentError(StrFormat(
        "workload.target_utilization: %g must be in (0, 1] (or 0 for the default)",
        w.target_utilization()));
  }
  if (w.min_replicas() < 0) return InvalidArgumentError("workload.min_replicas: must be >= 0");
  if (w.max_replicas() < 0) return InvalidArgumentError("workload.max_replicas: must be >= 0");
  if (w.max_replicas() > 0 && w.min_replicas() > w.max_replicas()) {
    return InvalidArgumentError(StrFormat("workload.min_replicas: %d must be <= max_replicas %d",
                                          w.min_replicas(), w.max_replicas()));
  }
  if (!(w.latency_slo_seconds() >= 0) || !std::isfinite(w.latency_slo_seconds())) {
    return InvalidArgumentError("workload.latency_slo_seconds: must be finite and >= 0");
  }
  if (!(w.replica_capacity_qps() >= 0) || !std::isfinite(w.replica_capacity_qps())) {
    return InvalidArgumentError("workload.replica_capacity_qps: must be finite and >= 0");
  }
  for (const auto& [field, rate] : {std::pair{"oom_rate", w.oom_rate()},
                                    std::pair{"throttle_rate", w.throttle_rate()}}) {
    if (!(rate >= 0 && rate <= 0.5)) {
      return InvalidArgumentError(StrFormat(
          "workload.%s: %g must be in [0, 0.5] (a rate per sample; 0 for the default)", field,
          rate));
    }
  }
  if (!(w.request_percentile() >= 0 && w.request_percentile() < 1)) {
    return InvalidArgumentError(StrFormat(
        "workload.request_percentile: %g must be in [0, 1) (0: request = limit)",
        w.request_percentile()));
  }
  if (!(w.startup_delay_seconds() >= 0 && w.startup_delay_seconds() <= 86400)) {
    return InvalidArgumentError(StrFormat(
        "workload.startup_delay_seconds: %g must be in [0, 86400]", w.startup_delay_seconds()));
  }
  if (!(w.demand_quantile() == 0 || (w.demand_quantile() >= 0.5 && w.demand_quantile() < 1))) {
    return InvalidArgumentError(
        StrFormat("workload.demand_quantile: %g must be 0 (the default 0.75) or in [0.5, 1)",
                  w.demand_quantile()));
  }
  return absl::OkStatus();
}

}  // namespace evoscale::service
