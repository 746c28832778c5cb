#include "service/store/internal/sqlite.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/common/log.h"
#include "service/store/internal/wal_check.h"

namespace evoscale::service::internal {

namespace {

// " (Read-only file system); ..." or " (No space left on device: N KiB free); ..." when the
// database's file system is read-only or (nearly) full, with `code` set to match; else "".
std::string DiskTrouble(sqlite3* db, absl::StatusCode* code) {
  const char* file = sqlite3_db_filename(db, "main");
  struct statvfs fs;
  if (file == nullptr || *file == '\0' || statvfs(file, &fs) != 0) return "";
  if ((fs.f_flag & ST_RDONLY) != 0) {
    *code = absl::StatusCode::kFailedPrecondition;
    return " (Read-only file system); nothing of this write was stored: make the database "
           "writable again";
  }
  const uint64_t free_bytes = uint64_t(fs.f_bavail) * fs.f_frsize;
  if (free_bytes < (uint64_t{1} << 20)) {
    *code = absl::StatusCode::kResourceExhausted;
    return absl::StrCat(" (No space left on device: ", free_bytes >> 10,
                        " KiB free); nothing of this write was stored: free disk space and retry");
  }
  return "";
}

}  // namespace

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      code = absl::StatusCode::kUnavailable;
      break;
    case SQLITE_FULL:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      code = absl::StatusCode::kDataLoss;
      break;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      code = absl::StatusCode::kFailedPrecondition;
      break;
    default:
      break;
  }
  // For the errors the operating system may have caused, its reason (a full or read-only
  // disk) and what to do about it, read from the file system itself: SQLite keeps no errno
  // for a full disk, and by the time it reports a failed write errno may be another call's.
  std::string reason;
  const int primary = rc & 0xff;
  if (db != nullptr && (primary == SQLITE_IOERR || primary == SQLITE_FULL ||
                        primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY)) {
    reason = DiskTrouble(db, &code);
    if (reason.empty() && primary == SQLITE_FULL) {
      reason = "; nothing of this write was stored: free disk space and retry";
    }
  }
  return absl::Status(code, absl::StrCat("sqlite: ", what, ": ", msg, reason));
}

std::string ColumnBlob(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  int n = sqlite3_column_bytes(s, i);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
}

absl::Status ForEachRow(sqlite3* db, const char* sql, absl::string_view what,
                        absl::FunctionRef<absl::Status(sqlite3_stmt*)> row) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &s, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, what);
  absl::Status st;
  while (st.ok() && (rc = sqlite3_step(s)) == SQLITE_ROW) st = row(s);
  if (st.ok() && rc != SQLITE_DONE) st = SqliteError(db, rc, what);
  sqlite3_finalize(s);
  return st;
}

absl::Status StepDone(sqlite3* db, sqlite3_stmt* s, absl::string_view what) {
  StmtReset reset(s);
  const int rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) return SqliteError(db, rc, what);
  return absl::OkStatus();
}

absl::Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "exec");
  return absl::OkStatus();
}

int SchemaVersion(sqlite3* db) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr) != SQLITE_OK) return -1;
  int v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
  sqlite3_finalize(s);
  return v;
}

namespace {

absl::Status Setup(sqlite3* db, Durability durability, absl::Span<const char* const> migrations) {
  sqlite3_busy_timeout(db, 5000);
  // journal_mode answers a row; read it to check WAL really took (not on every file system).
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &s, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "set WAL mode");
  rc = sqlite3_step(s);
  std::string mode =
      rc == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(s, 0)) : "";
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW) return SqliteError(db, rc, "set WAL mode");
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("WAL journal mode is not available (got \"", mode, "\")"));
  }
  absl::Status st = Exec(db, durability == Durability::kPowerLoss ? "PRAGMA synchronous=FULL"
                                                                  : "PRAGMA synchronous=NORMAL");
  if (st.ok()) st = Exec(db, "PRAGMA foreign_keys=ON");
  if (!st.ok()) return st;

  const int version = SchemaVersion(db);
  const int latest = static_cast<int>(migrations.size());
  if (version < 0) return SqliteError(db, sqlite3_errcode(db), "read schema version");
  if (version > latest) {
    return absl::FailedPreconditionError(
        absl::StrFormat("schema version %d is newer than this binary's %d", version, latest));
  }
  for (int v = version; v < latest; ++v) {
    st = Exec(db, "BEGIN IMMEDIATE");
    if (!st.ok()) return st;
    st = Exec(db, migrations[v]);
    if (st.ok()) st = Exec(db, absl::StrFormat("PRAGMA user_version=%d", v + 1).c_str());
    if (st.ok()) st = Exec(db, "COMMIT");
    if (!st.ok()) {
      Exec(db, "ROLLBACK").IgnoreError();
      return absl::Status(st.code(),
                          absl::StrFormat("migrate schema %d -> %d: %s", v, v + 1, st.message()));
    }
  }
  return absl::OkStatus();
}

void LogWal(const std::string& path, const std::string& what, const std::string& detail) {
  LogEvent("store", {{"what", what}, {"database", path}, {"detail", detail}});
}

