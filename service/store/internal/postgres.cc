#include "service/store/internal/postgres.h"

#include <libpq-fe.h>

#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/write_batch.h"

namespace evoscale::service::internal {
namespace {

// What a caller can do about a failed statement, from its SQLSTATE class: the connection or
// the server going away (08, 57P0x) and serialisation conflicts (40) are UNAVAILABLE (retry);
// a full disk or too many connections (53) RESOURCE_EXHAUSTED; a read-only database (25006)
// or missing privileges (42501) FAILED_PRECONDITION; the rest (constraint violations, 23, among
// them) INTERNAL, as a bug of evoscale's would be.
absl::StatusCode CodeFor(const char* sqlstate, bool connection_bad) {
  if (connection_bad || sqlstate == nullptr) return absl::StatusCode::kUnavailable;
  const std::string s = sqlstate;
  if (absl::StartsWith(s, "08") || absl::StartsWith(s, "57P") || absl::StartsWith(s, "40")) {
    return absl::StatusCode::kUnavailable;
  }
  if (absl::StartsWith(s, "53")) return absl::StatusCode::kResourceExhausted;
  if (s == "25006" || s == "42501") return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kInternal;
}

std::string OneLine(const char* message) {
  std::string m = message != nullptr ? message : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  for (char& c : m) {
    if (c == '\n') c = ' ';
  }
  return m;
}

constexpr int64_t kMigrationLock = 0x65766f7363616c65;  // "evoscale"

}  // namespace

bool IsPostgresUri(absl::string_view database) {
  return absl::StartsWith(database, "postgresql://") || absl::StartsWith(database, "postgres://");
}

std::string RedactedUri(absl::string_view uri) {
  // scheme://user:password@host -> scheme://user@host
  const size_t scheme = uri.find("://");
  if (scheme == absl::string_view::npos) return std::string(uri);
  const size_t at = uri.find('@', scheme + 3);
  if (at == absl::string_view::npos) return std::string(uri);
  const size_t colon = uri.substr(0, at).find(':', scheme + 3);
  if (colon == absl::string_view::npos) return std::string(uri);
  return absl::StrCat(uri.substr(0, colon), uri.substr(at));
}

void PgResultFree::operator()(pg_result* r) const { PQclear(r); }

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(const std::string& uri) {
  const std::string shown = RedactedUri(uri);
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(uri.c_str(), &error);
  if (options == nullptr) {
    std::string why = error != nullptr ? OneLine(error) : "out of memory";
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("database \"", shown, "\": not a PostgreSQL URI (", why,
                     "); expected postgresql://USER@HOST:PORT/DATABASE"));
  }
  bool has_password = false;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr && *o->val != '\0') {
      has_password = true;
    }
  }
  PQconninfoFree(options);
  if (has_password) {
    return absl::InvalidArgumentError(
        absl::StrCat("database \"", shown,
                     "\": the URI holds a password, which would show in the process "
                     "list: remove it and put it in ~/.pgpass or PGPASSWORD"));
  }
  // Later keywords override earlier ones, so the URI's own settings win over these defaults.
  const char* const keywords[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* const values[] = {"5", "evoscaled", uri.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = OneLine(PQerrorMessage(conn));
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("database \"", shown, "\": cannot connect: ", why));
  }
  // The server's NOTICEs ("relation ... already exists, skipping") are not evoscaled's to
  // print: logs stay structured and quiet.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<PgConnection>(new PgConnection(conn, shown));
}

PgConnection::~PgConnection() { PQfinish(conn_); }

