// grpc.health.v1.Health/Check through a generic stub (the tests link no health proto).
#ifndef EVOSCALE_TESTS_E2E_GRPC_HEALTH_H_
#define EVOSCALE_TESTS_E2E_GRPC_HEALTH_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace evoscale::testing {

// The status HealthCheckResponse bytes carry for SERVING: field 1, varint 1.
inline const std::string kHealthServing("\x08\x01", 2);

// Calls Check{service} on `address` (plaintext); the response's bytes, or the call's error.
inline absl::StatusOr<std::string> HealthCheck(const std::string& address,
                                               const std::string& service) {
  grpc::GenericStub generic(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  // HealthCheckRequest{service = 1}, a string shorter than 128 bytes, encoded by hand.
  const std::string encoded =
      service.empty() ? ""
                      : absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())),
                                     service);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(15))) {
    return absl::DeadlineExceededError("no answer to Health/Check");
  }
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat(service, ": ", status.error_message()));
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable response");
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_E2E_GRPC_HEALTH_H_
