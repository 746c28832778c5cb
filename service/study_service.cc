#include "service/study_service.h"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "service/internal/rpc.h"

namespace evoscale::service {

using internal::Assign;

namespace {
// How often a call runs again after its write was fenced off, or its forward found the owner
// gone (killed: connection refused) or hung (no answer within the lease), before the error is
// answered.
constexpr int kRuns = 5;

bool Expired(grpc::CallbackServerContext* ctx) {
  return std::chrono::system_clock::now() >= ctx->deadline();
}
}  // namespace

template <typename Request, typename Response, typename Send>
void StudyServiceImpl::Serve(grpc::CallbackServerContext* ctx, const Request* req,
                             Response* resp, std::function<void(absl::Status)> finish, Send send,
                             int attempt) {
  core_->CallAsync(*req, [this, ctx, req, resp, finish = std::move(finish), send,
                          attempt](auto result) mutable {
    absl::Status st = Assign(std::move(result), resp);
    if (forwarder_ == nullptr || st.ok() || attempt + 1 >= kRuns) {
      finish(std::move(st));
      return;
    }
    if (IsLeaseLost(st)) {  // nothing of it was written: the study's new owner runs it
      Serve(ctx, req, resp, std::move(finish), send, attempt + 1);
      return;
    }
    std::optional<std::string> owner = StudyOwnerAddress(st);
    if (!owner.has_value() || owner->empty() || internal::StudyForwarder::Forwarded(ctx)) {
      finish(std::move(st));
      return;
    }
    forwarder_->Forward(
        *owner, ctx, req, resp, forward_timeout_,
        [this, ctx, req, resp, finish = std::move(finish), send,
         attempt](absl::Status answer) mutable {
          // The owner is gone or hung: by the next run its lease may be free here.
          if ((absl::IsUnavailable(answer) || absl::IsDeadlineExceeded(answer)) &&
              !Expired(ctx)) {
            resp->Clear();
            Serve(ctx, req, resp, std::move(finish), send, attempt + 1);
            return;
          }
          finish(std::move(answer));
        },
        send);
  });
}

#define EVOSCALE_RPC(Method, Request, Response, RoleNeeded)                                  \
  grpc::ServerUnaryReactor* StudyServiceImpl::Method(                                        \
      grpc::CallbackServerContext* ctx, const v1::Request* req, v1::Response* resp) {        \
    return internal::HandleUnaryAsync(                                                       \
        ctx, #Method, RoleNeeded, *auth_, *metrics_,                                         \
        [this, ctx, req, resp](std::function<void(absl::Status)> finish) {                   \
          Serve(ctx, req, resp, std::move(finish),                                           \
                [](v1::StudyService::Stub* stub, grpc::ClientContext* call,                  \
                   const v1::Request* out, v1::Response* in,                                 \
                   std::function<void(grpc::Status)> done) {                                 \
                  stub->async()->Method(call, out, in, std::move(done));                     \
                },                                                                           \
                0);                                                                          \
        });                                                                                  \
  }

EVOSCALE_RPC(CreateStudy, CreateStudyRequest, Study, Role::kWriter)
EVOSCALE_RPC(GetStudy, GetStudyRequest, Study, Role::kReader)
EVOSCALE_RPC(ListStudies, ListStudiesRequest, ListStudiesResponse, Role::kReader)
EVOSCALE_RPC(DeleteStudy, DeleteStudyRequest, DeleteStudyResponse, Role::kAdmin)
EVOSCALE_RPC(SetStudyState, SetStudyStateRequest, Study, Role::kWriter)
EVOSCALE_RPC(SuggestTrials, SuggestTrialsRequest, SuggestTrialsResponse, Role::kWriter)
EVOSCALE_RPC(CreateTrial, CreateTrialRequest, Trial, Role::kWriter)
EVOSCALE_RPC(GetTrial, GetTrialRequest, Trial, Role::kReader)
EVOSCALE_RPC(ListTrials, ListTrialsRequest, ListTrialsResponse, Role::kReader)
EVOSCALE_RPC(AddTrialMeasurement, AddTrialMeasurementRequest, Trial, Role::kWriter)
EVOSCALE_RPC(CompleteTrial, CompleteTrialRequest, Trial, Role::kWriter)
EVOSCALE_RPC(CheckTrialEarlyStoppingState, CheckTrialEarlyStoppingStateRequest,
             CheckTrialEarlyStoppingStateResponse, Role::kWriter)  // a stop decision is kept
EVOSCALE_RPC(StopTrial, StopTrialRequest, Trial, Role::kWriter)
EVOSCALE_RPC(ListOptimalTrials, ListOptimalTrialsRequest, ListOptimalTrialsResponse,
             Role::kReader)
EVOSCALE_RPC(DeleteTrial, DeleteTrialRequest, DeleteTrialResponse, Role::kAdmin)
EVOSCALE_RPC(UpdateMetadata, UpdateMetadataRequest, UpdateMetadataResponse, Role::kWriter)
EVOSCALE_RPC(GetParameterImportance, GetParameterImportanceRequest,
             GetParameterImportanceResponse, Role::kReader)

#undef EVOSCALE_RPC

}  // namespace evoscale::service