absl::Status PgConnection::Check(pg_result* r, absl::string_view what) const {
  const ExecStatusType status = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return absl::OkStatus();
  const bool bad = PQstatus(conn_) != CONNECTION_OK;
  const char* sqlstate = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = OneLine(r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
  if (message.empty()) message = OneLine(PQerrorMessage(conn_));
  if (absl::StartsWith(message, "ERROR:  ")) message.erase(0, 8);
  if (sqlstate != nullptr && std::strcmp(sqlstate, kLeaseLostSqlstate) == 0) {
    return LeaseLostError(absl::StrCat("postgresql: ", what, ": ", message));
  }
  return absl::Status(CodeFor(sqlstate, bad),
                      absl::StrCat("postgresql: ", what, ": ", message,
                                   sqlstate != nullptr ? absl::StrCat(" (SQLSTATE ", sqlstate, ")")
                                                       : std::string()));
}

absl::Status PgConnection::Exec(const char* sql, absl::string_view what) {
  PgResult r(PQexec(conn_, sql));
  return Check(r.get(), what);
}

absl::Status PgConnection::Prepare(const char* name, const char* sql, absl::string_view what) {
  PgResult r(PQprepare(conn_, name, sql, 0, nullptr));
  return Check(r.get(), what);
}

absl::StatusOr<PgResult> PgConnection::Run(const char* name, absl::Span<const std::string> params,
                                           absl::Span<const bool> binary, absl::string_view what,
                                           bool binary_results) {
  constexpr int kMaxParams = 16;
  const char* values[kMaxParams];
  int lengths[kMaxParams];
  int formats[kMaxParams];
  const int n = static_cast<int>(params.size());
  if (n > kMaxParams) return absl::InternalError(absl::StrCat(what, ": too many parameters"));
  for (int i = 0; i < n; ++i) {
    values[i] = params[i].data();
    lengths[i] = static_cast<int>(params[i].size());
    formats[i] = i < static_cast<int>(binary.size()) && binary[i] ? 1 : 0;
  }
  PgResult r(PQexecPrepared(conn_, name, n, values, lengths, formats, binary_results ? 1 : 0));
  if (absl::Status st = Check(r.get(), what); !st.ok()) return st;
  return r;
}

absl::Status PgConnection::Pipeline(const std::vector<Statement>& statements) {
  if (PQenterPipelineMode(conn_) != 1) {
    return absl::UnavailableError(
        absl::StrCat("postgresql: enter pipeline mode: ", OneLine(PQerrorMessage(conn_))));
  }
  absl::Status st;
  size_t sent = 0;
  for (const Statement& s : statements) {
    int ok = 0;
    if (s.name == nullptr) {
      ok = PQsendQueryParams(conn_, s.sql, 0, nullptr, nullptr, nullptr, nullptr, 0);
    } else {
      std::vector<const char*> values;
      std::vector<int> lengths, formats;
      for (size_t i = 0; i < s.params.size(); ++i) {
        values.push_back(s.params[i].data());
        lengths.push_back(static_cast<int>(s.params[i].size()));
        formats.push_back(i < s.binary.size() && s.binary[i] ? 1 : 0);
      }
      ok = PQsendQueryPrepared(conn_, s.name, static_cast<int>(values.size()), values.data(),
                               lengths.data(), formats.data(), 0);
    }
    if (ok != 1) {
      st = absl::UnavailableError(
          absl::StrCat("postgresql: ", s.what, ": ", OneLine(PQerrorMessage(conn_))));
      break;
    }
    ++sent;
  }
  if (PQpipelineSync(conn_) != 1 && st.ok()) {
    st = absl::UnavailableError(
        absl::StrCat("postgresql: pipeline sync: ", OneLine(PQerrorMessage(conn_))));
  }
  // Each statement's result, then a null; then the sync's.
  for (size_t i = 0; i < sent && !broken(); ++i) {
    PgResult r(PQgetResult(conn_));
    if (r == nullptr) break;
    if (st.ok() && PQresultStatus(r.get()) != PGRES_PIPELINE_ABORTED) {
      st = Check(r.get(), statements[i].what);
    }
    while (PgResult more{PQgetResult(conn_)}) {
    }
  }
  while (!broken()) {
    PgResult r(PQgetResult(conn_));
    if (r == nullptr || PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
  }
  if (PQexitPipelineMode(conn_) != 1 && st.ok()) {
    st = absl::UnavailableError(
        absl::StrCat("postgresql: exit pipeline mode: ", OneLine(PQerrorMessage(conn_))));
  }
  if (st.ok() && broken()) st = absl::UnavailableError("postgresql: the connection was lost");
  return st;
}

absl::StatusOr<PgResult> PgConnection::Query(const char* sql, absl::string_view what) {
  PgResult r(PQexecParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 1));
  if (absl::Status st = Check(r.get(), what); !st.ok()) return st;
  return r;
}

bool PgConnection::broken() const { return PQstatus(conn_) != CONNECTION_OK; }

absl::Status PgConnection::Reset() {
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrCat(
        "database \"", uri_, "\": cannot reconnect: ", OneLine(PQerrorMessage(conn_))));
  }
  return absl::OkStatus();
}

