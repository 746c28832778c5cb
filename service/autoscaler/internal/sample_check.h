// One telemetry sample on its own, before any workload state is consulted: its fields checked,
// and the row the store keeps of it.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_SAMPLE_CHECK_H_
#define EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_SAMPLE_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "evoscale/v1/autoscaler.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "service/store/telemetry_store.h"

namespace evoscale::service {

inline constexpr int kMaxInstanceNameLength = 253;
// TelemetrySample.versions: at most this many names of at most this many bytes.
inline constexpr int kMaxVersionNames = 8;
inline constexpr size_t kMaxVersionNameLength = 64;
// Samples stamped further ahead of the server's clock than this are rejected.
inline constexpr double kMaxFutureSkewSeconds = 300;

// Why a sample is refused: the reason as ReportTelemetryResponse counts it and a message
// naming the field.
struct SampleRejection {
  const char* reason;
  std::string message;
};

double ToUnixSecondsDouble(const google::protobuf::Timestamp& t);

// The first problem of `s`'s own fields (a name's length, a value not finite or negative, bad
// versions, a missing, invalid or far-future time against `now`, unix seconds), or nullopt
// when it is well formed.
std::optional<SampleRejection> CheckSampleFields(const v1::TelemetrySample& s, double now);

// The row of `s` for the series `instance_id`.
TelemetryRow ToRow(const v1::TelemetrySample& s, int64_t instance_id);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_SAMPLE_CHECK_H_
