// One owner per database file: an exclusive flock(2) on "PATH.lock" beside the database, held
// for as long as the DatabaseLock lives (a process's life in evoscaled).
//
// Why a lock file and not SQLite's locking_mode=EXCLUSIVE: the kernel drops an flock when its
// holder dies, also on kill -9, so there is never a stale lock to clean up; the file carries the
// holder's pid, so the second process can say who holds it; and the database itself stays
// readable by other tools (sqlite3, backups), which an exclusive SQLite lock would block. The
// lock is on a file of its own because SQLite's POSIX locks on the database file are released
// when any descriptor of that file closes in the process.
#ifndef EVOSCALE_SERVICE_STORE_INTERNAL_DATABASE_LOCK_H_
#define EVOSCALE_SERVICE_STORE_INTERNAL_DATABASE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace evoscale::service::internal {

class DatabaseLock {
 public:
  // Takes the lock of `db_path` without waiting. FAILED_PRECONDITION when another process (or
  // another DatabaseLock in this one) holds it: the message names the database, the holder's
  // pid and the lock file; or when the lock file cannot be created (the message names it and
  // says why). The descriptor is close-on-exec, so child processes never inherit the lock.
  static absl::StatusOr<std::unique_ptr<DatabaseLock>> Acquire(const std::string& db_path);
  ~DatabaseLock();  // releases the lock (the file stays)
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;

  static std::string LockPathFor(const std::string& db_path) { return db_path + ".lock"; }

 private:
  explicit DatabaseLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STORE_INTERNAL_DATABASE_LOCK_H_
