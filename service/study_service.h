// The gRPC StudyService: thin callback handlers that check the caller's token, call
// StudyCore, convert the status and record metrics.
#ifndef EVOSCALE_SERVICE_STUDY_SERVICE_H_
#define EVOSCALE_SERVICE_STUDY_SERVICE_H_

#include "evoscale/v1/study.grpc.pb.h"
#include <chrono>
#include <functional>

#include "service/auth.h"
#include "service/internal/forwarder.h"
#include "service/metrics.h"
#include "service/study/study_core.h"

namespace evoscale::service {

// Thread-safe. `core`, `auth`, `metrics` and `forwarder` must outlive the service. With a
// forwarder (several replicas), a call on a study another replica owns is forwarded to it
// (once), and a call whose write the study's lease fenced off runs again (the study has left
// this replica's cache, so it then goes to its new owner).
class StudyServiceImpl final : public v1::StudyService::CallbackService {
 public:
  // A forwarded call that gets no answer within `forward_timeout` (the lease: a hung owner's
  // studies are free by then) runs here again.
  StudyServiceImpl(StudyCore* core, const TokenAuth* auth, ServiceMetrics* metrics,
                   internal::StudyForwarder* forwarder = nullptr,
                   std::chrono::milliseconds forward_timeout = std::chrono::seconds(5))
      : core_(core),
        auth_(auth),
        metrics_(metrics),
        forwarder_(forwarder),
        forward_timeout_(forward_timeout) {}

  grpc::ServerUnaryReactor* CreateStudy(grpc::CallbackServerContext* ctx,
                                        const v1::CreateStudyRequest* req,
                                        v1::Study* resp) override;
  grpc::ServerUnaryReactor* GetStudy(grpc::CallbackServerContext* ctx,
                                     const v1::GetStudyRequest* req, v1::Study* resp) override;
  grpc::ServerUnaryReactor* ListStudies(grpc::CallbackServerContext* ctx,
                                        const v1::ListStudiesRequest* req,
                                        v1::ListStudiesResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteStudy(grpc::CallbackServerContext* ctx,
                                        const v1::DeleteStudyRequest* req,
                                        v1::DeleteStudyResponse* resp) override;
  grpc::ServerUnaryReactor* SetStudyState(grpc::CallbackServerContext* ctx,
                                          const v1::SetStudyStateRequest* req,
                                          v1::Study* resp) override;
  grpc::ServerUnaryReactor* SuggestTrials(grpc::CallbackServerContext* ctx,
                                          const v1::SuggestTrialsRequest* req,
                                          v1::SuggestTrialsResponse* resp) override;
  grpc::ServerUnaryReactor* CreateTrial(grpc::CallbackServerContext* ctx,
                                        const v1::CreateTrialRequest* req,
                                        v1::Trial* resp) override;
  grpc::ServerUnaryReactor* GetTrial(grpc::CallbackServerContext* ctx,
                                     const v1::GetTrialRequest* req, v1::Trial* resp) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* ctx,
                                       const v1::ListTrialsRequest* req,
                                       v1::ListTrialsResponse* resp) override;
  grpc::ServerUnaryReactor* AddTrialMeasurement(grpc::CallbackServerContext* ctx,
                                                const v1::AddTrialMeasurementRequest* req,
                                                v1::Trial* resp) override;
  grpc::ServerUnaryReactor* CompleteTrial(grpc::CallbackServerContext* ctx,
                                          const v1::CompleteTrialRequest* req,
                                          v1::Trial* resp) override;
  grpc::ServerUnaryReactor* CheckTrialEarlyStoppingState(
      grpc::CallbackServerContext* ctx, const v1::CheckTrialEarlyStoppingStateRequest* req,
      v1::CheckTrialEarlyStoppingStateResponse* resp) override;
  grpc::ServerUnaryReactor* StopTrial(grpc::CallbackServerContext* ctx,
                                      const v1::StopTrialRequest* req, v1::Trial* resp) override;
  grpc::ServerUnaryReactor* ListOptimalTrials(grpc::CallbackServerContext* ctx,
                                              const v1::ListOptimalTrialsRequest* req,
                                              v1::ListOptimalTrialsResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteTrial(grpc::CallbackServerContext* ctx,
                                        const v1::DeleteTrialRequest* req,
                                        v1::DeleteTrialResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateMetadata(grpc::CallbackServerContext* ctx,
                                           const v1::UpdateMetadataRequest* req,
                                           v1::UpdateMetadataResponse* resp) override;
  grpc::ServerUnaryReactor* GetParameterImportance(
      grpc::CallbackServerContext* ctx, const v1::GetParameterImportanceRequest* req,
      v1::GetParameterImportanceResponse* resp) override;

 private:
  // Runs `req` through the core and finishes with its result, or forwards it (see above).
  template <typename Request, typename Response, typename Send>
  void Serve(grpc::CallbackServerContext* ctx, const Request* req, Response* resp,
             std::function<void(absl::Status)> finish, Send send, int attempt);

  StudyCore* const core_;
  const TokenAuth* const auth_;
  ServiceMetrics* const metrics_;
  internal::StudyForwarder* const forwarder_;  // null: one replica
  const std::chrono::milliseconds forward_timeout_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_SERVICE_H_
