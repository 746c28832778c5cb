// The telemetry store on PostgreSQL, shared by every evoscaled replica on the database: the
// same tables as on SQLite, with ids from the database (sequences; an instance found again by
// its natural key), and a serial `seq` per sample so that each replica reads what the others
// appended since it last looked.
//
// Appends (and workload puts) take a transaction-level advisory lock, so they commit one at a
// time across the replicas: then seq (and instance id, and workload version) order is commit
// order, and "everything above the last seq I read" misses nothing that commits later. The
// lock is held for one insert of the batch's rows; compaction does not take it (it writes only
// buckets, which ReadChanges leaves out, and deletes).
#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/store/internal/postgres.h"
#include "service/store/internal/telemetry_backend.h"

namespace evoscale::service::internal {
namespace {

constexpr const char* kTelemetryMigrations[] = {
    // 0 -> 1: SQLite's schema 3, with the database's ids and each sample's seq.
    R"sql(
    CREATE TABLE workloads(
      id BIGSERIAL PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      body BYTEA NOT NULL,
      version BIGINT NOT NULL);
    CREATE SEQUENCE workload_versions;
    CREATE TABLE instances(
      id BIGSERIAL PRIMARY KEY,
      workload_id BIGINT NOT NULL REFERENCES workloads(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      container TEXT NOT NULL,
      UNIQUE(workload_id, name, container));
    CREATE TABLE samples(
      instance_id BIGINT NOT NULL,
      resolution INTEGER NOT NULL,
      ts DOUBLE PRECISION NOT NULL,
      cpu DOUBLE PRECISION NOT NULL, mem DOUBLE PRECISION NOT NULL,
      gpu_util DOUBLE PRECISION NOT NULL, gpu_mem DOUBLE PRECISION NOT NULL,
      qps DOUBLE PRECISION NOT NULL, latency DOUBLE PRECISION NOT NULL,
      oom INTEGER NOT NULL,
      cpu_request DOUBLE PRECISION NOT NULL DEFAULT 0,
      seq BIGSERIAL NOT NULL,
      PRIMARY KEY(resolution, ts, instance_id));
    CREATE INDEX samples_by_seq ON samples(seq);
    )sql",
};
static_assert(std::size(kTelemetryMigrations) == kPostgresTelemetrySchemaVersion);

// Two-key advisory locks, a namespace apart from the leases' (1702260595, 1702260596).
constexpr int kTelemetryLockClass = 1702260597;
constexpr int kAppendLock = 0;  // transaction-level: appends and workload puts, one at a time
constexpr int kChoreLock = 1;   // session-level: the replica that compacts

// Samples one ReadChanges returns at most (TelemetryChanges::more).
constexpr int kMaxChangedRows = 50000;

// A float8 as PostgreSQL's text input reads it back exactly.
std::string Float8(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return absl::StrFormat("%.17g", v);
}

// Array literals ("{1,2}") for unnest().
template <typename T, typename F>
std::string ArrayOf(absl::Span<const T> items, F format) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += format(items[i]);
  }
  out += '}';
  return out;
}

