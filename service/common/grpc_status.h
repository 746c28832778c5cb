// absl::Status -> grpc::Status at the edge (evoscaled's services and evoscale-serve's). The codes
// share numbering one to one.
#ifndef EVOSCALE_SERVICE_COMMON_GRPC_STATUS_H_
#define EVOSCALE_SERVICE_COMMON_GRPC_STATUS_H_

#include <array>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace evoscale::service {

// The canonical name of a code ("OK", "NOT_FOUND", ...), for metrics labels. Never allocates.
inline const std::string& StatusCodeName(absl::StatusCode code) {
  static const auto* names = [] {
    auto* m = new std::array<std::string, 17>;
    for (int i = 0; i < 17; ++i) {
      (*m)[i] = absl::StatusCodeToString(static_cast<absl::StatusCode>(i));
    }
    return m;
  }();
  static const std::string* unknown = new std::string("UNKNOWN");
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? (*names)[i] : *unknown;
}

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_GRPC_STATUS_H_
