#include "service/autoscaler/internal/sample_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/time_util.h"

namespace evoscale::service {

using ::absl::StrCat;
using ::absl::StrFormat;
using ::google::protobuf::util::TimeUtil;

double ToUnixSecondsDouble(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + t.nanos() * 1e-9;
}

std::optional<SampleRejection> CheckSampleFields(const v1::TelemetrySample& s, double now) {
  if (s.instance().empty() || s.instance().size() > kMaxInstanceNameLength) {
    return SampleRejection{"bad_field",
                           StrCat("instance: must be 1 to ", kMaxInstanceNameLength, " bytes")};
  }
  if (s.container().size() > kMaxInstanceNameLength) {
    return SampleRejection{"bad_field",
                           StrCat("container: longer than ", kMaxInstanceNameLength, " bytes")};
  }
  const struct {
    const char* name;
    double value;
  } fields[] = {{"cpu_cores", s.cpu_cores()},
                {"memory_bytes", s.memory_bytes()},
                {"gpu_utilization", s.gpu_utilization()},
                {"gpu_memory_bytes", s.gpu_memory_bytes()},
                {"qps", s.qps()},
                {"latency_seconds", s.latency_seconds()},
                {"cpu_request_cores", s.cpu_request_cores()}};
  for (const auto& f : fields) {
    if (!std::isfinite(f.value)) {
      return SampleRejection{"not_finite", StrFormat("%s: %g is not finite", f.name, f.value)};
    }
    if (f.value < 0) {
      return SampleRejection{"negative", StrFormat("%s: %g is negative", f.name, f.value)};
    }
  }
  if (s.versions_size() > kMaxVersionNames) {
    return SampleRejection{
        "bad_field", StrCat("versions: ", s.versions_size(), " names; at most ", kMaxVersionNames)};
  }
  for (const auto& [name, version] : s.versions()) {
    if (name.empty() || name.size() > kMaxVersionNameLength) {
      return SampleRejection{"bad_field",
                             StrCat("versions: name \"", name.substr(0, 80), "\" must be 1 to ",
                                    kMaxVersionNameLength, " bytes")};
    }
    if (version < 0) {
      return SampleRejection{"negative", StrCat("versions[", name, "]: ", version, " is negative")};
    }
  }
  if (!s.has_time()) return SampleRejection{"bad_field", "time: must be set"};
  const google::protobuf::Timestamp& t = s.time();
  if (t.seconds() < TimeUtil::kTimestampMinSeconds ||
      t.seconds() > TimeUtil::kTimestampMaxSeconds || t.nanos() < 0 || t.nanos() > 999999999) {
    return SampleRejection{
        "bad_field",
        StrFormat("time: seconds %d, nanos %d is not a valid Timestamp", t.seconds(), t.nanos())};
  }
  if (t.seconds() <= 0) {
    return SampleRejection{"bad_field",
                           StrCat("time: ", TimeUtil::ToString(t), " is not after 1970-01-01")};
  }
  if (s.gpu_utilization() > 1) {
    return SampleRejection{"bad_field",
                           StrFormat("gpu_utilization: %g must be in [0, 1]", s.gpu_utilization())};
  }
  if (const double ahead = ToUnixSecondsDouble(t) - now; ahead > kMaxFutureSkewSeconds) {
    return SampleRejection{"future", StrFormat("time: %s is %.0f s ahead of the server's clock",
                                               TimeUtil::ToString(t), ahead)};
  }
  return std::nullopt;
}

TelemetryRow ToRow(const v1::TelemetrySample& s, int64_t instance_id) {
  TelemetryRow r;
  r.instance_id = instance_id;
  r.timestamp = ToUnixSecondsDouble(s.time());
  r.cpu_cores = s.cpu_cores();
  r.memory_bytes = s.memory_bytes();
  r.gpu_utilization = s.gpu_utilization();
  r.gpu_memory_bytes = s.gpu_memory_bytes();
  r.qps = s.qps();
  r.latency_ms = s.latency_seconds() * 1000;
  r.oom = s.oom();
  r.cpu_request_cores = s.cpu_request_cores();
  r.versions.assign(s.versions().begin(), s.versions().end());
  std::sort(r.versions.begin(), r.versions.end());
  return r;
}

}  // namespace evoscale::service