int64_t PgInt64(pg_result* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  if (PQgetlength(r, row, col) != 8) return 0;
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<int64_t>(v);
}

double PgFloat8(pg_result* r, int row, int col) {
  return std::bit_cast<double>(PgInt64(r, row, col));
}

std::string PgBytes(pg_result* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}

int PgRows(pg_result* r) { return PQntuples(r); }

absl::StatusOr<int> PostgresSchemaVersion(PgConnection& conn, absl::string_view component) {
  absl::StatusOr<PgResult> exists =
      conn.Query("SELECT to_regclass('evoscale_schema') IS NOT NULL", "read the schema version");
  if (!exists.ok()) return exists.status();
  if (PQgetlength(exists->get(), 0, 0) != 1 || PQgetvalue(exists->get(), 0, 0)[0] == 0) return 0;
  if (absl::Status st =
          conn.Prepare("evoscale_schema_version",
                       "SELECT version::int8 FROM evoscale_schema WHERE component = $1",
                       "read the schema version");
      !st.ok()) {
    return st;
  }
  absl::StatusOr<PgResult> r = conn.Run("evoscale_schema_version", {std::string(component)}, {},
                                        "read the schema version", /*binary_results=*/true);
  conn.Exec("DEALLOCATE evoscale_schema_version", "deallocate").IgnoreError();
  if (!r.ok()) return r.status();
  return PgRows(r->get()) == 0 ? 0 : static_cast<int>(PgInt64(r->get(), 0, 0));
}

absl::StatusOr<int> MigratePostgres(PgConnection& conn, absl::string_view component,
                                    absl::Span<const char* const> migrations) {
  const int latest = static_cast<int>(migrations.size());
  if (absl::Status st = conn.Exec("BEGIN", "begin the migration"); !st.ok()) return st;
  auto fail = [&](absl::Status st) {
    conn.Exec("ROLLBACK", "roll back the migration").IgnoreError();
    return st;
  };
  const std::string lock = absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrationLock, ")");
  if (absl::Status st = conn.Exec(lock.c_str(), "lock for the migration"); !st.ok())
    return fail(st);
  if (absl::Status st = conn.Exec("CREATE TABLE IF NOT EXISTS evoscale_schema("
                                  "component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
                                  "create the schema table");
      !st.ok()) {
    return fail(st);
  }
  absl::StatusOr<int> stored = PostgresSchemaVersion(conn, component);
  if (!stored.ok()) return fail(stored.status());
  if (*stored > latest) {
    return fail(absl::FailedPreconditionError(absl::StrFormat(
        "database \"%s\": schema version %d is newer than this binary's %d (the %s tables): "
        "run a newer evoscaled",
        conn.uri(), *stored, latest, component)));
  }
  for (int v = *stored; v < latest; ++v) {
    if (absl::Status st =
            conn.Exec(migrations[v], absl::StrCat("migrate ", component, " to ", v + 1));
        !st.ok()) {
      return fail(st);
    }
  }
  if (*stored < latest) {
    const std::string set = absl::StrFormat(
        "INSERT INTO evoscale_schema(component, version) VALUES('%s', %d) "
        "ON CONFLICT(component) DO UPDATE SET version = EXCLUDED.version",
        component, latest);
    if (absl::Status st = conn.Exec(set.c_str(), "record the schema version"); !st.ok()) {
      return fail(st);
    }
  }
  if (absl::Status st = conn.Exec("COMMIT", "commit the migration"); !st.ok()) return fail(st);
  return latest;
}

}  // namespace evoscale::service::internal
