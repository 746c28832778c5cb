// The gRPC AutoscalerService: thin callback handlers over AutoscalerCore. ReportTelemetry is a
// client stream (one transaction per batch); WatchRecommendations is a server stream fed by a
// notifier thread that wakes when telemetry arrives.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_SERVICE_H_
#define EVOSCALE_SERVICE_AUTOSCALER_SERVICE_H_

#include <set>
#include <vector>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/metrics.h"

namespace evoscale::service {

// Thread-safe. `core`, `auth` and `metrics` must outlive the service. Shutdown() (or the
// destructor) stops the notifier; call it after the gRPC server has shut down.
class AutoscalerServiceImpl final : public v1::AutoscalerService::CallbackService {
 public:
  AutoscalerServiceImpl(AutoscalerCore* core, const TokenAuth* auth, ServiceMetrics* metrics);
  ~AutoscalerServiceImpl() override;
  void Shutdown();

  grpc::ServerUnaryReactor* PutWorkload(grpc::CallbackServerContext* ctx,
                                        const v1::PutWorkloadRequest* req,
                                        v1::Workload* resp) override;
  grpc::ServerUnaryReactor* GetWorkload(grpc::CallbackServerContext* ctx,
                                        const v1::GetWorkloadRequest* req,
                                        v1::Workload* resp) override;
  grpc::ServerUnaryReactor* ListWorkloads(grpc::CallbackServerContext* ctx,
                                          const v1::ListWorkloadsRequest* req,
                                          v1::ListWorkloadsResponse* resp) override;
  grpc::ServerReadReactor<v1::TelemetryBatch>* ReportTelemetry(
      grpc::CallbackServerContext* ctx, v1::ReportTelemetryResponse* resp) override;
  grpc::ServerUnaryReactor* GetRecommendation(grpc::CallbackServerContext* ctx,
                                              const v1::GetRecommendationRequest* req,
                                              v1::Recommendation* resp) override;
  grpc::ServerWriteReactor<v1::Recommendation>* WatchRecommendations(
      grpc::CallbackServerContext* ctx, const v1::WatchRecommendationsRequest* req) override;

  class Watcher;  // internal

 private:
  friend class Watcher;
  template <typename Fn>
  grpc::ServerUnaryReactor* Handle(grpc::CallbackServerContext* ctx, const char* method,
                                   Role role, Fn&& fn);
  absl::Status Authorize(grpc::CallbackServerContext* ctx, Role role);
  void Unregister(Watcher* w);
  void DeleteDead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AutoscalerCore* const core_;
  const TokenAuth* const auth_;
  ServiceMetrics* const metrics_;

  absl::Mutex mu_;
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  // Watchers being poked outside mu_ (by the notifier or at start), and finished ones that
  // were being poked when they finished: deleted once no longer poked.
  std::multiset<Watcher*> poking_ ABSL_GUARDED_BY(mu_);
  std::vector<Watcher*> dead_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread notifier_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTOSCALER_SERVICE_H_
