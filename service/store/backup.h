// Online backups of the SQLite databases, taken while evoscaled serves.
#ifndef EVOSCALE_SERVICE_STORE_BACKUP_H_
#define EVOSCALE_SERVICE_STORE_BACKUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace evoscale::service {

// Copies the database at `source` into `dest` (created; an existing file is an error) with
// SQLite's backup API in one step, so the copy is one read transaction's snapshot: every
// commit before it, none after, and writers to `source` are not blocked (WAL). `dest` is
// fsync'ed and left in rollback-journal mode with nothing beside it to lose. Returns the
// copy's size in bytes. Errors name the file and SQLite's reason.
absl::StatusOr<int64_t> BackupDatabase(const std::string& source, const std::string& dest);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_BACKUP_H_
