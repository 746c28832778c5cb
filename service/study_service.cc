#include "service/study_service.h"

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "service/internal/rpc.h"

namespace evoscale::service {

using internal::Assign;

#define EVOSCALE_RPC(Method, Request, Response, RoleNeeded, Body)                      \
  grpc::ServerUnaryReactor* StudyServiceImpl::Method(                                 \
      grpc::CallbackServerContext* ctx, const v1::Request* req, v1::Response* resp) { \
    return internal::HandleUnary(ctx, #Method, RoleNeeded, *auth_, *metrics_,         \
                                 [&]() -> absl::Status { Body });                    \
  }

EVOSCALE_RPC(CreateStudy, CreateStudyRequest, Study, Role::kWriter,
             return Assign(core_->CreateStudy(*req), resp);)
EVOSCALE_RPC(GetStudy, GetStudyRequest, Study, Role::kReader,
             return Assign(core_->GetStudy(*req), resp);)
EVOSCALE_RPC(ListStudies, ListStudiesRequest, ListStudiesResponse, Role::kReader,
             return Assign(core_->ListStudies(*req), resp);)
EVOSCALE_RPC(DeleteStudy, DeleteStudyRequest, DeleteStudyResponse, Role::kAdmin,
             (void)resp; return core_->DeleteStudy(*req);)
EVOSCALE_RPC(SetStudyState, SetStudyStateRequest, Study, Role::kWriter,
             return Assign(core_->SetStudyState(*req), resp);)
EVOSCALE_RPC(SuggestTrials, SuggestTrialsRequest, SuggestTrialsResponse, Role::kWriter,
             return Assign(core_->SuggestTrials(*req), resp);)
EVOSCALE_RPC(CreateTrial, CreateTrialRequest, Trial, Role::kWriter,
             return Assign(core_->CreateTrial(*req), resp);)
EVOSCALE_RPC(GetTrial, GetTrialRequest, Trial, Role::kReader,
             return Assign(core_->GetTrial(*req), resp);)
EVOSCALE_RPC(ListTrials, ListTrialsRequest, ListTrialsResponse, Role::kReader,
             return Assign(core_->ListTrials(*req), resp);)
EVOSCALE_RPC(AddTrialMeasurement, AddTrialMeasurementRequest, Trial, Role::kWriter,
             return Assign(core_->AddTrialMeasurement(*req), resp);)
EVOSCALE_RPC(CompleteTrial, CompleteTrialRequest, Trial, Role::kWriter,
             return Assign(core_->CompleteTrial(*req), resp);)
EVOSCALE_RPC(CheckTrialEarlyStoppingState, CheckTrialEarlyStoppingStateRequest,
             CheckTrialEarlyStoppingStateResponse, Role::kReader,
             return Assign(core_->CheckTrialEarlyStoppingState(*req), resp);)
EVOSCALE_RPC(StopTrial, StopTrialRequest, Trial, Role::kWriter,
             return Assign(core_->StopTrial(*req), resp);)
EVOSCALE_RPC(ListOptimalTrials, ListOptimalTrialsRequest, ListOptimalTrialsResponse,
             Role::kReader, return Assign(core_->ListOptimalTrials(*req), resp);)

#undef EVOSCALE_RPC

}  // namespace evoscale::service
