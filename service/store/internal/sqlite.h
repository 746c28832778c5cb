// Small helpers shared by the SQLite stores: status conversion, statement reset, opening a
// database in WAL mode and migrating its schema.
#ifndef EVOSCALE_SERVICE_STORE_INTERNAL_SQLITE_H_
#define EVOSCALE_SERVICE_STORE_INTERNAL_SQLITE_H_

#include <sqlite3.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "service/store/durability.h"

namespace evoscale::service::internal {

// Wraps an SQLite result code (and the connection's message) into a Status whose code says
// what a caller can do: BUSY → UNAVAILABLE, FULL → RESOURCE_EXHAUSTED, NOTADB/CORRUPT →
// DATA_LOSS, CANTOPEN/PERM/READONLY → FAILED_PRECONDITION, else INTERNAL.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what);

// Resets a statement and its bindings when it goes out of scope.
class StmtReset {
 public:
  explicit StmtReset(sqlite3_stmt* s) : s_(s) {}
  ~StmtReset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  StmtReset(const StmtReset&) = delete;
  StmtReset& operator=(const StmtReset&) = delete;

 private:
  sqlite3_stmt* s_;
};

std::string ColumnBlob(sqlite3_stmt* s, int i);

// Runs a query and calls `row` for each result row, in order. The statement is finalized
// after the last call (so `row` may read every column, also on its way to an error). Errors:
// `row`'s first error, or the SQLite error of `what`.
absl::Status ForEachRow(sqlite3* db, const char* sql, absl::string_view what,
                        absl::FunctionRef<absl::Status(sqlite3_stmt*)> row);

// Runs SQL that returns no rows.
absl::Status Exec(sqlite3* db, const char* sql);

// Steps a prepared (and bound) statement that returns no rows, then resets it and clears its
// bindings. Error: the SQLite error of `what`.
absl::Status StepDone(sqlite3* db, sqlite3_stmt* s, absl::string_view what);

// Opens `path` (creating it), sets WAL mode, the durability and foreign keys, and applies
// `migrations[v]` for each schema version v from the file's PRAGMA user_version up to
// migrations.size(), each in its own transaction. The caller owns the returned connection.
// First its WAL is inspected (wal_check.h): damage that would make SQLite's recovery drop
// commits is DATA_LOSS, naming what to do, unless `accept_damaged_wal`; a torn tail is logged.
absl::StatusOr<sqlite3*> OpenDatabase(const std::string& path, Durability durability,
                                      absl::Span<const char* const> migrations,
                                      bool accept_damaged_wal = false);

// Reads PRAGMA user_version; -1 on error.
int SchemaVersion(sqlite3* db);

// Checkpoints a WAL database from a thread and connection of its own, so that no request pays
// for copying the WAL back into the database (and its fsync) inside its commit. The owner
// turns automatic checkpoints off on its own connection. A passive checkpoint never blocks
// writers. Thread-safe; stops (after a last checkpoint) when destroyed.
class Checkpointer {
 public:
  // Under steady writes a passive checkpoint may never find the log both copied and idle, so
  // SQLite would never start it over and the WAL would grow without bound. Once the log holds more than `max_log_frames` frames (64 MiB of 4 KiB pages by
  // default), a TRUNCATE checkpoint waits for a gap between writes (writers wait meanwhile,
  // for as long as copying the frames left takes), copies the rest and empties the file.
  static constexpr int kDefaultMaxLogFrames = 16384;
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Start(
      const std::string& path, absl::Duration interval, int max_log_frames = kDefaultMaxLogFrames);
  ~Checkpointer();

  // TRUNCATE checkpoints done so far.
  int64_t truncations() {
    absl::MutexLock lock(&mu_);
    return truncations_;
  }
  // Checkpoints that failed (an I/O error, not a busy database) so far. Nothing is lost (the
  // commits stay in the WAL), but the WAL grows until one succeeds: the first failure of a run
  // and the first success after it are logged ("checkpoint failed" / "checkpoint recovered").
  int64_t failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  Checkpointer(sqlite3* db, std::string path, absl::Duration interval, int max_log_frames);
  void Loop();
  // Logs the first failure of a run of them and the first success after; counts failures.
  void Note(int rc);

  sqlite3* const db_;  // owned, used only by the thread
  const std::string path_;
  int64_t failing_ = 0;  // failed checkpoints since the last success; used only by the thread
  const absl::Duration interval_;
  const int max_log_frames_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t truncations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STORE_INTERNAL_SQLITE_H_
