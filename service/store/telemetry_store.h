// Durable telemetry for the autoscaler: workloads, their instances and samples, in an SQLite
// file of its own (WAL), beside the study database, or in the PostgreSQL database the studies
// are in. An SQLite file is separate so that a stream of hundreds of thousands of samples a
// second never holds the lock that study writes need.
//
// On PostgreSQL several evoscaled replicas share the tables. Telemetry is append-only and
// needs no owner: the database gives the ids (a workload's by its name, an instance's by
// (workload, name, container), so two replicas registering the same one get one row), every
// replica appends, and each reads what the others appended (ReadChanges). Compaction is a
// chore for one replica at a time: the one holding the chore lease (TakeChoreLease).
//
// Bounded: raw samples older than `raw_retention` are folded into `bucket_seconds` buckets
// (mean CPU/GPU/QPS/latency, peak memory and GPU memory, any OOM), and buckets older than
// `bucket_retention` are deleted, by Compact().
#ifndef EVOSCALE_SERVICE_STORE_TELEMETRY_STORE_H_
#define EVOSCALE_SERVICE_STORE_TELEMETRY_STORE_H_

#include <atomic>
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
#include "service/store/telemetry_rows.h"

namespace evoscale::service {
namespace internal {
class TelemetryBackend;
}  // namespace internal

// What other replicas stored since this store last looked (TelemetryStore::ReadChanges).
struct TelemetryChanges {
  std::vector<StoredWorkload> workloads;  // put (created or changed), oldest change first
  std::vector<StoredInstance> instances;  // registered, by id
  std::vector<TelemetryRow> rows;         // raw samples, in the order they were appended
  bool more = false;  // `rows` stops at a limit (50,000): ask again for the rest
};

// Thread-safe: calls are serialised on one connection by an internal mutex.
class TelemetryStore {
 public:
  // `database`: an SQLite file's path, or a PostgreSQL URI (Store::IsPostgres), as Store::Open
  // takes them. On SQLite the file is locked for this process (FAILED_PRECONDITION while
  // another has it). A newer schema than this binary's is FAILED_PRECONDITION naming both
  // versions, on either.
  static absl::StatusOr<std::unique_ptr<TelemetryStore>> Open(const std::string& database,
                                                              Durability durability,
                                                              bool accept_damaged_wal = false);
  ~TelemetryStore();
  TelemetryStore(const TelemetryStore&) = delete;
  TelemetryStore& operator=(const TelemetryStore&) = delete;

  // SQLite's; PostgreSQL's telemetry tables have their own (internal/telemetry_backend.h).
  static constexpr int kSchemaVersion = 3;

  // Creates or replaces the workload; returns its id: `id` on SQLite (the caller's counter);
  // on PostgreSQL the database's, found by the workload's name (`id` is ignored).
  absl::StatusOr<int64_t> PutWorkload(int64_t id, const v1::Workload& workload);

  // Appends `rows` and registers `new_instances`, in one transaction: all or nothing. Returns
  // the ids the instances are stored under, in their order. On SQLite those are their own
  // ids (an instance registered twice is an error); on PostgreSQL the database's (the same
  // one for every replica that registers the instance), and rows that name an instance by
  // its id in `new_instances` are stored under the database's.
  absl::StatusOr<std::vector<int64_t>> Append(absl::Span<const StoredInstance> new_instances,
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
  // Background WAL checkpoints that failed so far (see internal::Checkpointer::failures); 0 on
  // PostgreSQL.
  int64_t checkpoint_failures();

  // Whether other processes (evoscaled replicas) may write the same database: PostgreSQL.
  bool shared() const;

  // What was stored since LoadInstances() or the previous ReadChanges(), by anyone (this
  // store's own writes come back too; a reader skips what it has). Raw samples only: the
  // buckets a compaction writes fold samples that were read before. Empty on SQLite, which
  // only this process writes. Costs three queries on PostgreSQL.
  absl::StatusOr<TelemetryChanges> ReadChanges();

  // Takes the chore lease if it is free and reports whether this store holds it: the one
  // store, among those sharing a database, that runs compaction. On PostgreSQL a session
  // advisory lock on this store's connection: held until the store is closed or its
  // connection is lost (a dead replica's is taken by the next one to ask). Always true on
  // SQLite.
  absl::StatusOr<bool> TakeChoreLease();
  // TakeChoreLease's last answer (false before the first, and after a failed one).
  bool chore_leader() const { return chore_leader_.load(); }

 private:
  explicit TelemetryStore(std::unique_ptr<internal::TelemetryBackend> backend);

  absl::Mutex mu_;
  // Called under mu_, except for shared() and checkpoint_failures(), which are thread-safe.
  const std::unique_ptr<internal::TelemetryBackend> backend_;
  std::atomic<bool> chore_leader_{false};
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_TELEMETRY_STORE_H_
