// AutoscalerCore: the AutoscalerService's logic, independent of gRPC. Telemetry is validated
// sample by sample, stored in one transaction per batch, and fed to each workload's load
// models, which answer recommendations: one resource model per container (by
// TelemetrySample.container), one replica model per workload. The API's units (seconds,
// google.protobuf.Timestamp) become the store's and load_model/'s here.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_AUTOSCALER_CORE_H_
#define EVOSCALE_SERVICE_AUTOSCALER_AUTOSCALER_CORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "load_model/recommender.h"
#include "service/autoscaler/internal/sample_check.h"
#include "service/autoscaler/internal/workload_check.h"
#include "service/common/clock.h"
#include "service/store/telemetry_store.h"

namespace evoscale::service {

inline constexpr int kMaxSamplesPerBatch = 100000;
// Container names per workload (each has its own load models): samples naming more are
// rejected as "too_many_containers".
inline constexpr size_t kMaxContainersPerWorkload = 64;
inline constexpr int kMaxReportedErrors = 10;
// Samples of all instances within one window make one replica-load observation.
inline constexpr double kLoadWindowSeconds = 60;
// A container whose newest sample is older than the workload's newest by more than this is
// left out of the workload's recommendation (renamed or removed from the pod).
inline constexpr double kStaleContainerSeconds = 86400;

// A workload's usage in one stretch of sample time, for charts (AutoscalerCore::History). A
// pod sample is one instance's report at one time: its containers' samples with that time,
// summed.
struct WorkloadHistoryBucket {
  double start = 0;             // unix seconds; a multiple of the history's bucket_seconds
  int instances = 0;            // distinct instances that reported in it (replicas running)
  double cpu_cores_mean = 0;    // CPU cores per pod sample, averaged over its pod samples
  double cpu_cores_max = 0;     // of any pod sample
  double memory_bytes_max = 0;  // of any pod sample
  // Requests per second offered to the workload: the mean QPS of a pod sample x instances
  // (the instances' QPS summed, where they report equally often).
  double qps = 0;
  // The mean of the latencies its samples reported (TelemetrySample.latency_seconds); -1 when
  // none did.
  double latency_seconds = -1;
  // The workload's recommendation (what one pod should request, and replicas) as it stood
  // when the bucket closed, i.e. when the first sample of a later bucket arrived; for the
  // newest bucket, the current one (GetRecommendation's answer now). A bucket that late
  // samples open in a past minute takes the one of the bucket before it. False where
  // GetRecommendation would have failed then (e.g. no samples yet).
  bool has_recommendation = false;
  double cpu_target = 0, cpu_lower = 0, cpu_upper = 0, cpu_limit = 0;
  double memory_target = 0, memory_lower = 0, memory_upper = 0, memory_limit = 0;
  int replicas = 0;
};

// One instance as its newest reports left it.
struct InstanceNow {
  std::string instance;
  double time = 0;  // unix seconds of its newest sample
  // What it serves (TelemetrySample.versions) by name, from its newest report of them at
  // `versions_time`; empty when it never reported any.
  std::vector<std::pair<std::string, int64_t>> versions;
  double versions_time = 0;
};

struct WorkloadHistory {
  double bucket_seconds = 60;                  // the width of every bucket
  std::vector<WorkloadHistoryBucket> buckets;  // oldest first; only spans that had samples
  // The instances heard from within kInstancesNowSeconds of the newest one, newest first, at
  // most kMaxInstancesNow.
  std::vector<InstanceNow> instances;
};
inline constexpr double kInstancesNowSeconds = 300;
inline constexpr size_t kMaxInstancesNow = 100;

// One pod sample of an instance.
struct UsagePoint {
  double time = 0;          // unix seconds
  double cpu_cores = 0;     // its containers' summed
  double memory_bytes = 0;  // its containers' summed
};

// Thread-safe.
//
// On a shared store (PostgreSQL, several evoscaled replicas) each replica takes what the others
// stored (TelemetryStore::ReadChanges) before it answers a read of workloads, recommendations or
// history, and before it ingests: samples reported to one replica count in every replica's
// models. Such a read waits for this replica's write in flight, if any. Samples of a series that
// two replicas take at once are fed here in the order they arrive, so a replica skips another's
// sample older than the newest it has of that series (a restart replays them all in time order).
// Compaction runs only on the replica that holds the store's chore lease; the others forget
// silent series by the same rule, in memory (a sample of one they still hold after the leader
// dropped its rows is stored under the dropped id, and read by no one).
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

  // One sample of a managed trial's usage (evoscaled's scheduler sends one a second per
  // running trial; workload: the study's name, instance: the trial's). The workload is made on
  // its first sample, as a TRAINING workload, then the sample is ingested as Ingest does. A
  // sample Ingest rejects (INVALID_ARGUMENT naming the reason), a workload that cannot be made
  // or a store error is returned and counted in trial_usage_errors_total(); nothing is stored
  // half. Thread-safe; called from the trials' sampling threads.
  absl::Status IngestTrialUsage(const v1::TelemetrySample& sample);
  int64_t trial_usage_errors_total() { return trial_usage_errors_.load(); }

