// A throwaway PostgreSQL server for tests and benches, from Debian's binaries
// (/usr/lib/postgresql/VERSION/bin): a cluster copied from a template made once per machine by
// initdb (trust authentication, user "postgres"), in a temp folder of its own with its own
// socket folder, on a free loopback port, so that several run side by side (ctest -j). As
// root, the server runs as the postgres user (PostgreSQL refuses root); otherwise as this user.
//
// The server is this process's child and gets SIGQUIT (an immediate shutdown) if the test
// process dies (PR_SET_PDEATHSIG). Not thread-safe.
#ifndef EVOSCALE_TESTS_SUPPORT_POSTGRES_SERVER_H_
#define EVOSCALE_TESTS_SUPPORT_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace evoscale::testing {

struct PostgresOptions {
  // fsync off makes commits cheap where a test does not measure durability against power
  // loss (a crash of the server process still loses nothing committed).
  bool fsync = false;
  int max_connections = 100;
};

class PostgresServer {
 public:
  // Why no server can start here (PostgreSQL not installed; root without a postgres user),
  // or "" when one can.
  static std::string UnavailableReason();

  // Starts a server and waits until it accepts connections. FAILED_PRECONDITION with
  // UnavailableReason() where none can start; INTERNAL with the log's tail when a start fails.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(PostgresOptions options = {});
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  // postgresql://postgres@127.0.0.1:PORT/DATABASE
  std::string uri(const std::string& database = "postgres") const;
  // Creates a database and returns its URI.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);
  // Runs SQL (no rows returned) on `database` as the postgres superuser.
  absl::Status Exec(const std::string& database, const std::string& sql);

  // Stops the server: `immediate` is pg_ctl -m immediate (SIGQUIT: no checkpoint, recovery
  // from the WAL at the next start), else a fast shutdown (SIGINT). Then waits for it.
  absl::Status Stop(bool immediate);
  // Starts it again on the same port and data.
  absl::Status Restart();
  bool running() const { return pid_ > 0; }
  // The postmaster's pid (its backends are its children); -1 when stopped.
  pid_t pid() const { return pid_; }

  // The last lines of the server's log, for failure messages.
  std::string LogTail() const;

 private:
  PostgresServer() = default;
  absl::Status Launch();

  PostgresOptions options_;
  std::string bin_dir_, dir_, data_dir_, socket_dir_, log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_SUPPORT_POSTGRES_SERVER_H_
