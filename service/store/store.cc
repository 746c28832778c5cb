#include "service/store/store.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/internal/database_lock.h"
#include "service/store/internal/sqlite.h"

namespace evoscale::service {
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
static_assert(std::size(kMigrations) == Store::kSchemaVersion);

using internal::ColumnBlob;
using internal::SqliteError;
using internal::StepDone;

}  // namespace

void WriteBatch::PutStudy(int64_t id, const v1::Study& study) {
  Op op{.kind = Op::kPutStudy, .study_id = id, .state = static_cast<int>(study.state())};
  op.text = study.display_name();
  v1::Study copy = study;
  copy.clear_name();
  copy.clear_trial_count();
  copy.clear_completed_trial_count();
  copy.SerializeToString(&op.body);
  ops_.push_back(std::move(op));
}

void WriteBatch::DeleteStudy(int64_t id) {
  ops_.push_back(Op{.kind = Op::kDeleteStudy, .study_id = id});
}

void WriteBatch::PutTrial(int64_t study_id, const v1::Trial& trial, int64_t completion_seq) {
  Op op{.kind = Op::kPutTrial,
        .study_id = study_id,
        .trial_id = trial.id(),
        .state = static_cast<int>(trial.state()),
        .completion_seq = completion_seq};
  op.text = trial.client_id();
  trial.SerializeToString(&op.body);
  ops_.push_back(std::move(op));
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, Durability durability,
                                                   bool accept_damaged_wal) {
  // The lock comes first: no second process may migrate or write the file meanwhile.
  absl::StatusOr<std::unique_ptr<internal::DatabaseLock>> lock =
      internal::DatabaseLock::Acquire(path);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<sqlite3*> db =
      internal::OpenDatabase(path, durability, kMigrations, accept_damaged_wal);
  if (!db.ok()) return db.status();
  std::unique_ptr<Store> store(new Store(*db, durability));
  store->lock_ = *std::move(lock);
  if (absl::Status st = store->Prepare(); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("database \"", path, "\": ", st.message()));
  }
  absl::StatusOr<std::unique_ptr<internal::Checkpointer>> checkpointer =
      internal::Checkpointer::Start(path, absl::Milliseconds(500));
  if (!checkpointer.ok()) return checkpointer.status();
  store->checkpointer_ = *std::move(checkpointer);
  if (store->defers_sync()) store->committer_ = std::thread(&Store::CommitterLoop, store.get());
  return store;
}

Store::Store(sqlite3* db, Durability durability) : durability_(durability), db_(db) {}

Store::~Store() {
  if (committer_.joinable()) {
    {
      absl::MutexLock lock(&queue_mu_);
      shutting_down_ = true;
    }
    committer_.join();  // commits what is queued first
  }
  checkpointer_.reset();
  absl::MutexLock lock(&mu_);
  for (sqlite3_stmt* s : {put_study_, bump_study_id_, delete_study_, put_trial_, begin_, commit_,
                          rollback_, savepoint_, release_, rollback_to_}) {
    sqlite3_finalize(s);
  }
  sqlite3_close(db_);
}

absl::Status Store::Prepare() {
  absl::MutexLock lock(&mu_);
  // Checkpoints run on the Checkpointer's thread, never inside a request's commit.
  if (absl::Status st = internal::Exec(db_, "PRAGMA wal_autocheckpoint=0"); !st.ok()) return st;
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

absl::StatusOr<int64_t> Store::NextStudyId() {
  absl::MutexLock lock(&mu_);
  int64_t next = 1;
  absl::Status st =
      internal::ForEachRow(db_, "SELECT value FROM counters WHERE name = 'next_study_id'",
                           "read next study id", [&](sqlite3_stmt* s) {
                             next = sqlite3_column_int64(s, 0);
                             return absl::OkStatus();
                           });
  if (!st.ok()) return st;
  return next;
}

int Store::schema_version() {
  absl::MutexLock lock(&mu_);
  return internal::SchemaVersion(db_);
}

absl::Status Store::Write(WriteBatch batch) {
  if (batch.empty()) return absl::OkStatus();
  absl::StatusOr<uint64_t> ticket = Enqueue(std::move(batch));
  if (!ticket.ok()) return ticket.status();
  return WaitDurable(*ticket);
}

absl::StatusOr<uint64_t> Store::Enqueue(WriteBatch batch) {
  absl::MutexLock lock(&queue_mu_);
  if (!stopped_.ok()) return stopped_;
  const uint64_t ticket = ++last_ticket_;
  queue_.push_back(Queued{ticket, std::move(batch)});
  return ticket;  // the committer's condition is re-evaluated when the lock is released
}

uint64_t Store::last_ticket() {
  absl::MutexLock lock(&queue_mu_);
  return last_ticket_;
}

int64_t Store::commits() {
  absl::MutexLock lock(&queue_mu_);
  return commits_;
}

int64_t Store::checkpoint_failures() {
  return checkpointer_ != nullptr ? checkpointer_->failures() : 0;
}

absl::Status Store::SettledStatus(uint64_t ticket) {
  // Once stopped, nothing is answered: the caller may have read state the database lacks.
  if (!stopped_.ok()) {
    batch_errors_.erase(ticket);
    return stopped_;
  }
  auto it = batch_errors_.find(ticket);
  if (it == batch_errors_.end()) return absl::OkStatus();
  absl::Status st = std::move(it->second);
  batch_errors_.erase(it);
  return st;
}

absl::Status Store::WaitDurable(uint64_t ticket) {
  absl::MutexLock lock(&queue_mu_);
  if (defers_sync()) {
    // The committer thread commits; wait for it (or for the stop).
    auto settled = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return ticket <= durable_ || !stopped_.ok();
    };
    queue_mu_.Await(absl::Condition(&settled));
    return SettledStatus(ticket);
  }
  for (;;) {
    if (ticket <= durable_ || !stopped_.ok()) return SettledStatus(ticket);
    if (!committing_) {
      // Leader: commit everything queued so far (it includes `ticket`, which is not settled
      // and not in flight). Nothing registers callbacks in this mode.
      std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>> due;
      CommitQueued(&due);
      continue;
    }
    auto done_or_free = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return !committing_ || ticket <= durable_;
    };
    queue_mu_.Await(absl::Condition(&done_or_free));
  }
}