  absl::StatusOr<v1::Recommendation> GetRecommendation(const v1::GetRecommendationRequest& req);
  // Every workload's current recommendation (for the Prometheus gauges).
  std::vector<v1::Recommendation> AllRecommendations();

  // Usage over the last day of sample time (relative to the workload's newest sample), in
  // memory, from live ingest and from the replay at Create(): minute buckets (aligned to
  // multiples of 60 s of unix time), those that had samples. With `max_points` > 0, adjacent
  // buckets are merged into intervals of a whole number of minutes (aligned likewise, as
  // `bucket_seconds` says) so that at most `max_points` come back: instances the most, CPU mean
  // weighted by pod samples, the maxima the largest, QPS the mean of the buckets', and the
  // last bucket's recommendation; 0 returns every bucket. A sample that arrives late still
  // counts in its bucket while that is within the day, without changing its recommendation.
  // NOT_FOUND for an unknown workload; INVALID_ARGUMENT when max_points < 0. O(buckets).
  absl::StatusOr<WorkloadHistory> History(absl::string_view workload, int max_points);
  // One instance's pod samples, oldest first: every one while there are at most 512, then
  // every 2nd (4th, ...) so the whole span stays in 512 points, plus the newest. With
  // `max_points` > 0, thinned further to that many evenly spaced ones, the first and the newest
  // kept. An instance unheard of for a day of the workload's sample time is forgotten, as are
  // the least recently updated beyond 10,000 per workload. NOT_FOUND for an unknown workload or
  // instance; INVALID_ARGUMENT when max_points < 0.
  absl::StatusOr<std::vector<UsagePoint>> InstanceHistory(absl::string_view workload,
                                                          absl::string_view instance,
                                                          int max_points);

  // A counter that grows whenever any workload takes new samples.
  uint64_t version();
  // Waits until version() > `seen`, `deadline`, or Interrupt(); returns the version then.
  uint64_t AwaitChange(uint64_t seen, absl::Time deadline);
  // Wakes every AwaitChange() now (for shutdown).
  void Interrupt();

  // Folds and drops old samples by the retention policy, and forgets the series (instance,
  // container) silent for longer than the bucket retention, by the clock and by their
  // workload's newest sample (a replayed trace's live series stay): their store rows go with
  // their samples, and a later sample of one starts a new series. Called every few ingests;
  // exposed for tests and maintenance. Returns the sample rows removed: 0 on a replica that
  // does not hold the store's chore lease (TelemetryStore::TakeChoreLease), which leaves the
  // store to the leader and only forgets the silent series.
  absl::StatusOr<int64_t> Compact();
  // Whether this replica runs the telemetry chores (compaction), as last asked.
  bool chore_leader() { return store_->chore_leader(); }
  // The (instance, container) series held, over every workload.
  int64_t series_count();

  int64_t accepted_total();
  std::map<std::string, int64_t> rejected_by_reason_total();
  // The telemetry database's failed WAL checkpoints so far.
  int64_t store_checkpoint_failures() { return store_->checkpoint_failures(); }

 private:
  struct WorkloadState;
  struct IngestPlan;
  struct SeriesOwner;

  // Gives each instance's series (made when new) the store's id.
  void ApplyInstances(absl::Span<const StoredInstance> instances)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every series by its id, with its workload; valid until a series is added or dropped.
  absl::flat_hash_map<int64_t, SeriesOwner> SeriesById() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<int64_t> CompactLocked(double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Takes what other replicas stored since the last look (nothing on a store of its own); a
  // failed read leaves the models as they are, to catch up at the next.
  void CatchUp() ABSL_LOCKS_EXCLUDED(write_mu_, mu_);
  absl::Status CatchUpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void ApplyChanges(const TelemetryChanges& changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Creates the workload or replaces its definition (a new policy starts its models afresh
  // from its history).
  WorkloadState* ApplyWorkload(int64_t id, const v1::Workload& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::Recommendation> RecommendationOf(const std::string& workload, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);
  AutoscalerCore(TelemetryStore* store, Clock* clock, RetentionPolicy retention);
  absl::Status Load();
  static std::unique_ptr<WorkloadState> NewState(int64_t id, const v1::Workload& w);
  // Ingest's steps: validate the batch against the workloads (nothing changes), then, once
  // the store has the accepted rows, apply them to the load models and the counters.
  IngestPlan PlanIngest(const v1::TelemetryBatch& batch, double now,
                        v1::ReportTelemetryResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `stored_ids`: the store's ids of plan.new_instances, in their order.
  void ApplyIngest(const IngestPlan& plan, absl::Span<const int64_t> stored_ids,
                   v1::ReportTelemetryResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
  std::atomic<int64_t> trial_usage_errors_{0};
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTOSCALER_AUTOSCALER_CORE_H_
