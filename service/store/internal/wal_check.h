// Reads a SQLite WAL file the way SQLite's recovery does, before SQLite opens the database, to
// tell a torn tail (a crash while writing: harmless) from damage in the middle (commits after
// the damage are silently dropped by SQLite's recovery: acknowledged writes lost).
#ifndef EVOSCALE_SERVICE_STORE_INTERNAL_WAL_CHECK_H_
#define EVOSCALE_SERVICE_STORE_INTERNAL_WAL_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace evoscale::service::internal {

struct WalReport {
  int64_t frames = 0;           // whole frames in the file
  int64_t replayed = 0;         // frames SQLite replays: the valid prefix, up to its last commit
  int64_t commits = 0;          // commits among them
  int64_t damaged_frame = -1;   // the first frame of this WAL that fails its checksum (0-based)
  int64_t lost_commits = 0;     // commits of this WAL after the damage: dropped by recovery
  int64_t partial_bytes = 0;    // bytes of a frame cut short at the end of the file
  bool header_damaged = false;  // the header fails its checksum: SQLite ignores every frame
};

// Inspects `wal_path` (absent or empty: an empty report). Frames of an older WAL generation
// (other salts) after the current ones are normal leftovers and are not damage. Errors: the
// file cannot be read.
absl::StatusOr<WalReport> InspectWal(const std::string& wal_path);

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STORE_INTERNAL_WAL_CHECK_H_