void Store::OnDurable(uint64_t ticket, std::function<void(absl::Status)> done) {
  if (!defers_sync()) {
    done(WaitDurable(ticket));
    return;
  }
  absl::Status now;
  {
    absl::MutexLock lock(&queue_mu_);
    if (ticket > durable_ && stopped_.ok()) {
      callbacks_.emplace(ticket, std::move(done));
      return;
    }
    now = SettledStatus(ticket);
  }
  done(now);
}

void Store::CommitQueued(
    std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>>* due) {
  committing_ = true;
  std::vector<Queued> group;
  group.swap(queue_);
  queue_mu_.Unlock();
  std::vector<absl::Status> results;
  CommitGroup(group, &results);
  queue_mu_.Lock();
  committing_ = false;
  ++commits_;
  for (size_t i = 0; i < group.size(); ++i) {
    if (results[i].ok()) continue;
    if (defers_sync() && stopped_.ok()) {
      // The service already shows this write: stop rather than diverge from the database.
      stopped_ = absl::UnavailableError(absl::StrCat(
          "the database refused a write (", results[i].message(),
          "); evoscaled stopped writing so that it never answers from state the database "
          "lacks: restart it"));
    }
    batch_errors_[group[i].ticket] = results[i];
  }
  if (!group.empty()) durable_ = std::max(durable_, group.back().ticket);
  if (!stopped_.ok()) {
    // Nothing more will commit: settle every queued batch and every waiting callback.
    queue_.clear();
    durable_ = last_ticket_;
    for (auto& [ticket, cb] : callbacks_) due->emplace_back(std::move(cb), stopped_);
    callbacks_.clear();
    return;
  }
  for (auto it = callbacks_.begin(); it != callbacks_.end() && it->first <= durable_;) {
    due->emplace_back(std::move(it->second), SettledStatus(it->first));
    it = callbacks_.erase(it);
  }
}

void Store::CommitterLoop() {
  absl::MutexLock lock(&queue_mu_);
  for (;;) {
    auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return !queue_.empty() || shutting_down_;
    };
    queue_mu_.Await(absl::Condition(&work));
    if (queue_.empty()) return;  // shutting down, and everything queued is committed
    std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>> due;
    CommitQueued(&due);
    if (due.empty()) continue;
    queue_mu_.Unlock();
    for (auto& [cb, st] : due) cb(st);
    queue_mu_.Lock();
  }
}

void Store::CommitGroup(const std::vector<Queued>& group, std::vector<absl::Status>* results) {
  results->assign(group.size(), absl::OkStatus());
  if (group.empty()) return;
  absl::MutexLock lock(&mu_);
  absl::Status st = StepDone(db_, begin_, "begin");
  if (st.ok()) {
    const bool savepoints = group.size() > 1;  // one batch: the transaction is enough
    for (size_t i = 0; i < group.size() && st.ok(); ++i) {
      if (savepoints) st = StepDone(db_, savepoint_, "savepoint");
      if (!st.ok()) break;
      absl::Status batch = ApplyOps(group[i].batch);
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

absl::Status Store::ApplyOps(const WriteBatch& batch) {
  absl::Status st;
  for (const WriteBatch::Op& op : batch.ops_) {
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
    }
    if (!st.ok()) break;
  }
  return st;
}

absl::StatusOr<std::vector<StoredStudy>> Store::LoadAll() {
  absl::MutexLock lock(&mu_);
  std::vector<StoredStudy> studies;
  absl::Status st = internal::ForEachRow(
      db_, "SELECT id, body FROM studies ORDER BY id", "load studies", [&](sqlite3_stmt* s) {
        StoredStudy study;
        study.id = sqlite3_column_int64(s, 0);
        if (!study.study.ParseFromString(ColumnBlob(s, 1))) {
          return absl::DataLossError(absl::StrCat("study ", study.id, ": unreadable record"));
        }
        study.study.set_name(absl::StrCat("studies/", study.id));
        studies.push_back(std::move(study));
        return absl::OkStatus();
      });
  if (!st.ok()) return st;

  size_t si = 0;
  st = internal::ForEachRow(
      db_, "SELECT study_id, id, completion_seq, body FROM trials ORDER BY study_id, id",
      "load trials", [&](sqlite3_stmt* s) {
        const int64_t study_id = sqlite3_column_int64(s, 0);
        while (si < studies.size() && studies[si].id < study_id) ++si;
        if (si == studies.size() || studies[si].id != study_id) {
          return absl::OkStatus();  // cannot happen: foreign key
        }
        StoredTrial t;
        t.completion_seq = sqlite3_column_int64(s, 2);
        if (!t.trial.ParseFromString(ColumnBlob(s, 3))) {
          return absl::DataLossError(absl::StrCat(
              "study ", study_id, " trial ", sqlite3_column_int64(s, 1), ": unreadable record"));
        }
        t.trial.set_name(absl::StrCat("studies/", study_id, "/trials/", t.trial.id()));
        studies[si].trials.push_back(std::move(t));
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return studies;
}

}  // namespace evoscale::service
