#include "service/study_service.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "service/internal/rpc.h"

namespace evoscale::service {

using internal::Assign;

// Each RPC runs its StudyCore call and answers once what the call wrote is durable: at once
// with durability "process", from the store's committer thread with "power" (the handler's
// thread is free meanwhile, so concurrent writers share fsyncs).
#define EVOSCALE_RPC(Method, Request, Response, RoleNeeded)                                  \
  grpc::ServerUnaryReactor* StudyServiceImpl::Method(                                        \
      grpc::CallbackServerContext* ctx, const v1::Request* req, v1::Response* resp) {        \
    return internal::HandleUnaryAsync(                                                       \
        ctx, #Method, RoleNeeded, *auth_, *metrics_,                                         \
        [this, req, resp](std::function<void(absl::Status)> finish) {                        \
          core_->CallAsync(*req,      [resp, finish = std::move(finish)](auto result) {       \
            finish(Assign(std::move(result), resp));                                         \
          });                                                                                \
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
