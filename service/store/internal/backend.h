// What the study store (store.h) needs of a database: one transaction per group of queued
// batches, and the reads at start-up. The store's commit queue (group commit, tickets,
// callbacks) is the same over every backend; SQLite (sqlite_backend.cc) and PostgreSQL
// (postgres_backend.cc) implement this.
#ifndef EVOSCALE_SERVICE_STORE_INTERNAL_BACKEND_H_
#define EVOSCALE_SERVICE_STORE_INTERNAL_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/store/durability.h"
#include "service/store/write_batch.h"

namespace evoscale::service::internal {

// Not thread-safe, except checkpoint_failures(): the store calls the rest from one thread at
// a time.
class StoreBackend {
 public:
  virtual ~StoreBackend() = default;
  // Commits the batches in one transaction, each inside its own savepoint so that a failing
  // batch fails alone; fills one status per batch. If the transaction itself fails, every
  // batch fails (none of them is written).
  virtual void CommitGroup(const std::vector<const WriteBatch*>& group,
                           std::vector<absl::Status>* results) = 0;
  // The studies `query` selects, with their trials when it says so (StudyQuery's rules).
  virtual absl::StatusOr<std::vector<StoredStudy>> LoadStudies(const StudyQuery& query) = 0;
  virtual absl::StatusOr<int64_t> NextStudyId() = 0;
  virtual int schema_version() = 0;
  virtual int64_t checkpoint_failures() { return 0; }  // thread-safe
  // Whether the database answers now (thread-safe; on a connection of its own, if any).
  virtual absl::Status Ping() { return absl::OkStatus(); }
};

// SQLite: `path` is locked for this process (database_lock.h), opened in WAL mode, migrated.
absl::StatusOr<std::unique_ptr<StoreBackend>> OpenSqliteBackend(const std::string& path,
                                                                Durability durability,
                                                                bool accept_damaged_wal);

// PostgreSQL: `uri` is a libpq connection URI (postgresql://USER@HOST:PORT/DB); the schema is
// migrated under an advisory lock, so replicas starting together migrate once.
absl::StatusOr<std::unique_ptr<StoreBackend>> OpenPostgresBackend(const std::string& uri,
                                                                  Durability durability);

// Studies and trials as stored (both backends): the number of migrations (Store::kSchemaVersion).
inline constexpr int kStoreSchemaVersion = 2;

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STORE_INTERNAL_BACKEND_H_
