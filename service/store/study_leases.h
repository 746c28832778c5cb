// Study ownership among several evoscaled replicas on one PostgreSQL database. Each study is
// owned by one replica at a time through a lease with an epoch (a fencing token): the owner
// fences every write of the study with its epoch (WriteBatch::Fence), checked in the write's
// own transaction, so a replica that was paused or cut off and lost the lease can never
// commit to that study again.
//
// A replica is seen dead at once, when its database session ends (it holds a session
// advisory lock for its life), and seen hung when its heartbeat (renewed every lease / 3)
// is older than the lease. Either way another replica's Acquire takes its studies over, one
// at a time, each with its epoch one up.
#ifndef EVOSCALE_SERVICE_STORE_STUDY_LEASES_H_
#define EVOSCALE_SERVICE_STORE_STUDY_LEASES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace evoscale::service {
namespace internal {
class PgConnection;
}  // namespace internal

struct LeaseOptions {
  // This replica's gRPC address as the other replicas reach it (for forwarding).
  std::string address;
  // How long a replica's heartbeat holds: a hung replica's studies are taken over this long
  // after its last heartbeat.
  absl::Duration lease = absl::Seconds(5);
  // Tests only: false sends no heartbeat after the first, as a hung replica.
  bool heartbeat = true;
};

// Thread-safe: calls share one connection (the one holding the advisory lock) under a mutex.
class StudyLeases {
 public:
  // Registers this replica on `uri`'s database (migrating the lease tables if needed) and
  // takes its advisory lock. Errors as Store::Open's for the same URI.
  static absl::StatusOr<std::unique_ptr<StudyLeases>> Open(const std::string& uri,
                                                           LeaseOptions options);
  // Lets go of every lease this replica holds (the others take them over without waiting for
  // the heartbeat to expire) and leaves the replicas table.
  ~StudyLeases();
  StudyLeases(const StudyLeases&) = delete;
  StudyLeases& operator=(const StudyLeases&) = delete;

  // Who owns a study: this replica at `epoch` (> 0), or another live one (epoch 0) at
  // `address`.
  struct Holder {
    int64_t epoch = 0;
    int64_t replica = 0;
    std::string address;
    bool ours() const { return epoch > 0; }
  };
  // This replica's lease of `study_id` when it has it, or takes it when the study has no
  // owner, or its owner is dead or its heartbeat expired; else the live owner. UNAVAILABLE
  // when the database does not answer.
  absl::StatusOr<Holder> Acquire(int64_t study_id);
  // Lets go of the lease (keeping its epoch): the next Acquire anywhere takes it at once.
  absl::Status Release(int64_t study_id);

  // Sets the address the other replicas forward to (the gRPC port is known only once the
  // server listens); Acquire answers it to them from then on.
  absl::Status SetAddress(const std::string& address);

  // Serialises get-or-create by display name across the replicas: a session advisory lock on
  // the name's hash, held on this replica's connection until UnlockName. The caller looks the
  // name up and writes the new study (durably) in between.
  absl::Status LockName(const std::string& display_name);
  void UnlockName(const std::string& display_name);

  // A new study id, unique across the replicas (the store's counter, taken in its own
  // transaction: an id whose study is never written is skipped).
  absl::StatusOr<int64_t> AllocateStudyId();

  // Called from the heartbeat thread with each study whose lease this replica held at the
  // previous heartbeat and no longer does (another replica took it over). Set before the first
  // Acquire; it must be quick.
  void set_on_lost(std::function<void(int64_t study_id)> on_lost);

  int64_t replica_id() const { return replica_id_; }
  // Heartbeats that failed so far (the database did not answer).
  int64_t heartbeat_failures();

 private:
  StudyLeases(std::unique_ptr<internal::PgConnection> conn, LeaseOptions options,
              int64_t replica_id);
  // Renews the heartbeat (and the advisory lock after a reconnect) and reports lost leases.
  absl::Status Heartbeat() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EnsureConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeartbeatLoop();

  const LeaseOptions options_;
  const int64_t replica_id_;

  absl::Mutex mu_;
  std::unique_ptr<internal::PgConnection> conn_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);  // options_.address until SetAddress
  std::map<int64_t, int64_t> held_ ABSL_GUARDED_BY(mu_);  // study -> epoch, as last seen
  std::function<void(int64_t)> on_lost_ ABSL_GUARDED_BY(mu_);
  int64_t heartbeat_failures_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread heartbeat_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_STUDY_LEASES_H_
