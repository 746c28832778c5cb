// Several evoscaled replicas on one PostgreSQL database: a call on a study that another
// replica owns is forwarded there, once (a forwarded call carries kForwardedHeader, and its
// receiver answers rather than forwarding again). One channel per owner's address, kept;
// plaintext, or TLS when evoscaled serves TLS and is given the CA of its peers' certificates.
#ifndef EVOSCALE_SERVICE_INTERNAL_FORWARDER_H_
#define EVOSCALE_SERVICE_INTERNAL_FORWARDER_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_context.h"

namespace evoscale::service::internal {

inline constexpr char kForwardedHeader[] = "evoscale-forwarded";

// Thread-safe.
class StudyForwarder {
 public:
  // `credentials` for the channels to the other replicas: plaintext, or TLS verifying their
  // certificates (--tls-peer-ca), with this replica's own as the client's under mutual TLS.
  explicit StudyForwarder(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  // Whether the call came from another replica (then it is not forwarded again).
  static bool Forwarded(grpc::CallbackServerContext* ctx) {
    return ctx->client_metadata().count(kForwardedHeader) > 0;
  }

  // Sends the call to the replica at `address` with the caller's token, within the caller's
  // deadline and at most `timeout`, and calls `finish` with its answer (`resp` filled).
  // `send(stub, context, request, response, done)` starts the stub's async call of the same RPC.
  template <typename Request, typename Response, typename Send>
  void Forward(const std::string& address, grpc::CallbackServerContext* ctx, const Request* req,
               Response* resp, std::chrono::milliseconds timeout,
               std::function<void(absl::Status)> finish, Send send) {
    auto call = std::make_shared<grpc::ClientContext>();
    call->AddMetadata(kForwardedHeader, "1");
    auto token = ctx->client_metadata().find("authorization");
    if (token != ctx->client_metadata().end()) {
      call->AddMetadata("authorization", std::string(token->second.data(), token->second.size()));
    }
    call->set_deadline(std::min(ctx->deadline(), std::chrono::system_clock::now() + timeout));
    send(Stub(address), call.get(), req, resp, [call, finish = std::move(finish)](grpc::Status st) {
      finish(absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message()));
    });
  }

 private:
  v1::StudyService::Stub* Stub(const std::string& address);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::StudyService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_INTERNAL_FORWARDER_H_
