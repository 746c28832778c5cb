// Durable storage of studies and trials: in an SQLite file (WAL mode, foreign keys on, prepared
// statements only), or in PostgreSQL (a postgresql:// URI). The store is the source of truth:
// the service keeps a write-through cache and rebuilds it from LoadAll() at start-up.
#ifndef EVOSCALE_SERVICE_STORE_STORE_H_
#define EVOSCALE_SERVICE_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.pb.h"
#include "service/store/durability.h"
#include "service/store/write_batch.h"

namespace evoscale::service {
namespace internal {
class StoreBackend;
}  // namespace internal

// Thread-safe: calls are serialised on one connection by an internal mutex.
class Store {
 public:
  // Opens (creating if needed) the database and migrates its schema to the current version.
  // `database` is an SQLite file's path or a PostgreSQL URI (postgresql://USER@HOST:PORT/DB,
  // no password in it: ~/.pgpass or PGPASSWORD). A newer schema than this binary knows is
  // FAILED_PRECONDITION; a file that is not a database is DATA_LOSS; a URI libpq cannot parse
  // or that holds a password INVALID_ARGUMENT; a server that cannot be reached UNAVAILABLE.
  // `accept_damaged_wal` (SQLite): see internal::OpenDatabase (evoscaled's
  // --accept-damaged-wal). With PostgreSQL, kProcessCrash commits without waiting for the WAL
  // flush (synchronous_commit off), kPowerLoss waits for it.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& database,
                                                     Durability durability,
                                                     bool accept_damaged_wal = false);
  // True for a PostgreSQL URI (postgresql:// or postgres://), false for an SQLite path.
  static bool IsPostgres(absl::string_view database);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  static constexpr int kSchemaVersion = 2;

  // Applies the batch in one transaction and returns once it is durable (as `durability`
  // defines it). On error nothing of the batch is written. Equivalent to Enqueue and
  // WaitDurable.
  absl::Status Write(WriteBatch batch);

  // Group commit. Enqueue appends a batch to the commit queue and returns its ticket; batches
  // commit in ticket order, several to a transaction, each inside its own savepoint so that a
  // failing batch fails alone.
  //  - kProcessCrash: WaitDurable(t) commits inline: the first waiter that finds no commit in
  //    flight takes every queued batch and commits them; the others wait for it.
  //  - kPowerLoss: a committer thread commits whatever is queued, one transaction (one fsync)
  //    at a time, so writers that queue while an fsync runs share the next one. The study
  //    service applies a write to its cache and answers only when it is durable, without
  //    holding the study's lock or a gRPC thread meanwhile (OnDurable). A failed batch then
  //    means the cache holds a write the database lacks, so any failure stops the store: every
  //    later Enqueue, WaitDurable and OnDurable answers UNAVAILABLE until evoscaled restarts
  //    (and reloads from the database). Except a fenced batch of a study whose lease was lost
  //    (IsLeaseLost, write_batch.h): it fails alone, and the caller drops that study's cache.
  absl::StatusOr<uint64_t> Enqueue(WriteBatch batch);
  // The status of batch `ticket` once every batch up to it is settled.
  absl::Status WaitDurable(uint64_t ticket);
  // Calls `done` with what WaitDurable(ticket) would return: at once if it is settled (or with
  // kProcessCrash, after committing inline), else from the committer thread (with no lock
  // held; `done` must be quick: it delays the next commit).
  void OnDurable(uint64_t ticket, std::function<void(absl::Status)> done);
  // The last ticket handed out (0 = none): a reader waits for it so that it never answers with
  // a write that is not yet durable.
  uint64_t last_ticket();
  // True with kPowerLoss: writers queue and wait after releasing their own locks.
  bool defers_sync() const { return durability_ == Durability::kPowerLoss; }
  // Transactions committed so far (each holds one or more batches).
  int64_t commits();
  // Background WAL checkpoints that failed so far (SQLite; see internal::Checkpointer).
  int64_t checkpoint_failures();

  // Reads every study with its trials. Cost: the whole database.
  absl::StatusOr<std::vector<StoredStudy>> LoadAll();
  // Reads the studies `query` selects (StudyQuery's rules, write_batch.h). Cost: a scan of the
  // study rows in its id range, and the trials of those it returns.
  absl::StatusOr<std::vector<StoredStudy>> LoadStudies(const StudyQuery& query);
  // Reads one study with its trials; NOT_FOUND `study "studies/7" not found` when it does not
  // exist (or was deleted).
  absl::StatusOr<StoredStudy> LoadStudy(int64_t id);

  // The id the next new study gets: above every id ever used, deleted studies included.
  absl::StatusOr<int64_t> NextStudyId();

  int schema_version();

  // OK while the store takes writes and its database answers; else why not (stopped after a
  // refused commit, or the database unreachable). Thread-safe; never waits behind a commit.
  absl::Status Health();

 private:
  Store(std::unique_ptr<internal::StoreBackend> backend, Durability durability);
  struct Queued {
    uint64_t ticket;
    WriteBatch batch;
  };
  // Commits `group` in one transaction; fills one status per batch.
  void CommitGroup(const std::vector<Queued>& group, std::vector<absl::Status>* results);
  // Takes the queued batches, commits them (queue_mu_ released meanwhile) and settles their
  // tickets; the callbacks now due are appended to `due`.
  void CommitQueued(std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>>* due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  // The settled status of `ticket` (consumes a recorded batch error).
  absl::Status SettledStatus(uint64_t ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  void CommitterLoop();

  const Durability durability_;
  // The commit queue.
  absl::Mutex queue_mu_;
  std::vector<Queued> queue_ ABSL_GUARDED_BY(queue_mu_);
  uint64_t last_ticket_ ABSL_GUARDED_BY(queue_mu_) = 0;
  uint64_t durable_ ABSL_GUARDED_BY(queue_mu_) = 0;  // every ticket <= this is settled
  bool committing_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::map<uint64_t, absl::Status> batch_errors_ ABSL_GUARDED_BY(queue_mu_);
  std::multimap<uint64_t, std::function<void(absl::Status)>> callbacks_ ABSL_GUARDED_BY(queue_mu_);
  absl::Status stopped_ ABSL_GUARDED_BY(queue_mu_);  // set once a deferred write failed
  int64_t commits_ ABSL_GUARDED_BY(queue_mu_) = 0;
  std::thread committer_;  // kPowerLoss only

  absl::Mutex mu_;  // one commit or read on the backend at a time
  // Guarded by mu_, except checkpoint_failures(), which is thread-safe.
  const std::unique_ptr<internal::StoreBackend> backend_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_STORE_H_
