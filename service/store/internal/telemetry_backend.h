// What the telemetry store (telemetry_store.h) needs of a database. TelemetryStore keeps the
// parts every backend shares (the mutex, workload records as protobufs, the leader flag);
// SQLite (telemetry_sqlite.cc) and PostgreSQL (telemetry_postgres.cc) implement this.
#ifndef EVOSCALE_SERVICE_STORE_INTERNAL_TELEMETRY_BACKEND_H_
#define EVOSCALE_SERVICE_STORE_INTERNAL_TELEMETRY_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/store/durability.h"
#include "service/store/telemetry_rows.h"

namespace evoscale::service::internal {

// A workload as stored: its id and its serialised v1::Workload.
struct WorkloadRecord {
  int64_t id = 0;
  std::string body;
};

// What other writers stored since the backend last looked (TelemetryStore::ReadChanges), with
// workloads as records.
struct TelemetryRecords {
  std::vector<WorkloadRecord> workloads;
  std::vector<StoredInstance> instances;
  std::vector<TelemetryRow> rows;
  bool more = false;
};

// Not thread-safe, except checkpoint_failures(): TelemetryStore calls the rest under its mutex.
class TelemetryBackend {
 public:
  virtual ~TelemetryBackend() = default;
  // TelemetryStore's calls of the same names, with workloads as records.
  virtual absl::StatusOr<int64_t> PutWorkload(int64_t id, const std::string& name,
                                              const std::string& body) = 0;
  virtual absl::StatusOr<std::vector<int64_t>> Append(
      absl::Span<const StoredInstance> new_instances, absl::Span<const TelemetryRow> rows) = 0;
  virtual absl::StatusOr<int64_t> Compact(const RetentionPolicy& policy, double now,
                                          absl::Span<const int64_t> drop_instances) = 0;
  virtual absl::StatusOr<std::vector<WorkloadRecord>> LoadWorkloads() = 0;
  virtual absl::StatusOr<std::vector<StoredInstance>> LoadInstances() = 0;
  virtual absl::Status ScanSamples(const std::function<void(const TelemetryRow&)>& fn) = 0;
  virtual absl::StatusOr<int64_t> CountSamples() = 0;
  virtual int64_t checkpoint_failures() { return 0; }  // thread-safe
  // Whether other processes write the same database (TelemetryStore::shared).
  virtual bool shared() const { return false; }
  // TelemetryStore::TakeChoreLease: one process per SQLite file, so always this one.
  virtual absl::StatusOr<bool> TakeChoreLease() { return true; }
  virtual absl::StatusOr<TelemetryRecords> ReadChanges() { return TelemetryRecords{}; }
};

// SQLite: `path` is locked for this process (database_lock.h), opened in WAL mode, migrated.
absl::StatusOr<std::unique_ptr<TelemetryBackend>> OpenSqliteTelemetry(const std::string& path,
                                                                      Durability durability,
                                                                      bool accept_damaged_wal);

// PostgreSQL: `uri` as Store::Open's; the tables are migrated under the migration lock
// (MigratePostgres, component "telemetry").
absl::StatusOr<std::unique_ptr<TelemetryBackend>> OpenPostgresTelemetry(const std::string& uri,
                                                                        Durability durability);

// The PostgreSQL telemetry tables' schema version (the number of their migrations).
inline constexpr int kPostgresTelemetrySchemaVersion = 1;

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STORE_INTERNAL_TELEMETRY_BACKEND_H_
