// Small helpers for the PostgreSQL stores (libpq): connecting from a URI with evoscale's
// defaults, statuses from results, binary columns, and schema migrations under an advisory
// lock.
#ifndef EVOSCALE_SERVICE_STORE_INTERNAL_POSTGRES_H_
#define EVOSCALE_SERVICE_STORE_INTERNAL_POSTGRES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

struct pg_conn;
struct pg_result;

namespace evoscale::service::internal {

// True for "postgresql://..." and "postgres://..." (libpq's URI schemes).
bool IsPostgresUri(absl::string_view database);

// The URI without its password (none is accepted anyway), for messages.
std::string RedactedUri(absl::string_view uri);

struct PgResultFree {
  void operator()(pg_result* r) const;
};
using PgResult = std::unique_ptr<pg_result, PgResultFree>;

// One connection. Not thread-safe.
class PgConnection {
 public:
  // Connects (5 s timeout unless the URI sets connect_timeout). INVALID_ARGUMENT for a URI
  // libpq cannot parse or one that holds a password (it would show in the process list: use
  // ~/.pgpass or PGPASSWORD); UNAVAILABLE when the server cannot be reached or refuses.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(const std::string& uri);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs SQL without parameters (several statements allowed); rows are not returned.
  absl::Status Exec(const char* sql, absl::string_view what);
  // Prepares `sql` as the statement `name`.
  absl::Status Prepare(const char* name, const char* sql, absl::string_view what);
  // Runs a prepared statement. Each parameter is text unless its `binary` flag is set (bytea).
  // `binary_results`: columns come back in binary form (int8 big-endian, bytea raw).
  absl::StatusOr<PgResult> Run(const char* name, absl::Span<const std::string> params,
                               absl::Span<const bool> binary, absl::string_view what,
                               bool binary_results = false);
  // One statement of a pipeline: a prepared statement's name and parameters, or, with no
  // name, `sql` without parameters.
  struct Statement {
    const char* name = nullptr;
    const char* sql = nullptr;
    std::vector<std::string> params;
    std::vector<bool> binary;  // per parameter: bytea sent raw
    const char* what = "";
  };
  // Sends every statement, then reads every result: one round trip. The first failure is
  // returned; the server skips the statements after it (so an explicit transaction among
  // them is left aborted for the caller to roll back).
  absl::Status Pipeline(const std::vector<Statement>& statements);
  // Runs a query without parameters, columns in binary form.
  absl::StatusOr<PgResult> Query(const char* sql, absl::string_view what);
  // Re-establishes a broken connection (after a server restart); prepared statements are
  // lost with it, so `prepare` runs again on the new one.
  bool broken() const;
  absl::Status Reset();

  const std::string& uri() const { return uri_; }

 private:
  PgConnection(pg_conn* conn, std::string uri) : conn_(conn), uri_(std::move(uri)) {}
  absl::Status Check(pg_result* r, absl::string_view what) const;

  pg_conn* conn_;
  const std::string uri_;
};

// Binary column readers.
int64_t PgInt64(pg_result* r, int row, int col);
double PgFloat8(pg_result* r, int row, int col);
std::string PgBytes(pg_result* r, int row, int col);
int PgRows(pg_result* r);

// Applies `migrations[v]` for each schema version v of `component` from the stored one up to
// migrations.size(), each in one transaction under an advisory lock (two replicas starting at
// once migrate once). A stored version above migrations.size() is FAILED_PRECONDITION naming
// both. Returns the version now stored.
absl::StatusOr<int> MigratePostgres(PgConnection& conn, absl::string_view component,
                                    absl::Span<const char* const> migrations);

// The SQLSTATE evoscale_fence() raises (lease_schema.cc); a statement failing with it is
// LeaseLostError (write_batch.h).
inline constexpr char kLeaseLostSqlstate[] = "EV001";

// Migrates the "leases" tables and functions (lease_schema.cc): replicas, study_leases,
// evoscale_fence() and evoscale_acquire(). Every PostgreSQL study store has them, one replica
// or several, so that a fenced write means the same everywhere.
absl::Status MigrateLeaseSchema(PgConnection& conn);

// The stored schema version of `component` (0: none yet).
absl::StatusOr<int> PostgresSchemaVersion(PgConnection& conn, absl::string_view component);

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STORE_INTERNAL_POSTGRES_H_
