// AutoscalerCore: the AutoscalerService's logic, independent of gRPC. Telemetry is validated
// sample by sample, stored in one transaction per batch, and fed to each workload's load
// models, which answer recommendations: one resource model per container (by
// TelemetrySample.container), one replica model per workload. The API's units (seconds,
// google.protobuf.Timestamp) become the store's and load_model/'s here.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_AUTOSCALER_CORE_H_
#define EVOSCALE_SERVICE_AUTOSCALER_AUTOSCALER_CORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "load_model/recommender.h"
#include "service/common/clock.h"
#include "service/store/telemetry_store.h"

namespace evoscale::service {

inline constexpr int kMaxSamplesPerBatch = 100000;
inline constexpr int kMaxWorkloadNameLength = 253;
inline constexpr int kMaxInstanceNameLength = 253;
// Container names per workload (each has its own load models): samples naming more are
// rejected as "too_many_containers".
inline constexpr size_t kMaxContainersPerWorkload = 64;
inline constexpr int kMaxReportedErrors = 10;
// Samples stamped further ahead of the server's clock than this are rejected.
inline constexpr double kMaxFutureSkewSeconds = 300;
// Samples of all instances within one window make one replica-load observation.
inline constexpr double kLoadWindowSeconds = 60;
// A container whose newest sample is older than the workload's newest by more than this is
// left out of the workload's recommendation (renamed or removed from the pod).
inline constexpr double kStaleContainerSeconds = 86400;

// Thread-safe.
class AutoscalerCore {
 public:
  // Loads workloads and replays stored telemetry into fresh load models. `store` and `clock`
  // must outlive the core.
  static absl::StatusOr<std::unique_ptr<AutoscalerCore>> Create(TelemetryStore* store,
                                                                Clock* clock,
                                                                RetentionPolicy retention = {});
  ~AutoscalerCore();

  absl::StatusOr<v1::Workload> PutWorkload(const v1::PutWorkloadRequest& req);
  absl::StatusOr<v1::Workload> GetWorkload(const v1::GetWorkloadRequest& req);
  v1::ListWorkloadsResponse ListWorkloads();

  // Validates every sample of `batch`, stores the accepted ones in one transaction and feeds
  // them to the load models; adds to the counters in `resp`. A storage error rejects the
  // whole batch (nothing stored, nothing fed) and is returned.
  absl::Status Ingest(const v1::TelemetryBatch& batch, v1::ReportTelemetryResponse* resp);

  absl::StatusOr<v1::Recommendation> GetRecommendation(const v1::GetRecommendationRequest& req);
  // Every workload's current recommendation (for the Prometheus gauges).
  std::vector<v1::Recommendation> AllRecommendations();

  // A counter that grows whenever any workload takes new samples.
  uint64_t version();
  // Waits until version() > `seen`, `deadline`, or Interrupt(); returns the version then.
  uint64_t AwaitChange(uint64_t seen, absl::Time deadline);
  // Wakes every AwaitChange() now (for shutdown).
  void Interrupt();

  // Folds and drops old samples by the retention policy. Called every few ingests; exposed
  // for tests and maintenance.
  absl::StatusOr<int64_t> Compact();

  int64_t accepted_total();
  std::map<std::string, int64_t> rejected_by_reason_total();

 private:
  struct WorkloadState;
  struct IngestPlan;
  AutoscalerCore(TelemetryStore* store, Clock* clock, RetentionPolicy retention);
  absl::Status Load();
  static absl::Status ValidateWorkload(const v1::Workload& w);
  static std::unique_ptr<WorkloadState> NewState(int64_t id, const v1::Workload& w);
  // Ingest's steps: validate the batch against the workloads (nothing changes), then, once
  // the store has the accepted rows, apply them to the load models and the counters.
  IngestPlan PlanIngest(const v1::TelemetryBatch& batch, double now,
                        v1::ReportTelemetryResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyIngest(const IngestPlan& plan, v1::ReportTelemetryResponse* resp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TelemetryStore* const store_;
  Clock* const clock_;
  const RetentionPolicy retention_;

  // Serialises the writers (Ingest, PutWorkload, Compact): each plans under mu_, writes the
  // store with only write_mu_ held, then applies under mu_, so batches apply in the order they
  // were accepted while readers (recommendations, lists, metrics) never wait for SQLite.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int64_t ingests_since_compact_ ABSL_GUARDED_BY(write_mu_) = 0;
  // The workloads and their load models.
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<WorkloadState>> workloads_ ABSL_GUARDED_BY(mu_);
  int64_t next_workload_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_instance_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t interrupts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t accepted_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> rejected_total_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTOSCALER_AUTOSCALER_CORE_H_