std::string QuotedElement(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

// The columns of samples, as every query here reads them (after any leading columns).
constexpr const char* kSampleColumns =
    "instance_id, resolution::int8, ts, cpu, mem, gpu_util, gpu_mem, qps, latency, oom::int8, "
    "cpu_request";

TelemetryRow RowAt(pg_result* r, int row, int first) {
  TelemetryRow t;
  t.instance_id = PgInt64(r, row, first);
  t.resolution = static_cast<int32_t>(PgInt64(r, row, first + 1));
  t.timestamp = PgFloat8(r, row, first + 2);
  t.cpu_cores = PgFloat8(r, row, first + 3);
  t.memory_bytes = PgFloat8(r, row, first + 4);
  t.gpu_utilization = PgFloat8(r, row, first + 5);
  t.gpu_memory_bytes = PgFloat8(r, row, first + 6);
  t.qps = PgFloat8(r, row, first + 7);
  t.latency_ms = PgFloat8(r, row, first + 8);
  t.oom = PgInt64(r, row, first + 9) != 0;
  t.cpu_request_cores = PgFloat8(r, row, first + 10);
  return t;
}

int64_t RowsChanged(pg_result* r) {
  const char* n = PQcmdTuples(r);
  return n != nullptr && *n != '\0' ? std::stoll(n) : 0;
}

class PostgresTelemetry : public TelemetryBackend {
 public:
  PostgresTelemetry(std::unique_ptr<PgConnection> conn, Durability durability)
      : conn_(std::move(conn)), durability_(durability) {}
  // A store closed in order hands the chore lease on at once: the server would release it
  // with the session too, but only once the session's process has gone.
  ~PostgresTelemetry() override {
    if (!chore_leader_ || conn_->broken()) return;
    const std::string unlock =
        absl::StrCat("SELECT pg_advisory_unlock(", kTelemetryLockClass, ", ", kChoreLock, ")");
    conn_->Exec(unlock.c_str(), "let go of the chore lease").IgnoreError();
  }

  // Session settings and prepared statements; again after a reconnect.
  absl::Status Prepare() {
    const char* sync = durability_ == Durability::kPowerLoss ? "SET synchronous_commit = on"
                                                             : "SET synchronous_commit = off";
    if (absl::Status st = conn_->Exec(sync, "set synchronous_commit"); !st.ok()) return st;
    // An append holds the append lock of every replica until it commits: a replica that stops
    // inside one (SIGSTOP, a pause) would stall the others' ingest. The server ends such a
    // session (and so frees the lock) once it has idled in its transaction this long; this
    // store's own transactions send their statements back to back.
    if (absl::Status st = conn_->Exec("SET idle_in_transaction_session_timeout = '10s'",
                                      "set idle_in_transaction_session_timeout");
        !st.ok()) {
      return st;
    }
    const std::string append_lock =
        absl::StrCat("SELECT pg_advisory_xact_lock(", kTelemetryLockClass, ", ", kAppendLock, ")");
    const std::string chore_lock =
        absl::StrCat("SELECT pg_try_advisory_lock(", kTelemetryLockClass, ", ", kChoreLock, ")");
    const std::string chore_held = absl::StrCat(
        "SELECT EXISTS(SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = ",
        kTelemetryLockClass, " AND objid = ", kChoreLock,
        " AND objsubid = 2 AND pid = pg_backend_pid() AND granted)");
    const std::string scan_changes = absl::StrCat(
        "SELECT seq, ", kSampleColumns,
        " FROM samples WHERE seq > $1 AND resolution = 0 ORDER BY seq LIMIT ", kMaxChangedRows);
    const struct {
      const char* name;
      const char* sql;
    } statements[] = {
        {"tm_append_lock", append_lock.c_str()},
        {"tm_chore_lock", chore_lock.c_str()},
        {"tm_chore_held", chore_held.c_str()},
        {"tm_put_workload",
         "INSERT INTO workloads(name, body, version) "
         "VALUES($1, $2, nextval('workload_versions')) ON CONFLICT(name) DO UPDATE SET "
         "body = EXCLUDED.body, version = EXCLUDED.version RETURNING id"},
        // A DO UPDATE that changes nothing, so that RETURNING answers the existing row too.
        {"tm_put_instances",
         "INSERT INTO instances(workload_id, name, container) "
         "SELECT w, n, c FROM unnest($1::int8[], $2::text[], $3::text[]) "
         "WITH ORDINALITY AS u(w, n, c, o) ORDER BY o "
         "ON CONFLICT(workload_id, name, container) DO UPDATE SET name = EXCLUDED.name "
         "RETURNING id, workload_id, name, container"},
        {"tm_put_samples",
         "INSERT INTO samples(instance_id, resolution, ts, cpu, mem, gpu_util, gpu_mem, qps, "
         "latency, oom, cpu_request) "
         "SELECT i, r, t, c, m, gu, gm, q, l, oo, cr FROM unnest($1::int8[], $2::int4[], "
         "$3::float8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $8::float8[], "
         "$9::float8[], $10::int4[], $11::float8[]) "
         "WITH ORDINALITY AS u(i, r, t, c, m, gu, gm, q, l, oo, cr, o) ORDER BY o"},
        {"tm_workload_changes",
         "SELECT id, body, version FROM workloads WHERE version > $1 ORDER BY version"},
        {"tm_instance_changes",
         "SELECT id, workload_id, name, container FROM instances WHERE id > $1 ORDER BY id"},
        {"tm_sample_changes", scan_changes.c_str()},
    };
    for (const auto& [name, sql] : statements) {
      if (absl::Status st = conn_->Prepare(name, sql, absl::StrCat("prepare ", name)); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> PutWorkload(int64_t /*id*/, const std::string& name,
                                      const std::string& body) override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    if (absl::Status st = Begin(); !st.ok()) return st;
    const std::string params[] = {name, body};
    static constexpr bool kBinary[] = {false, true};
    absl::StatusOr<PgResult> r = conn_->Run("tm_put_workload", params, kBinary, "put workload",
                                            /*binary_results=*/true);
    if (!r.ok()) return Rollback(r.status());
    const int64_t id = PgInt64(r->get(), 0, 0);
    if (absl::Status st = conn_->Exec("COMMIT", "commit"); !st.ok()) return Rollback(st);
    return id;
  }

  absl::StatusOr<std::vector<int64_t>> Append(absl::Span<const StoredInstance> new_instances,
                                              absl::Span<const TelemetryRow> rows) override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    if (absl::Status st = Begin(); !st.ok()) return st;
    std::vector<int64_t> ids(new_instances.size());
    // The caller's id of each new instance -> the database's.
    absl::flat_hash_map<int64_t, int64_t> stored_id;
    if (!new_instances.empty()) {
      const std::string params[] = {
          ArrayOf(new_instances,
                  [](const StoredInstance& in) { return absl::StrCat(in.workload_id); }),
          ArrayOf(new_instances, [](const StoredInstance& in) { return QuotedElement(in.name); }),
          ArrayOf(new_instances,
                  [](const StoredInstance& in) { return QuotedElement(in.container); }),
      };
      absl::StatusOr<PgResult> r = conn_->Run("tm_put_instances", params, {}, "put instances",
                                              /*binary_results=*/true);
      if (!r.ok()) return Rollback(r.status());
      // RETURNING's order is not promised: match the rows by their natural key.
      absl::flat_hash_map<std::tuple<int64_t, std::string, std::string>, int64_t> by_key;
      for (int i = 0; i < PgRows(r->get()); ++i) {
        by_key[{PgInt64(r->get(), i, 1), PgBytes(r->get(), i, 2), PgBytes(r->get(), i, 3)}] =
            PgInt64(r->get(), i, 0);
      }
      for (size_t i = 0; i < new_instances.size(); ++i) {
        const StoredInstance& in = new_instances[i];
        auto it = by_key.find(std::make_tuple(in.workload_id, in.name, in.container));
        if (it == by_key.end()) {
          return Rollback(absl::InternalError(absl::StrCat("put instances: instance \"", in.name,
                                                           "\" was not stored (named twice?)")));
        }
        ids[i] = it->second;
        stored_id[in.id] = it->second;
      }
    }
    if (!rows.empty()) {
      auto id_of = [&](const TelemetryRow& r) {
        auto it = stored_id.find(r.instance_id);
        return absl::StrCat(it != stored_id.end() ? it->second : r.instance_id);
      };
      auto f8 = [](auto field) {
        return [field](const TelemetryRow& r) { return Float8(r.*field); };
      };
      const std::string params[] = {
          ArrayOf(rows, id_of),
          ArrayOf(rows, [](const TelemetryRow& r) { return absl::StrCat(r.resolution); }),
          ArrayOf(rows, f8(&TelemetryRow::timestamp)),
          ArrayOf(rows, f8(&TelemetryRow::cpu_cores)),
          ArrayOf(rows, f8(&TelemetryRow::memory_bytes)),
          ArrayOf(rows, f8(&TelemetryRow::gpu_utilization)),
          ArrayOf(rows, f8(&TelemetryRow::gpu_memory_bytes)),
          ArrayOf(rows, f8(&TelemetryRow::qps)),
          ArrayOf(rows, f8(&TelemetryRow::latency_ms)),
          ArrayOf(rows, [](const TelemetryRow& r) { return std::string(r.oom ? "1" : "0"); }),
          ArrayOf(rows, f8(&TelemetryRow::cpu_request_cores)),
      };
      if (absl::StatusOr<PgResult> r = conn_->Run("tm_put_samples", params, {}, "put samples");
          !r.ok()) {
        return Rollback(r.status());
      }
    }
    if (absl::Status st = conn_->Exec("COMMIT", "commit"); !st.ok()) return Rollback(st);
    return ids;
  }

  absl::StatusOr<int64_t> Compact(const RetentionPolicy& policy, double now,
                                  absl::Span<const int64_t> drop_instances) override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    const double raw_cutoff = now - policy.raw_retention_seconds;
    const double bucket_cutoff = now - policy.bucket_retention_seconds;
    // Only whole buckets are folded: the raw cutoff is rounded down to a bucket boundary.
    const double aligned = std::floor(raw_cutoff / policy.bucket_seconds) * policy.bucket_seconds;
    const std::string width = Float8(policy.bucket_seconds);
    // As on SQLite: a bucket that exists already is merged (max of peaks, the later mean wins
    // for means); trunc() is SQLite's CAST(... AS INTEGER).
    const std::string fold = absl::StrCat(
        "INSERT INTO samples(instance_id, resolution, ts, cpu, mem, gpu_util, gpu_mem, qps, "
        "latency, oom, cpu_request) SELECT instance_id, ",
        static_cast<int>(policy.bucket_seconds), ", trunc(ts / ", width, ") * ", width,
        ", avg(cpu), max(mem), avg(gpu_util), max(gpu_mem), avg(qps), avg(latency), max(oom), "
        "avg(cpu_request) FROM samples WHERE resolution = 0 AND ts < ",
        Float8(aligned), " GROUP BY instance_id, trunc(ts / ", width,
        ") ON CONFLICT(resolution, ts, instance_id) DO UPDATE SET "
        "cpu = EXCLUDED.cpu, mem = GREATEST(samples.mem, EXCLUDED.mem), "
        "gpu_util = EXCLUDED.gpu_util, gpu_mem = GREATEST(samples.gpu_mem, EXCLUDED.gpu_mem), "
        "qps = EXCLUDED.qps, latency = EXCLUDED.latency, "
        "oom = GREATEST(samples.oom, EXCLUDED.oom), cpu_request = EXCLUDED.cpu_request");
    const std::string delete_raw =
        absl::StrCat("DELETE FROM samples WHERE resolution = 0 AND ts < ", Float8(aligned));
    const std::string delete_buckets =
        absl::StrCat("DELETE FROM samples WHERE resolution > 0 AND ts < ", Float8(bucket_cutoff));
    if (absl::Status st = conn_->Exec("BEGIN", "begin"); !st.ok()) return st;
    int64_t removed = 0;
    for (const std::string* sql : {&fold, &delete_raw, &delete_buckets}) {
      absl::StatusOr<PgResult> r = conn_->Query(sql->c_str(), "compact");
      if (!r.ok()) return Rollback(r.status());
      if (sql != &fold) removed += RowsChanged(r->get());
    }
    if (!drop_instances.empty()) {
      const std::string drop = absl::StrCat("DELETE FROM instances WHERE id IN (",
                                            absl::StrJoin(drop_instances, ","), ")");
      if (absl::Status st = conn_->Exec(drop.c_str(), "drop instances"); !st.ok()) {
        return Rollback(st);
      }
    }
    if (absl::Status st = conn_->Exec("COMMIT", "commit"); !st.ok()) return Rollback(st);
    return removed;
  }

  absl::StatusOr<std::vector<WorkloadRecord>> LoadWorkloads() override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    absl::StatusOr<PgResult> r =
        conn_->Query("SELECT id, body, version FROM workloads ORDER BY id", "load workloads");
    if (!r.ok()) return r.status();
    std::vector<WorkloadRecord> out;
    for (int i = 0; i < PgRows(r->get()); ++i) {
      out.push_back({.id = PgInt64(r->get(), i, 0), .body = PgBytes(r->get(), i, 1)});
      workload_cursor_ = std::max(workload_cursor_, PgInt64(r->get(), i, 2));
    }
    return out;
  }

  absl::StatusOr<std::vector<StoredInstance>> LoadInstances() override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    // Read before the instances: every sample up to it belongs to an instance read below (an
    // instance commits with, or before, its first samples).
    absl::StatusOr<PgResult> seq =
        conn_->Query("SELECT coalesce(max(seq), 0)::int8 FROM samples", "load instances");
    if (!seq.ok()) return seq.status();
    const int64_t sample_cursor = PgInt64(seq->get(), 0, 0);
    absl::StatusOr<PgResult> r = conn_->Query(
        "SELECT id, workload_id, name, container FROM instances ORDER BY id", "load instances");
    if (!r.ok()) return r.status();
    std::vector<StoredInstance> out = Instances(r->get());
    sample_cursor_ = std::max(sample_cursor_, sample_cursor);
    return out;
  }

  absl::Status ScanSamples(const std::function<void(const TelemetryRow&)>& fn) override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    // A cursor, so that a large table is not held in memory at once.
    if (absl::Status st = conn_->Exec("BEGIN", "begin"); !st.ok()) return st;
    const std::string declare =
        absl::StrCat("DECLARE scan BINARY NO SCROLL CURSOR FOR SELECT ", kSampleColumns,
                     " FROM samples ORDER BY ts, "
                     "instance_id");
    if (absl::Status st = conn_->Exec(declare.c_str(), "scan samples"); !st.ok()) {
      return Rollback(st);
    }
    for (;;) {
      absl::StatusOr<PgResult> r = conn_->Query("FETCH 10000 FROM scan", "scan samples");
      if (!r.ok()) return Rollback(r.status());
      const int n = PgRows(r->get());
      for (int i = 0; i < n; ++i) fn(RowAt(r->get(), i, 0));
      if (n == 0) break;
    }
    return conn_->Exec("COMMIT", "commit");
  }

  absl::StatusOr<int64_t> CountSamples() override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    absl::StatusOr<PgResult> r = conn_->Query("SELECT count(*) FROM samples", "count samples");
    if (!r.ok()) return r.status();
    return PgInt64(r->get(), 0, 0);
  }

  bool shared() const override { return true; }

  absl::StatusOr<bool> TakeChoreLease() override {
    // The holder asks the server each time: a session the server ended (the database
    // restarted, or an administrator ended it) took the lease with it, and another replica
    // may hold it now.
    if (chore_leader_ && !conn_->broken()) {
      absl::StatusOr<PgResult> r = conn_->Run("tm_chore_held", {}, {}, "check the chore lease",
                                              /*binary_results=*/true);
      if (r.ok()) {
        chore_leader_ = PQgetlength(r->get(), 0, 0) == 1 && PQgetvalue(r->get(), 0, 0)[0] != 0;
        if (chore_leader_) return true;
      } else if (!conn_->broken()) {
        return r.status();
      }
    }
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    absl::StatusOr<PgResult> r = conn_->Run("tm_chore_lock", {}, {}, "take the chore lease",
                                            /*binary_results=*/true);
    if (!r.ok()) return r.status();
    chore_leader_ = PQgetlength(r->get(), 0, 0) == 1 && PQgetvalue(r->get(), 0, 0)[0] != 0;
    return chore_leader_;
  }

  absl::StatusOr<TelemetryRecords> ReadChanges() override {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    TelemetryRecords out;
    // Samples first, then instances, then workloads: each row read refers only to rows that
    // committed before it, so the later reads see them.
    const std::string after_sample[] = {absl::StrCat(sample_cursor_)};
    absl::StatusOr<PgResult> samples = conn_->Run("tm_sample_changes", after_sample, {},
                                                  "read new samples", /*binary_results=*/true);
    if (!samples.ok()) return samples.status();
    int64_t sample_cursor = sample_cursor_;
    for (int i = 0; i < PgRows(samples->get()); ++i) {
      sample_cursor = std::max(sample_cursor, PgInt64(samples->get(), i, 0));
      out.rows.push_back(RowAt(samples->get(), i, 1));
    }
    const std::string after_instance[] = {absl::StrCat(instance_cursor_)};
    absl::StatusOr<PgResult> instances = conn_->Run("tm_instance_changes", after_instance, {},
                                                    "read new instances", /*binary_results=*/true);
    if (!instances.ok()) return instances.status();
    const std::string after_workload[] = {absl::StrCat(workload_cursor_)};
    absl::StatusOr<PgResult> workloads = conn_->Run("tm_workload_changes", after_workload, {},
                                                    "read new workloads", /*binary_results=*/true);
    if (!workloads.ok()) return workloads.status();
    int64_t workload_cursor = workload_cursor_;
    for (int i = 0; i < PgRows(workloads->get()); ++i) {
      out.workloads.push_back(
          {.id = PgInt64(workloads->get(), i, 0), .body = PgBytes(workloads->get(), i, 1)});
      workload_cursor = std::max(workload_cursor, PgInt64(workloads->get(), i, 2));
    }
    out.instances = Instances(instances->get());
    out.more = PgRows(samples->get()) == kMaxChangedRows;
    // Only once every read succeeded: a failed one is read again next time.
    sample_cursor_ = sample_cursor;
    workload_cursor_ = workload_cursor;
    return out;
  }

 private:
  // BEGIN and the append lock: until COMMIT, no other replica appends.
  absl::Status Begin() {
    if (absl::Status st = conn_->Exec("BEGIN", "begin"); !st.ok()) return st;
    if (absl::StatusOr<PgResult> r = conn_->Run("tm_append_lock", {}, {}, "lock for the append");
        !r.ok()) {
      return Rollback(r.status());
    }
    return absl::OkStatus();
  }

  absl::Status Rollback(absl::Status st) {
    if (!conn_->broken()) conn_->Exec("ROLLBACK", "rollback").IgnoreError();
    return st;
  }

  // Instance rows (id, workload_id, name, container); moves instance_cursor_ past them.
  std::vector<StoredInstance> Instances(pg_result* r) {
    std::vector<StoredInstance> out;
    for (int i = 0; i < PgRows(r); ++i) {
      out.push_back({.id = PgInt64(r, i, 0),
                     .workload_id = PgInt64(r, i, 1),
                     .name = PgBytes(r, i, 2),
                     .container = PgBytes(r, i, 3)});
      instance_cursor_ = std::max(instance_cursor_, out.back().id);
    }
    return out;
  }

  // After the server went away: a new connection, prepared again; the chore lease went with
  // the old session.
  absl::Status EnsureConnected() {
    if (!conn_->broken()) return absl::OkStatus();
    chore_leader_ = false;
    if (absl::Status st = conn_->Reset(); !st.ok()) return st;
    return Prepare();
  }

  std::unique_ptr<PgConnection> conn_;
  const Durability durability_;
  bool chore_leader_ = false;  // this session holds kChoreLock
  // What ReadChanges has seen: the largest sample seq, instance id and workload version.
  int64_t sample_cursor_ = 0;
  int64_t instance_cursor_ = 0;
  int64_t workload_cursor_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TelemetryBackend>> OpenPostgresTelemetry(const std::string& uri,
                                                                        Durability durability) {
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Connect(uri);
  if (!conn.ok()) return conn.status();
  absl::StatusOr<int> version = MigratePostgres(**conn, "telemetry", kTelemetryMigrations);
  if (!version.ok()) return version.status();
  auto backend = std::make_unique<PostgresTelemetry>(*std::move(conn), durability);
  if (absl::Status st = backend->Prepare(); !st.ok()) return st;
  return backend;
}

}  // namespace evoscale::service::internal
