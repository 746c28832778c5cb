// absl::Status -> grpc::Status at the edge. The codes share numbering one to one.
#ifndef EVOSCALE_SERVICE_GRPC_STATUS_H_
#define EVOSCALE_SERVICE_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace evoscale::service {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_GRPC_STATUS_H_
