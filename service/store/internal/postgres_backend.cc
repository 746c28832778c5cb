// The study store on PostgreSQL: the same tables as on SQLite (bytea bodies), upserts of whole
// records, one transaction per group of batches with a savepoint per batch.
#include <libpq-fe.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/store/internal/backend.h"
#include "service/store/internal/postgres.h"

namespace evoscale::service::internal {
namespace {

constexpr const char* kPostgresMigrations[] = {
    // 0 -> 1
    R"sql(
    CREATE TABLE studies(
      id BIGINT PRIMARY KEY,
      display_name TEXT NOT NULL,
      state INTEGER NOT NULL,
      body BYTEA NOT NULL);
    CREATE TABLE trials(
      study_id BIGINT NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
      id BIGINT NOT NULL,
      state INTEGER NOT NULL,
      client_id TEXT NOT NULL,
      completion_seq BIGINT NOT NULL,
      body BYTEA NOT NULL,
      PRIMARY KEY(study_id, id));
    )sql",
    // 1 -> 2: study ids are never reused, even after the newest study is deleted.
    R"sql(
    CREATE TABLE counters(name TEXT PRIMARY KEY, value BIGINT NOT NULL);
    INSERT INTO counters(name, value)
      SELECT 'next_study_id', coalesce(max(id), 0) + 1 FROM studies;
    )sql",
};
static_assert(std::size(kPostgresMigrations) == kStoreSchemaVersion);

// How long a kPowerLoss commit waits for a lost server to come back before it fails.
constexpr absl::Duration kReconnectFor = absl::Seconds(30);

class PostgresBackend : public StoreBackend {
 public:
  PostgresBackend(std::unique_ptr<PgConnection> conn, Durability durability)
      : conn_(std::move(conn)), durability_(durability) {}

  // Session settings and prepared statements; again after a reconnect.
  absl::Status Prepare() {
    // kProcessCrash: a commit returns once PostgreSQL has it, before its WAL reaches the disk
    // (a crash of PostgreSQL's machine may drop the last ~0.6 s; evoscaled's own crash loses
    // nothing); kPowerLoss: once the WAL is flushed.
    const char* sync = durability_ == Durability::kPowerLoss ? "SET synchronous_commit = on"
                                                             : "SET synchronous_commit = off";
    if (absl::Status st = conn_->Exec(sync, "set synchronous_commit"); !st.ok()) return st;
    const struct {
      const char* name;
      const char* sql;
    } statements[] = {
        {"put_study",
         "INSERT INTO studies(id, display_name, state, body) VALUES($1, $2, $3, $4) "
         "ON CONFLICT(id) DO UPDATE SET display_name = EXCLUDED.display_name, "
         "state = EXCLUDED.state, body = EXCLUDED.body"},
        {"bump_study_id",
         "UPDATE counters SET value = GREATEST(value, $1::int8 + 1) WHERE name = 'next_study_id'"},
        {"delete_study", "DELETE FROM studies WHERE id = $1"},
        {"put_trial",
         "INSERT INTO trials(study_id, id, state, client_id, completion_seq, body) "
         "VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT(study_id, id) DO UPDATE SET "
         "state = EXCLUDED.state, client_id = EXCLUDED.client_id, "
         "completion_seq = EXCLUDED.completion_seq, body = EXCLUDED.body"},
        {"fence", "SELECT evoscale_fence($1, $2)"},
    };
    for (const auto& [name, sql] : statements) {
      if (absl::Status st = conn_->Prepare(name, sql, absl::StrCat("prepare ", name)); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

  void CommitGroup(const std::vector<const WriteBatch*>& group,
                   std::vector<absl::Status>* results) override {
    results->assign(group.size(), absl::OkStatus());
    if (group.empty()) return;
    // Every write is an upsert of a whole record (or a delete), so a group whose commit was
    // cut off by a lost connection is safe to run again on a new one: once, here.
    absl::Status st = EnsureConnected();
    // The fast path: the whole group in one transaction in one round trip. If anything in it
    // fails, nothing of it is written, and the slow path below finds which batch failed.
    if (st.ok() && Pipelined(group).ok()) return;
    if (st.ok()) conn_->Exec("ROLLBACK", "rollback").IgnoreError();
    if (st.ok()) st = TryGroup(group, results);
    if (!st.ok() && conn_->broken() && EnsureConnected().ok()) {
      results->assign(group.size(), absl::OkStatus());
      st = TryGroup(group, results);
    }
    // kPowerLoss: the service already shows these writes (their answers wait for this
    // commit), and a failure would stop the store until a restart. A PostgreSQL restart or
    // failover takes seconds: ride it out, reconnecting every 100 ms for up to
    // kReconnectFor, while later writes queue behind this group.
    const absl::Time until = absl::Now() + kReconnectFor;
    while (!st.ok() && durability_ == Durability::kPowerLoss && conn_->broken() &&
           absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(100));
      if (!EnsureConnected().ok()) continue;
      results->assign(group.size(), absl::OkStatus());
      st = TryGroup(group, results);
    }
    if (!st.ok()) {
      if (!conn_->broken()) conn_->Exec("ROLLBACK", "rollback").IgnoreError();
      for (absl::Status& r : *results) {
        if (r.ok()) r = st;
      }
    }
  }

  absl::StatusOr<std::vector<StoredStudy>> LoadStudies(const StudyQuery& query) override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    std::vector<StoredStudy> studies;
    const std::string select_studies =
        absl::StrCat("SELECT id, display_name, body FROM studies WHERE id > ", query.after_id,
                     " AND id <= ", query.through_id, " ORDER BY id");
    absl::StatusOr<PgResult> rows = conn_->Query(select_studies.c_str(), "load studies");
    if (!rows.ok()) return rows.status();
    for (int i = 0; i < PgRows(rows->get()); ++i) {
      if (query.limit > 0 && static_cast<int>(studies.size()) == query.limit) break;
      if (!query.display_name.empty() && PgBytes(rows->get(), i, 1) != query.display_name) {
        continue;
      }
      StoredStudy study;
      study.id = PgInt64(rows->get(), i, 0);
      if (!study.study.ParseFromString(PgBytes(rows->get(), i, 2))) {
        return absl::DataLossError(absl::StrCat("study ", study.id, ": unreadable record"));
      }
      study.study.set_name(absl::StrCat("studies/", study.id));
      studies.push_back(std::move(study));
    }
    if (studies.empty() || !query.with_trials) return studies;
    const std::string select_trials = absl::StrCat(
        "SELECT study_id, id, completion_seq, body FROM trials WHERE study_id >= ",
        studies.front().id, " AND study_id <= ", studies.back().id, " ORDER BY study_id, id");
    rows = conn_->Query(select_trials.c_str(), "load trials");
    if (!rows.ok()) return rows.status();
    size_t si = 0;
    for (int i = 0; i < PgRows(rows->get()); ++i) {
      const int64_t study_id = PgInt64(rows->get(), i, 0);
      while (si < studies.size() && studies[si].id < study_id) ++si;
      if (si == studies.size() || studies[si].id != study_id) continue;  // left out
      StoredTrial t;
      t.completion_seq = PgInt64(rows->get(), i, 2);
      if (!t.trial.ParseFromString(PgBytes(rows->get(), i, 3))) {
        return absl::DataLossError(absl::StrCat("study ", study_id, " trial ",
                                                PgInt64(rows->get(), i, 1), ": unreadable record"));
      }
      t.trial.set_name(absl::StrCat("studies/", study_id, "/trials/", t.trial.id()));
      studies[si].trials.push_back(std::move(t));
    }
    return studies;
  }

  absl::StatusOr<int64_t> NextStudyId() override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    absl::StatusOr<PgResult> r = conn_->Query(
        "SELECT value FROM counters WHERE name = 'next_study_id'", "read next study id");
    if (!r.ok()) return r.status();
    return PgRows(r->get()) == 0 ? 1 : PgInt64(r->get(), 0, 0);
  }

