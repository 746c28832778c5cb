// Durable storage of studies and trials in SQLite (WAL mode, foreign keys on, prepared
// statements only). The store is the source of truth: the service keeps a write-through cache
// and rebuilds it from LoadAll() at start-up.
#ifndef EVOSCALE_SERVICE_STORE_H_
#define EVOSCALE_SERVICE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.pb.h"

struct sqlite3;
struct sqlite3_stmt;

namespace evoscale::service {
namespace internal {
class Checkpointer;
}  // namespace internal

// How a commit reaches the disk.
enum class Durability {
  // synchronous=NORMAL in WAL mode: a commit is in the WAL (the OS's page cache) before it is
  // acknowledged, so it survives the process being killed (kill -9); a power loss may drop
  // the last commits but never corrupts the database.
  kProcessCrash,
  // synchronous=FULL: every commit is fsync'ed before it is acknowledged; survives power loss.
  kPowerLoss,
};

// A trial as stored: the message plus the order in which it completed (0 = not completed),
// which rebuilds the designer in the same order after a restart.
struct StoredTrial {
  v1::Trial trial;  // name is filled from the ids
  int64_t completion_seq = 0;
};

struct StoredStudy {
  int64_t id = 0;
  v1::Study study;  // name is filled from the id
  std::vector<StoredTrial> trials;  // by id ascending
};

// The writes of one RPC, applied in one transaction: all or nothing.
class WriteBatch {
 public:
  void PutStudy(int64_t id, const v1::Study& study);
  void DeleteStudy(int64_t id);
  void PutTrial(int64_t study_id, const v1::Trial& trial, int64_t completion_seq);
  bool empty() const { return ops_.empty(); }

 private:
  friend class Store;
  struct Op {
    enum Kind { kPutStudy, kDeleteStudy, kPutTrial } kind;
    int64_t study_id = 0;
    int64_t trial_id = 0;
    int state = 0;
    int64_t completion_seq = 0;
    std::string text;  // study display name or trial client id
    std::string body;  // the serialized message (name cleared)
  };
  std::vector<Op> ops_;
};

// Thread-safe: calls are serialised on one connection by an internal mutex.
class Store {
 public:
  // Opens (creating if needed) the database at `path` and migrates its schema to the current
  // version. A newer schema than this binary knows is FAILED_PRECONDITION; a file that is not
  // a database is DATA_LOSS.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     Durability durability);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  static constexpr int kSchemaVersion = 2;

  // Applies the batch in one transaction. On error nothing is written.
  absl::Status Write(const WriteBatch& batch);

  // Reads every study with its trials. Cost: the whole database.
  absl::StatusOr<std::vector<StoredStudy>> LoadAll();

  // The id the next new study gets: above every id ever used, deleted studies included.
  absl::StatusOr<int64_t> NextStudyId();

  int schema_version();

 private:
  explicit Store(sqlite3* db);
  absl::Status Prepare();

  std::unique_ptr<internal::Checkpointer> checkpointer_;  // started after the schema is ready
  absl::Mutex mu_;
  sqlite3* const db_;  // owned
  // Prepared once; protected by mu_.
  sqlite3_stmt* put_study_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* bump_study_id_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* delete_study_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* put_trial_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* begin_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* commit_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* rollback_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_H_
