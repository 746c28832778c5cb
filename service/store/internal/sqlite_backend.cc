// The study store on SQLite: WAL mode, foreign keys on, prepared statements only, WAL
// checkpoints on a thread of their own.
#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/store/internal/backend.h"
#include "service/store/internal/database_lock.h"
#include "service/store/internal/sqlite.h"

namespace evoscale::service::internal {
namespace {

// Each entry moves the schema from version i to i+1.
constexpr const char* kMigrations[] = {
    // 0 -> 1
    R"sql(
    CREATE TABLE studies(
      id INTEGER PRIMARY KEY,
      display_name TEXT NOT NULL,
      state INTEGER NOT NULL,
      body BLOB NOT NULL);
    CREATE TABLE trials(
      study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
      id INTEGER NOT NULL,
      state INTEGER NOT NULL,
      client_id TEXT NOT NULL,
      completion_seq INTEGER NOT NULL,
      body BLOB NOT NULL,
      PRIMARY KEY(study_id, id)) WITHOUT ROWID;
    )sql",
    // 1 -> 2: study ids are never reused, even after the newest study is deleted.
    R"sql(
    CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO counters(name, value)
      SELECT 'next_study_id', coalesce(max(id), 0) + 1 FROM studies;
    )sql",
};
static_assert(std::size(kMigrations) == kStoreSchemaVersion);

class SqliteBackend : public StoreBackend {
 public:
  explicit SqliteBackend(sqlite3* db) : db_(db) {}
  ~SqliteBackend() override {
    checkpointer_.reset();
    for (sqlite3_stmt* s : {put_study_, bump_study_id_, delete_study_, put_trial_, begin_, commit_,
                            rollback_, savepoint_, release_, rollback_to_}) {
      sqlite3_finalize(s);
    }
    sqlite3_close(db_);
  }

