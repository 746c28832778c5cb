// absl::Time to and from the protobuf Timestamp the study API stores (nanosecond precision).
#ifndef EVOSCALE_SERVICE_STUDY_INTERNAL_PROTO_TIME_H_
#define EVOSCALE_SERVICE_STUDY_INTERNAL_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/protobuf/util/time_util.h"

namespace evoscale::service::internal {

inline google::protobuf::Timestamp ToProto(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

inline absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixNanos(google::protobuf::util::TimeUtil::TimestampToNanoseconds(t));
}

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STUDY_INTERNAL_PROTO_TIME_H_
