// What every gRPC handler of evoscaled does around its core call: check the caller's token,
// convert the status, record the RPC's metrics, finish the reactor.
#ifndef EVOSCALE_SERVICE_INTERNAL_RPC_H_
#define EVOSCALE_SERVICE_INTERNAL_RPC_H_

#include <chrono>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "service/auth.h"
#include "service/common/grpc_status.h"
#include "service/metrics.h"

namespace evoscale::service::internal {

// Moves a successful result into the response message.
template <typename T>
absl::Status Assign(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return result.status();
  *out = *std::move(result);
  return absl::OkStatus();
}
// A call without a result (its response message stays empty).
template <typename T>
absl::Status Assign(absl::Status status, T* /*out*/) {
  return status;
}

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The caller's `authorization` metadata checked against `role`.
inline absl::Status Authorize(grpc::CallbackServerContext* ctx, const TokenAuth& auth,
                              Role role) {
  if (!auth.enabled()) return absl::OkStatus();
  auto it = ctx->client_metadata().find("authorization");
  absl::string_view header;
  if (it != ctx->client_metadata().end()) {
    header = absl::string_view(it->second.data(), it->second.size());
  }
  return auth.Check(header, role);
}

// A unary handler: the token check, then `fn()` (returning absl::Status), then the metric and
// the reactor's Finish.
template <typename Fn>
grpc::ServerUnaryReactor* HandleUnary(grpc::CallbackServerContext* ctx, const char* method,
                                      Role role, const TokenAuth& auth, ServiceMetrics& metrics,
                                      Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = Authorize(ctx, auth, role);
  if (status.ok()) status = fn();
  metrics.RecordRpc(method, StatusCodeName(status.code()), SecondsSince(start));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A unary handler whose work finishes later (possibly on another thread): the token check,
// then `fn(finish)`; `fn` calls `finish(status)` exactly once, after filling the response.
// The reactor finishes (and the RPC's metric is recorded) only then.
template <typename Fn>
grpc::ServerUnaryReactor* HandleUnaryAsync(grpc::CallbackServerContext* ctx, const char* method,
                                           Role role, const TokenAuth& auth,
                                           ServiceMetrics& metrics, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::function<void(absl::Status)> finish = [reactor, method, &metrics,
                                              start](absl::Status status) {
    metrics.RecordRpc(method, StatusCodeName(status.code()), SecondsSince(start));
    reactor->Finish(ToGrpcStatus(status));
  };
  if (absl::Status status = Authorize(ctx, auth, role); !status.ok()) {
    finish(status);
    return reactor;
  }
  fn(std::move(finish));
  return reactor;
}

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_INTERNAL_RPC_H_