  absl::Status Prepare() {
    // Checkpoints run on the Checkpointer's thread, never inside a request's commit.
    if (absl::Status st = Exec(db_, "PRAGMA wal_autocheckpoint=0"); !st.ok()) return st;
    struct {
      sqlite3_stmt** stmt;
      const char* sql;
    } const statements[] = {
        {&put_study_,
         "INSERT INTO studies(id, display_name, state, body) VALUES(?1, ?2, ?3, ?4) "
         "ON CONFLICT(id) DO UPDATE SET display_name=?2, state=?3, body=?4"},
        {&bump_study_id_,
         "UPDATE counters SET value = max(value, ?1 + 1) WHERE name = 'next_study_id'"},
        {&delete_study_, "DELETE FROM studies WHERE id=?1"},
        {&put_trial_,
         "INSERT INTO trials(study_id, id, state, client_id, completion_seq, body) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(study_id, id) DO UPDATE SET "
         "state=?3, client_id=?4, completion_seq=?5, body=?6"},
        {&begin_, "BEGIN IMMEDIATE"},
        {&commit_, "COMMIT"},
        {&rollback_, "ROLLBACK"},
        {&savepoint_, "SAVEPOINT batch"},
        {&release_, "RELEASE batch"},
        {&rollback_to_, "ROLLBACK TO batch"},
    };
    for (const auto& [stmt, sql] : statements) {
      int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, nullptr);
      if (rc != SQLITE_OK) return SqliteError(db_, rc, absl::StrCat("prepare \"", sql, "\""));
    }
    return absl::OkStatus();
  }

  void Hold(std::unique_ptr<DatabaseLock> lock, std::unique_ptr<Checkpointer> checkpointer) {
    lock_ = std::move(lock);
    checkpointer_ = std::move(checkpointer);
  }

  void CommitGroup(const std::vector<const WriteBatch*>& group,
                   std::vector<absl::Status>* results) override {
    results->assign(group.size(), absl::OkStatus());
    if (group.empty()) return;
    absl::Status st = StepDone(db_, begin_, "begin");
    if (st.ok()) {
      const bool savepoints = group.size() > 1;  // one batch: the transaction is enough
      for (size_t i = 0; i < group.size() && st.ok(); ++i) {
        if (savepoints) st = StepDone(db_, savepoint_, "savepoint");
        if (!st.ok()) break;
        absl::Status batch = ApplyOps(*group[i]);
        if (savepoints) {
          if (!batch.ok()) st = StepDone(db_, rollback_to_, "rollback to savepoint");
          if (st.ok()) st = StepDone(db_, release_, "release savepoint");
        }
        (*results)[i] = batch;
      }
      if (st.ok() && !savepoints && !(*results)[0].ok()) st = (*results)[0];
      if (st.ok()) st = StepDone(db_, commit_, "commit");
    }
    if (!st.ok()) {
      StepDone(db_, rollback_, "rollback").IgnoreError();
      for (absl::Status& r : *results) {
        if (r.ok()) r = st;
      }
    }
  }

  absl::StatusOr<std::vector<StoredStudy>> LoadStudies(const StudyQuery& query) override {
    std::vector<StoredStudy> studies;
    const std::string select_studies =
        absl::StrCat("SELECT id, display_name, body FROM studies WHERE id > ", query.after_id,
                     " AND id <= ", query.through_id, " ORDER BY id");
    absl::Status st = ForEachRow(
        db_, select_studies.c_str(), "load studies", [&](sqlite3_stmt* s) {
          if (query.limit > 0 && static_cast<int>(studies.size()) == query.limit) {
            return absl::OkStatus();
          }
          if (!query.display_name.empty() && ColumnBlob(s, 1) != query.display_name) {
            return absl::OkStatus();
          }
          StoredStudy study;
          study.id = sqlite3_column_int64(s, 0);
          if (!study.study.ParseFromString(ColumnBlob(s, 2))) {
            return absl::DataLossError(absl::StrCat("study ", study.id, ": unreadable record"));
          }
          study.study.set_name(absl::StrCat("studies/", study.id));
          studies.push_back(std::move(study));
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    if (studies.empty() || !query.with_trials) return studies;
    size_t si = 0;
    const std::string select_trials = absl::StrCat(
        "SELECT study_id, id, completion_seq, body FROM trials WHERE study_id >= ",
        studies.front().id, " AND study_id <= ", studies.back().id, " ORDER BY study_id, id");
    st = ForEachRow(db_, select_trials.c_str(), "load trials", [&](sqlite3_stmt* s) {
      const int64_t study_id = sqlite3_column_int64(s, 0);
      while (si < studies.size() && studies[si].id < study_id) ++si;
      if (si == studies.size() || studies[si].id != study_id) {
        return absl::OkStatus();  // a study the query left out
      }
      StoredTrial t;
      t.completion_seq = sqlite3_column_int64(s, 2);
      if (!t.trial.ParseFromString(ColumnBlob(s, 3))) {
        return absl::DataLossError(absl::StrCat("study ", study_id, " trial ",
                                                sqlite3_column_int64(s, 1), ": unreadable record"));
      }
      t.trial.set_name(absl::StrCat("studies/", study_id, "/trials/", t.trial.id()));
      studies[si].trials.push_back(std::move(t));
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return studies;
  }

  absl::StatusOr<int64_t> NextStudyId() override {
    int64_t next = 1;
    absl::Status st = ForEachRow(db_, "SELECT value FROM counters WHERE name = 'next_study_id'",
                                 "read next study id", [&](sqlite3_stmt* s) {
                                   next = sqlite3_column_int64(s, 0);
                                   return absl::OkStatus();
                                 });
    if (!st.ok()) return st;
    return next;
  }

  int schema_version() override { return SchemaVersion(db_); }

  int64_t checkpoint_failures() override {
    return checkpointer_ != nullptr ? checkpointer_->failures() : 0;
  }

 private:
  absl::Status ApplyOps(const WriteBatch& batch) {
    absl::Status st;
    for (const WriteBatch::Op& op : batch.ops()) {
      switch (op.kind) {
        case WriteBatch::Op::kPutStudy:
          sqlite3_bind_int64(put_study_, 1, op.study_id);
          sqlite3_bind_text(put_study_, 2, op.text.data(), op.text.size(), SQLITE_STATIC);
          sqlite3_bind_int(put_study_, 3, op.state);
          sqlite3_bind_blob(put_study_, 4, op.body.data(), op.body.size(), SQLITE_STATIC);
          st = StepDone(db_, put_study_, "put study");
          if (st.ok()) {
            sqlite3_bind_int64(bump_study_id_, 1, op.study_id);
            st = StepDone(db_, bump_study_id_, "bump study id");
          }
          break;
        case WriteBatch::Op::kDeleteStudy:
          sqlite3_bind_int64(delete_study_, 1, op.study_id);
          st = StepDone(db_, delete_study_, "delete study");
          break;
        case WriteBatch::Op::kPutTrial:
          sqlite3_bind_int64(put_trial_, 1, op.study_id);
          sqlite3_bind_int64(put_trial_, 2, op.trial_id);
          sqlite3_bind_int(put_trial_, 3, op.state);
          sqlite3_bind_text(put_trial_, 4, op.text.data(), op.text.size(), SQLITE_STATIC);
          sqlite3_bind_int64(put_trial_, 5, op.completion_seq);
          sqlite3_bind_blob(put_trial_, 6, op.body.data(), op.body.size(), SQLITE_STATIC);
          st = StepDone(db_, put_trial_, "put trial");
          break;
        case WriteBatch::Op::kFence:
          break;  // one process per file (database_lock.h): no other owner to fence off
      }
      if (!st.ok()) break;
    }
    return st;
  }

  // Destroyed in this order: the checkpointer (its own connection), the statements and the
  // connection, then the lock (held until the file is closed).
  std::unique_ptr<DatabaseLock> lock_;
  std::unique_ptr<Checkpointer> checkpointer_;
  sqlite3* const db_;  // owned
  sqlite3_stmt* put_study_ = nullptr;
  sqlite3_stmt* bump_study_id_ = nullptr;
  sqlite3_stmt* delete_study_ = nullptr;
  sqlite3_stmt* put_trial_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
  sqlite3_stmt* savepoint_ = nullptr;
  sqlite3_stmt* release_ = nullptr;
  sqlite3_stmt* rollback_to_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StoreBackend>> OpenSqliteBackend(const std::string& path,
                                                                Durability durability,
                                                                bool accept_damaged_wal) {
  // The lock comes first: no second process may migrate or write the file meanwhile.
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(path);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<sqlite3*> db = OpenDatabase(path, durability, kMigrations, accept_damaged_wal);
  if (!db.ok()) return db.status();
  auto backend = std::make_unique<SqliteBackend>(*db);
  if (absl::Status st = backend->Prepare(); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("database \"", path, "\": ", st.message()));
  }
  absl::StatusOr<std::unique_ptr<Checkpointer>> checkpointer =
      Checkpointer::Start(path, absl::Milliseconds(500));
  if (!checkpointer.ok()) return checkpointer.status();
  backend->Hold(*std::move(lock), *std::move(checkpointer));
  return backend;
}

}  // namespace evoscale::service::internal
