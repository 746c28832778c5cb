#include "service/store/backup.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/store/internal/sqlite.h"

namespace evoscale::service {
namespace {

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Connection = std::unique_ptr<sqlite3, Closer>;

absl::StatusOr<Connection> Open(const std::string& path, int flags, absl::string_view what) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Connection c(db);
  if (rc != SQLITE_OK) {
    const absl::Status st = internal::SqliteError(db, rc, what);
    return absl::Status(st.code(), absl::StrCat("\"", path, "\": ", st.message()));
  }
  return c;
}

}  // namespace

absl::StatusOr<int64_t> BackupDatabase(const std::string& source, const std::string& dest) {
  struct stat st;
  if (stat(dest.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat("backup \"", dest, "\": the file exists"));
  }
  // Read-write: a reader of a WAL database needs its -shm file (it writes nothing else).
  absl::StatusOr<Connection> src = Open(source, SQLITE_OPEN_READWRITE, "open for backup");
  if (!src.ok()) return src.status();
  sqlite3_busy_timeout(src->get(), 5000);
  absl::StatusOr<Connection> dst =
      Open(dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "create backup");
  if (!dst.ok()) return dst.status();
  sqlite3_backup* backup = sqlite3_backup_init(dst->get(), "main", src->get(), "main");
  if (backup == nullptr) {
    return internal::SqliteError(dst->get(), sqlite3_errcode(dst->get()),
                                 absl::StrCat("backup \"", source, "\" to \"", dest, "\""));
  }
  const int step = sqlite3_backup_step(backup, -1);  // every page, one read transaction
  const int finish = sqlite3_backup_finish(backup);
  if (step != SQLITE_DONE || finish != SQLITE_OK) {
    const absl::Status error =
        internal::SqliteError(dst->get(), step != SQLITE_DONE ? step : finish,
                              absl::StrCat("backup \"", source, "\" to \"", dest, "\""));
    dst->reset();
    std::remove(dest.c_str());
    return error;
  }
  // The copy keeps the source's WAL mode; a single file is what a backup should be. Then the
  // copy is checked as SQLite reads it.
  for (const char* sql : {"PRAGMA journal_mode=DELETE", "PRAGMA quick_check"}) {
    absl::Status s = internal::ForEachRow(dst->get(), sql, sql, [&](sqlite3_stmt* row) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(row, 0));
      const std::string answer = text == nullptr ? "" : text;
      if (sql[7] == 'q' && answer != "ok") {
        return absl::DataLossError(absl::StrCat("backup \"", dest, "\": quick_check: ", answer));
      }
      return absl::OkStatus();
    });
    if (!s.ok()) {
      dst->reset();
      std::remove(dest.c_str());
      return s;
    }
  }
  dst->reset();
  if (stat(dest.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("backup \"", dest, "\": vanished after writing"));
  }
  return static_cast<int64_t>(st.st_size);
}

}  // namespace evoscale::service