  absl::Status Ping() override {
    // PQping opens and closes a connection of its own: the store's is left to commits.
    const char* const keywords[] = {"connect_timeout", "dbname", nullptr};
    const char* const values[] = {"2", conn_->uri().c_str(), nullptr};
    if (PQpingParams(keywords, values, /*expand_dbname=*/1) == PQPING_OK) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("database \"", conn_->uri(), "\" does not answer"));
  }

  int schema_version() override {
    absl::StatusOr<int> v = PostgresSchemaVersion(*conn_, "studies");
    return v.ok() ? *v : -1;
  }

 private:
  // BEGIN, every batch's statements, COMMIT: one pipeline. A lease is checked once per group:
  // the first check of a (study, epoch) holds the lease row FOR SHARE until COMMIT, so a
  // takeover waits for the whole group, and the batches after it are fenced by it too.
  absl::Status Pipelined(const std::vector<const WriteBatch*>& group) {
    std::vector<PgConnection::Statement> statements;
    statements.push_back({.sql = "BEGIN", .what = "begin"});
    std::vector<std::pair<int64_t, int64_t>> fenced;  // (study, epoch); a group holds few
    for (const WriteBatch* batch : group) {
      for (const WriteBatch::Op& op : batch->ops()) {
        if (op.kind == WriteBatch::Op::kFence) {
          const std::pair<int64_t, int64_t> lease(op.study_id, op.completion_seq);
          if (std::find(fenced.begin(), fenced.end(), lease) != fenced.end()) continue;
          fenced.push_back(lease);
        }
        switch (op.kind) {
          case WriteBatch::Op::kPutStudy:
            statements.push_back(
                {.name = "put_study",
                 .params = {absl::StrCat(op.study_id), op.text, absl::StrCat(op.state), op.body},
                 .binary = {false, false, false, true},
                 .what = "put study"});
            statements.push_back({.name = "bump_study_id",
                                  .params = {absl::StrCat(op.study_id)},
                                  .what = "bump study id"});
            break;
          case WriteBatch::Op::kDeleteStudy:
            statements.push_back({.name = "delete_study",
                                  .params = {absl::StrCat(op.study_id)},
                                  .what = "delete study"});
            break;
          case WriteBatch::Op::kPutTrial:
            statements.push_back({.name = "put_trial",
                                  .params = {absl::StrCat(op.study_id), absl::StrCat(op.trial_id),
                                             absl::StrCat(op.state), op.text,
                                             absl::StrCat(op.completion_seq), op.body},
                                  .binary = {false, false, false, false, false, true},
                                  .what = "put trial"});
            break;
          case WriteBatch::Op::kFence:
            statements.push_back(
                {.name = "fence",
                 .params = {absl::StrCat(op.study_id), absl::StrCat(op.completion_seq)},
                 .what = "check the study's lease"});
            break;
        }
      }
    }
    statements.push_back({.sql = "COMMIT", .what = "commit"});
    return conn_->Pipeline(statements);
  }

  // After the server went away: a new connection, prepared again.
  absl::Status EnsureConnected() {
    if (!conn_->broken()) return absl::OkStatus();
    if (absl::Status st = conn_->Reset(); !st.ok()) return st;
    return Prepare();
  }

  // One attempt: BEGIN, each batch in a savepoint (none for a single batch), COMMIT. A
  // transaction-level failure is returned (the caller rolls back); batch failures are in
  // `results`.
  absl::Status TryGroup(const std::vector<const WriteBatch*>& group,
                        std::vector<absl::Status>* results) {
    if (absl::Status st = conn_->Exec("BEGIN", "begin"); !st.ok()) return st;
    const bool savepoints = group.size() > 1;
    for (size_t i = 0; i < group.size(); ++i) {
      if (savepoints) {
        if (absl::Status st = conn_->Exec("SAVEPOINT batch", "savepoint"); !st.ok()) return st;
      }
      absl::Status batch = ApplyOps(*group[i]);
      if (conn_->broken()) return batch;
      if (!savepoints) {
        if (!batch.ok()) return batch;
      } else {
        if (!batch.ok()) {
          if (absl::Status st = conn_->Exec("ROLLBACK TO batch", "rollback to savepoint");
              !st.ok()) {
            return st;
          }
        }
        if (absl::Status st = conn_->Exec("RELEASE batch", "release savepoint"); !st.ok()) {
          return st;
        }
      }
      (*results)[i] = batch;
    }
    return conn_->Exec("COMMIT", "commit");
  }

  absl::Status ApplyOps(const WriteBatch& batch) {
    static constexpr bool kStudyBinary[] = {false, false, false, true};
    static constexpr bool kTrialBinary[] = {false, false, false, false, false, true};
    for (const WriteBatch::Op& op : batch.ops()) {
      absl::StatusOr<PgResult> r;
      switch (op.kind) {
        case WriteBatch::Op::kPutStudy: {
          const std::string params[] = {absl::StrCat(op.study_id), op.text, absl::StrCat(op.state),
                                        op.body};
          r = conn_->Run("put_study", params, kStudyBinary, "put study");
          if (r.ok()) {
            const std::string id[] = {absl::StrCat(op.study_id)};
            r = conn_->Run("bump_study_id", id, {}, "bump study id");
          }
          break;
        }
        case WriteBatch::Op::kDeleteStudy: {
          const std::string id[] = {absl::StrCat(op.study_id)};
          r = conn_->Run("delete_study", id, {}, "delete study");
          break;
        }
        case WriteBatch::Op::kPutTrial: {
          const std::string params[] = {absl::StrCat(op.study_id),       absl::StrCat(op.trial_id),
                                        absl::StrCat(op.state),          op.text,
                                        absl::StrCat(op.completion_seq), op.body};
          r = conn_->Run("put_trial", params, kTrialBinary, "put trial");
          break;
        }
        case WriteBatch::Op::kFence: {
          const std::string params[] = {absl::StrCat(op.study_id), absl::StrCat(op.completion_seq)};
          r = conn_->Run("fence", params, {}, "check the study's lease");
          break;
        }
      }
      if (!r.ok()) return r.status();
    }
    return absl::OkStatus();
  }

  std::unique_ptr<PgConnection> conn_;
  const Durability durability_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StoreBackend>> OpenPostgresBackend(const std::string& uri,
                                                                  Durability durability) {
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Connect(uri);
  if (!conn.ok()) return conn.status();
  absl::StatusOr<int> version = MigratePostgres(**conn, "studies", kPostgresMigrations);
  if (!version.ok()) return version.status();
  if (absl::Status st = MigrateLeaseSchema(**conn); !st.ok()) return st;
  auto backend = std::make_unique<PostgresBackend>(*std::move(conn), durability);
  if (absl::Status st = backend->Prepare(); !st.ok()) return st;
  return backend;
}

}  // namespace evoscale::service::internal