absl::Status CheckWal(const std::string& path, bool accept_damaged_wal) {
  const std::string wal_path = path + "-wal";
  absl::StatusOr<WalReport> wal = InspectWal(wal_path);
  if (!wal.ok()) {
    return absl::Status(wal.status().code(),
                        absl::StrCat("database \"", path, "\": ", wal.status().message()));
  }
  if (wal->partial_bytes > 0) {
    LogWal(path, "WAL ends in a partial frame",
           absl::StrCat(wal->partial_bytes, " bytes of \"", wal_path,
                        "\" were cut short (a crash or power loss while writing, or a "
                        "truncated file); SQLite replays the commits before them"));
  }
  if (wal->lost_commits == 0 && !(wal->header_damaged && wal->frames > 0)) {
    return absl::OkStatus();
  }
  const std::string where =
      wal->header_damaged ? "its header (SQLite would ignore every frame)"
                          : absl::StrCat("frame ", wal->damaged_frame + 1, " of ", wal->frames);
  const std::string lost =
      wal->header_damaged
          ? "none of its commits can be replayed"
          : absl::StrCat(wal->lost_commits, " commit", wal->lost_commits == 1 ? "" : "s",
                         " after the damage cannot be replayed");
  const std::string what =
      absl::StrCat("the write-ahead log \"", wal_path, "\" is damaged at ", where, ": ", lost);
  if (accept_damaged_wal) {
    LogWal(path, "damaged WAL accepted",
           absl::StrCat(what, "; opening the database as of the last commit before the damage"));
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat(
      "database \"", path, "\": ", what,
      ", so writes that were acknowledged would be lost. Nothing was changed. Restore a backup "
      "(evoscale admin backup), or start evoscaled with --accept-damaged-wal to open the "
      "database as of the last commit before the damage"));
}

}  // namespace

absl::StatusOr<sqlite3*> OpenDatabase(const std::string& path, Durability durability,
                                      absl::Span<const char* const> migrations,
                                      bool accept_damaged_wal) {
  if (absl::Status st = CheckWal(path, accept_damaged_wal); !st.ok()) return st;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  absl::Status st =
      rc == SQLITE_OK ? Setup(db, durability, migrations) : SqliteError(db, rc, "open");
  if (!st.ok()) {
    sqlite3_close(db);
    return absl::Status(st.code(), absl::StrCat("database \"", path, "\": ", st.message()));
  }
  return db;
}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Start(const std::string& path,
                                                                  absl::Duration interval,
                                                                  int max_log_frames) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status st = SqliteError(db, rc, "open for checkpoints");
    sqlite3_close(db);
    return st;
  }
  sqlite3_busy_timeout(db, 100);
  // A connection learns that its database is in WAL mode, and opens the log, only when it
  // first reads it: until then sqlite3_wal_checkpoint_v2 does nothing and says so only with a
  // log size of -1. (It did so here for every checkpoint until the soak bench saw the WAL grow
  // to 14 GB.)
  if (absl::Status st = Exec(db, "SELECT count(*) FROM sqlite_schema"); !st.ok()) {
    sqlite3_close(db);
    return st;
  }
  return std::unique_ptr<Checkpointer>(new Checkpointer(db, path, interval, max_log_frames));
}

Checkpointer::Checkpointer(sqlite3* db, std::string path, absl::Duration interval,
                           int max_log_frames)
    : db_(db),
      path_(std::move(path)),
      interval_(interval),
      max_log_frames_(max_log_frames),
      thread_([this] { Loop(); }) {}

void Checkpointer::Note(int rc) {
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return;  // the next round tries again
  if (rc == SQLITE_OK) {
    if (failing_ > 0) {
      LogWal(path_, "checkpoint recovered",
             absl::StrCat("a checkpoint succeeded after ", failing_,
                          " failed attempts; the write-ahead log is copied back again"));
    }
    failing_ = 0;
    return;
  }
  if (failing_++ == 0) {
    LogWal(path_, "checkpoint failed",
           absl::StrCat(sqlite3_errstr(rc), " (SQLite code ", sqlite3_extended_errcode(db_),
                        "): nothing is lost, every commit stays in the write-ahead log, but it "
                        "grows until a checkpoint succeeds; check the disk (evoscaled tries "
                        "again every ", absl::FormatDuration(interval_), ")"));
  }
  absl::MutexLock lock(&mu_);
  ++failures_;
}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  sqlite3_close(db_);
}

void Checkpointer::Loop() {
  for (;;) {
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      stop = stop_;
    }
    // PASSIVE copies what it can without waiting for anyone; a busy database simply waits
    // for the next round.
    int log_frames = 0;
    const int rc =
        sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames, nullptr);
    Note(rc);
    // A long log: start it over (see kDefaultMaxLogFrames). BUSY (no gap within the busy
    // timeout) leaves it for the next round.
    if (rc == SQLITE_OK && log_frames > max_log_frames_) {
      const int truncated =
          sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
      Note(truncated);
      if (truncated == SQLITE_OK) {
        absl::MutexLock lock(&mu_);
        ++truncations_;
      }
    }
    if (stop) return;
  }
}

}  // namespace evoscale::service::internal
