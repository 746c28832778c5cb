// The telemetry store on SQLite: a file of its own (WAL), locked for this process; the
// caller's ids are the rows' ids (one evoscaled writes the file).
#include <sqlite3.h>

#include <cmath>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/store/internal/database_lock.h"
#include "service/store/internal/sqlite.h"
#include "service/store/internal/telemetry_backend.h"
#include "service/store/telemetry_store.h"

namespace evoscale::service::internal {
namespace {

constexpr const char* kMigrations[] = {
    // 0 -> 1
    R"sql(
    CREATE TABLE workloads(
      id INTEGER PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      body BLOB NOT NULL);
    CREATE TABLE instances(
      id INTEGER PRIMARY KEY,
      workload_id INTEGER NOT NULL REFERENCES workloads(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      UNIQUE(workload_id, name));
    CREATE TABLE samples(
      instance_id INTEGER NOT NULL,
      resolution INTEGER NOT NULL,
      ts REAL NOT NULL,
      cpu REAL NOT NULL, mem REAL NOT NULL, gpu_util REAL NOT NULL, gpu_mem REAL NOT NULL,
      qps REAL NOT NULL, latency REAL NOT NULL, oom INTEGER NOT NULL,
      PRIMARY KEY(resolution, ts, instance_id)) WITHOUT ROWID;
    )sql",
    // 1 -> 2: an instance row is one container of an instance (TelemetrySample.container;
    // '' for the rows before, which named none). SQLite cannot change a UNIQUE constraint in
    // place, so the table is rebuilt; ids are kept (samples refer to them).
    R"sql(
    CREATE TABLE instances_v2(
      id INTEGER PRIMARY KEY,
      workload_id INTEGER NOT NULL REFERENCES workloads(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      container TEXT NOT NULL,
      UNIQUE(workload_id, name, container));
    INSERT INTO instances_v2(id, workload_id, name, container)
      SELECT id, workload_id, name, '' FROM instances;
    DROP TABLE instances;
    ALTER TABLE instances_v2 RENAME TO instances;
    )sql",
    // 2 -> 3: the container's CPU request as reported (TelemetrySample.cpu_request_cores; 0
    // for the samples before, which did not report it).
    R"sql(
    ALTER TABLE samples ADD COLUMN cpu_request REAL NOT NULL DEFAULT 0;
    )sql",
};
static_assert(std::size(kMigrations) == TelemetryStore::kSchemaVersion);

class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  absl::Status Begin() { return Exec(db_, "BEGIN IMMEDIATE"); }
  absl::Status Commit() {
    absl::Status st = Exec(db_, "COMMIT");
    if (st.ok()) done_ = true;
    return st;
  }
  ~Transaction() {
    if (!done_) Exec(db_, "ROLLBACK").IgnoreError();
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

class SqliteTelemetry : public TelemetryBackend {
 public:
  SqliteTelemetry(std::unique_ptr<DatabaseLock> lock, sqlite3* db)
      : lock_(std::move(lock)), db_(db) {}
  ~SqliteTelemetry() override {
    checkpointer_.reset();
    for (sqlite3_stmt* s : {put_workload_, put_instance_, put_sample_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  absl::Status Init() {
    // Samples arrive in time order and the key leads with time, so inserts append to the
    // rightmost pages; a larger page cache and fewer checkpoints keep those pages hot.
    // Checkpoints run on the Checkpointer's thread, not inside an ingest's commit.
    for (const char* pragma : {"PRAGMA cache_size=-65536", "PRAGMA wal_autocheckpoint=0",
                               "PRAGMA mmap_size=268435456"}) {
      if (absl::Status st = Exec(db_, pragma); !st.ok()) return st;
    }
    struct {
      sqlite3_stmt** stmt;
      const char* sql;
    } const statements[] = {
        {&put_workload_,
         "INSERT INTO workloads(id, name, body) VALUES(?1, ?2, ?3) "
         "ON CONFLICT(id) DO UPDATE SET body=?3"},
        {&put_instance_,
         "INSERT INTO instances(id, workload_id, name, container) VALUES(?1, ?2, ?3, ?4)"},
        {&put_sample_,
         "INSERT INTO samples(instance_id, resolution, ts, cpu, mem, gpu_util, gpu_mem, qps, "
         "latency, oom, cpu_request) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"},
    };
    for (const auto& [stmt, sql] : statements) {
      int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, nullptr);
      if (rc != SQLITE_OK) return SqliteError(db_, rc, absl::StrCat("prepare \"", sql, "\""));
    }
    return absl::OkStatus();
  }

  absl::Status StartCheckpointer(const std::string& path) {
    absl::StatusOr<std::unique_ptr<Checkpointer>> checkpointer =
        Checkpointer::Start(path, absl::Milliseconds(500));
    if (!checkpointer.ok()) return checkpointer.status();
    checkpointer_ = *std::move(checkpointer);
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> PutWorkload(int64_t id, const std::string& name,
                                      const std::string& body) override {
    sqlite3_bind_int64(put_workload_, 1, id);
    sqlite3_bind_text(put_workload_, 2, name.data(), name.size(), SQLITE_STATIC);
    sqlite3_bind_blob(put_workload_, 3, body.data(), body.size(), SQLITE_STATIC);
    if (absl::Status st = StepDone(db_, put_workload_, "put workload"); !st.ok()) return st;
    return id;
  }

  absl::StatusOr<std::vector<int64_t>> Append(absl::Span<const StoredInstance> new_instances,
                                              absl::Span<const TelemetryRow> rows) override {
    Transaction tx(db_);
    if (absl::Status st = tx.Begin(); !st.ok()) return st;
    for (const StoredInstance& in : new_instances) {
      sqlite3_bind_int64(put_instance_, 1, in.id);
      sqlite3_bind_int64(put_instance_, 2, in.workload_id);
      sqlite3_bind_text(put_instance_, 3, in.name.data(), in.name.size(), SQLITE_STATIC);
      sqlite3_bind_text(put_instance_, 4, in.container.data(), in.container.size(), SQLITE_STATIC);
      if (absl::Status st = StepDone(db_, put_instance_, "put instance"); !st.ok()) return st;
    }
    for (const TelemetryRow& r : rows) {
      sqlite3_bind_int64(put_sample_, 1, r.instance_id);
      sqlite3_bind_int(put_sample_, 2, r.resolution);
      sqlite3_bind_double(put_sample_, 3, r.timestamp);
      sqlite3_bind_double(put_sample_, 4, r.cpu_cores);
      sqlite3_bind_double(put_sample_, 5, r.memory_bytes);
      sqlite3_bind_double(put_sample_, 6, r.gpu_utilization);
      sqlite3_bind_double(put_sample_, 7, r.gpu_memory_bytes);
      sqlite3_bind_double(put_sample_, 8, r.qps);
      sqlite3_bind_double(put_sample_, 9, r.latency_ms);
      sqlite3_bind_int(put_sample_, 10, r.oom ? 1 : 0);
      sqlite3_bind_double(put_sample_, 11, r.cpu_request_cores);
      if (absl::Status st = StepDone(db_, put_sample_, "put sample"); !st.ok()) return st;
    }
    if (absl::Status st = tx.Commit(); !st.ok()) return st;
    std::vector<int64_t> ids;
    for (const StoredInstance& in : new_instances) ids.push_back(in.id);
    return ids;
  }

  absl::StatusOr<int64_t> Compact(const RetentionPolicy& policy, double now,
                                  absl::Span<const int64_t> drop_instances) override {
    const double raw_cutoff = now - policy.raw_retention_seconds;
    const double bucket_cutoff = now - policy.bucket_retention_seconds;
    Transaction tx(db_);
    if (absl::Status st = tx.Begin(); !st.ok()) return st;
    // Fold old raw samples into buckets; a bucket that exists already is merged (max of peaks,
    // the later mean wins for means: buckets are folded once their whole width is old).
    const std::string fold = absl::StrCat(
        "INSERT INTO samples(instance_id, resolution, ts, cpu, mem, gpu_util, gpu_mem, qps, "
        "latency, oom, cpu_request) SELECT instance_id, ",
        static_cast<int>(policy.bucket_seconds),
        ", CAST(ts / ?1 AS INTEGER) * ?1, avg(cpu), max(mem), avg(gpu_util), max(gpu_mem), "
        "avg(qps), avg(latency), max(oom), avg(cpu_request) FROM samples "
        "WHERE resolution = 0 AND ts < ?2 "
        "GROUP BY instance_id, CAST(ts / ?1 AS INTEGER) "
        "ON CONFLICT(resolution, ts, instance_id) DO UPDATE SET "
        "cpu = excluded.cpu, mem = max(mem, excluded.mem), gpu_util = excluded.gpu_util, "
        "gpu_mem = max(gpu_mem, excluded.gpu_mem), qps = excluded.qps, "
        "latency = excluded.latency, oom = max(oom, excluded.oom), "
        "cpu_request = excluded.cpu_request");
    int64_t removed = 0;
    auto run = [&](const std::string& sql, std::initializer_list<double> params) -> absl::Status {
      sqlite3_stmt* s = nullptr;
      int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr);
      if (rc != SQLITE_OK) return SqliteError(db_, rc, "compact");
      int i = 0;
      for (double p : params) sqlite3_bind_double(s, ++i, p);
      rc = sqlite3_step(s);
      sqlite3_finalize(s);
      if (rc != SQLITE_DONE) return SqliteError(db_, rc, "compact");
      return absl::OkStatus();
    };
    // Only whole buckets are folded: the raw cutoff is rounded down to a bucket boundary.
    const double aligned = std::floor(raw_cutoff / policy.bucket_seconds) * policy.bucket_seconds;
    if (absl::Status st = run(fold, {policy.bucket_seconds, aligned}); !st.ok()) return st;
    if (absl::Status st = run("DELETE FROM samples WHERE resolution = 0 AND ts < ?1", {aligned});
        !st.ok()) {
      return st;
    }
    removed += sqlite3_changes(db_);
    if (absl::Status st =
            run("DELETE FROM samples WHERE resolution > 0 AND ts < ?1", {bucket_cutoff});
        !st.ok()) {
      return st;
    }
    removed += sqlite3_changes(db_);
    if (!drop_instances.empty()) {
      sqlite3_stmt* drop = nullptr;
      int rc = sqlite3_prepare_v2(db_, "DELETE FROM instances WHERE id = ?1", -1, &drop, nullptr);
      if (rc != SQLITE_OK) return SqliteError(db_, rc, "compact");
      absl::Status st;
      for (int64_t id : drop_instances) {
        sqlite3_bind_int64(drop, 1, id);
        st = StepDone(db_, drop, "drop instance");
        if (!st.ok()) break;
      }
      sqlite3_finalize(drop);
      if (!st.ok()) return st;
    }
    if (absl::Status st = tx.Commit(); !st.ok()) return st;
    return removed;
  }

  absl::StatusOr<std::vector<WorkloadRecord>> LoadWorkloads() override {
    std::vector<WorkloadRecord> out;
    absl::Status st = ForEachRow(
        db_, "SELECT id, body FROM workloads ORDER BY id", "load workloads", [&](sqlite3_stmt* s) {
          out.push_back({.id = sqlite3_column_int64(s, 0), .body = ColumnBlob(s, 1)});
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<std::vector<StoredInstance>> LoadInstances() override {
    std::vector<StoredInstance> out;
    absl::Status st =
        ForEachRow(db_, "SELECT id, workload_id, name, container FROM instances ORDER BY id",
                   "load instances", [&](sqlite3_stmt* s) {
                     StoredInstance in;
                     in.id = sqlite3_column_int64(s, 0);
                     in.workload_id = sqlite3_column_int64(s, 1);
                     in.name = reinterpret_cast<const char*>(sqlite3_column_text(s, 2));
                     in.container = reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
                     out.push_back(std::move(in));
                     return absl::OkStatus();
                   });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status ScanSamples(const std::function<void(const TelemetryRow&)>& fn) override {
    return ForEachRow(
        db_,
        "SELECT instance_id, resolution, ts, cpu, mem, gpu_util, gpu_mem, qps, latency, oom, "
        "cpu_request FROM samples ORDER BY ts, instance_id",
        "scan samples", [&](sqlite3_stmt* s) {
          TelemetryRow r;
          r.instance_id = sqlite3_column_int64(s, 0);
          r.resolution = sqlite3_column_int(s, 1);
          r.timestamp = sqlite3_column_double(s, 2);
          r.cpu_cores = sqlite3_column_double(s, 3);
          r.memory_bytes = sqlite3_column_double(s, 4);
          r.gpu_utilization = sqlite3_column_double(s, 5);
          r.gpu_memory_bytes = sqlite3_column_double(s, 6);
          r.qps = sqlite3_column_double(s, 7);
          r.latency_ms = sqlite3_column_double(s, 8);
          r.oom = sqlite3_column_int(s, 9) != 0;
          r.cpu_request_cores = sqlite3_column_double(s, 10);
          fn(r);
          return absl::OkStatus();
        });
  }

  absl::StatusOr<int64_t> CountSamples() override {
    int64_t n = 0;
    absl::Status st =
        ForEachRow(db_, "SELECT count(*) FROM samples", "count samples", [&](sqlite3_stmt* s) {
          n = sqlite3_column_int64(s, 0);
          return absl::OkStatus();
        });
    if (!st.ok()) return st;
    return n;
  }

  int64_t checkpoint_failures() override {
    return checkpointer_ != nullptr ? checkpointer_->failures() : 0;
  }

 private:
  // Held from before the file is opened until after the destructor has closed it.
  const std::unique_ptr<DatabaseLock> lock_;
  std::unique_ptr<Checkpointer> checkpointer_;
  sqlite3* const db_;  // owned
  sqlite3_stmt* put_workload_ = nullptr;
  sqlite3_stmt* put_instance_ = nullptr;
  sqlite3_stmt* put_sample_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TelemetryBackend>> OpenSqliteTelemetry(const std::string& path,
                                                                      Durability durability,
                                                                      bool accept_damaged_wal) {
  absl::StatusOr<std::unique_ptr<DatabaseLock>> lock = DatabaseLock::Acquire(path);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<sqlite3*> db = OpenDatabase(path, durability, kMigrations, accept_damaged_wal);
  if (!db.ok()) return db.status();
  auto backend = std::make_unique<SqliteTelemetry>(*std::move(lock), *db);
  if (absl::Status st = backend->Init(); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("database \"", path, "\": ", st.message()));
  }
  if (absl::Status st = backend->StartCheckpointer(path); !st.ok()) return st;
  return backend;
}

}  // namespace evoscale::service::internal
