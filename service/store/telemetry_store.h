// Durable telemetry for the autoscaler: workloads, their instances and samples, in an SQLite
// file of its own (WAL), beside the study database. It is separate so that a stream of
// hundreds of thousands of samples a second never holds the lock that study writes need.
//
// Bounded: raw samples older than `raw_retention` are folded into `bucket_seconds` buckets
// (mean CPU/GPU/QPS/latency, peak memory and GPU memory, any OOM), and buckets older than
// `bucket_retention` are deleted, by Compact().
#ifndef EVOSCALE_SERVICE_STORE_TELEMETRY_STORE_H_
#define EVOSCALE_SERVICE_STORE_TELEMETRY_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "service/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace evoscale::service {
namespace internal {
class Checkpointer;
class DatabaseLock;
}  // namespace internal

// One validated sample as stored.
struct TelemetryRow {
  int64_t instance_id = 0;
  double timestamp = 0;  // unix seconds
  double cpu_cores = 0;
  double memory_bytes = 0;
  double gpu_utilization = 0;
  double gpu_memory_bytes = 0;
  double qps = 0;
  double latency_ms = 0;  // TelemetrySample.latency_seconds, in milliseconds as stored
  bool oom = false;
  double cpu_request_cores = 0;  // 0: not reported
  // TelemetrySample.versions, in memory only: not stored (rows read back have none).
  std::vector<std::pair<std::string, int64_t>> versions;
  int32_t resolution = 0;  // 0 = raw; else the bucket width in seconds
};

// One container of one instance: samples are ordered, and models kept, per such row.
struct StoredInstance {
  int64_t id = 0;
  int64_t workload_id = 0;
  std::string name;       // TelemetrySample.instance
  std::string container;  // TelemetrySample.container; "" when the samples name none
};

struct StoredWorkload {
  int64_t id = 0;
  v1::Workload workload;
};

struct RetentionPolicy {
  double raw_retention_seconds = 2 * 86400.0;
  double bucket_seconds = 300;
  double bucket_retention_seconds = 35 * 86400.0;
};

// Thread-safe: calls are serialised on one connection by an internal mutex.
class TelemetryStore {
 public:
  static absl::StatusOr<std::unique_ptr<TelemetryStore>> Open(const std::string& path,
                                                              Durability durability,
                                                              bool accept_damaged_wal = false);
  ~TelemetryStore();
  TelemetryStore(const TelemetryStore&) = delete;
  TelemetryStore& operator=(const TelemetryStore&) = delete;

  static constexpr int kSchemaVersion = 3;

  absl::Status PutWorkload(int64_t id, const v1::Workload& workload);

  // Appends `rows` and registers `new_instances`, in one transaction: all or nothing.
  absl::Status Append(absl::Span<const StoredInstance> new_instances,
                      absl::Span<const TelemetryRow> rows);

  // Folds and deletes by `policy`, relative to `now` (unix seconds), and deletes the instance
  // rows `drop_instances` (series whose samples this compaction removes), in one transaction.
  // Returns sample rows removed.
  absl::StatusOr<int64_t> Compact(const RetentionPolicy& policy, double now,
                                  absl::Span<const int64_t> drop_instances = {});

  // Workloads written by an older evoscaled come back in today's fields (latency_slo_ms as
  // latency_slo_seconds).
  absl::StatusOr<std::vector<StoredWorkload>> LoadWorkloads();
  absl::StatusOr<std::vector<StoredInstance>> LoadInstances();
  // Calls `fn` for every stored row of a workload's instances in timestamp order (buckets and
  // raw rows interleaved by time).
  absl::Status ScanSamples(const std::function<void(const TelemetryRow&)>& fn);

  absl::StatusOr<int64_t> CountSamples();
  // Background WAL checkpoints that failed so far (see internal::Checkpointer::failures).
  int64_t checkpoint_failures();

 private:
  explicit TelemetryStore(sqlite3* db);
  absl::Status Init();

  // Held from before the file is opened until after the destructor has closed it.
  std::unique_ptr<internal::DatabaseLock> lock_;
  std::unique_ptr<internal::Checkpointer> checkpointer_;
  absl::Mutex mu_;
  sqlite3* const db_;  // owned
  sqlite3_stmt* put_workload_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* put_instance_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* put_sample_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_TELEMETRY_STORE_H_
