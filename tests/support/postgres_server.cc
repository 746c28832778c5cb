#include "tests/support/postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "trainer_adapter/internal/command.h"

namespace evoscale::testing {
namespace {

namespace fs = std::filesystem;
using trainer_adapter::internal::CommandResult;
using trainer_adapter::internal::DescribeFailure;
using trainer_adapter::internal::RunCommand;

// The newest /usr/lib/postgresql/VERSION/bin that has initdb and postgres; "" if none.
std::string FindBinDir() {
  std::error_code ec;
  std::vector<std::pair<int, std::string>> found;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = entry.path() / "bin";
    if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) continue;
    found.emplace_back(std::atoi(entry.path().filename().c_str()), bin.string());
  }
  if (found.empty()) return "";
  return std::max_element(found.begin(), found.end())->second;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// argv run as the server's user: through runuser when that is not this process's.
std::vector<std::string> AsServerUser(uid_t uid, std::vector<std::string> argv) {
  if (uid == geteuid()) return argv;
  std::vector<std::string> out = {fs::exists("/usr/sbin/runuser") ? "/usr/sbin/runuser" : "runuser",
                                  "-u", "postgres", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

absl::Status Chown(const std::string& path, uid_t uid, gid_t gid) {
  if (uid == geteuid()) return absl::OkStatus();
  absl::StatusOr<CommandResult> r = RunCommand({"chown", "-R", absl::StrCat(uid, ":", gid), path});
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::InternalError(r->err);
  return absl::OkStatus();
}

// The template cluster, made once per machine and PostgreSQL version under a lock.
absl::StatusOr<std::string> TemplateDir(const std::string& bin_dir, uid_t uid, gid_t gid) {
  const std::string version = fs::path(bin_dir).parent_path().filename().string();
  const std::string root = absl::StrCat(fs::temp_directory_path().string(),
                                        "/evoscale-pg-template-", version, "-", geteuid());
  const std::string lock_path = root + ".lock";
  const int lock = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0) return absl::InternalError(absl::StrCat("open ", lock_path));
  flock(lock, LOCK_EX);
  absl::Status st;
  if (!fs::exists(root + "/PG_VERSION")) {
    const std::string scratch = root + ".new";
    std::error_code ec;
    fs::remove_all(scratch, ec);
    fs::create_directories(scratch, ec);
    chmod(scratch.c_str(), 0700);
    st = Chown(scratch, uid, gid);
    if (st.ok()) {
      const std::vector<std::string> argv =
          AsServerUser(uid, {bin_dir + "/initdb", "-D", scratch, "-U", "postgres", "-A", "trust",
                             "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"});
      absl::StatusOr<CommandResult> r = RunCommand(argv, {}, absl::Seconds(120));
      if (!r.ok()) {
        st = r.status();
      } else if (r->exit_code != 0) {
        st = absl::InternalError(DescribeFailure(argv, *r));
      } else {
        fs::remove_all(root, ec);
        fs::rename(scratch, root, ec);
        if (ec) st = absl::InternalError(absl::StrCat("rename ", scratch, ": ", ec.message()));
      }
    }
  }
  flock(lock, LOCK_UN);
  close(lock);
  if (!st.ok()) return st;
  return root;
}

}  // namespace

std::string PostgresServer::UnavailableReason() {
  if (FindBinDir().empty()) {
    return "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres; "
           "apt-get install postgresql-15)";
  }
  if (geteuid() == 0 && getpwnam("postgres") == nullptr) {
    return "running as root, and there is no postgres user to run the server as";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(PostgresOptions options) {
  if (std::string why = UnavailableReason(); !why.empty()) {
    return absl::FailedPreconditionError(why);
  }
  std::unique_ptr<PostgresServer> s(new PostgresServer());
  s->options_ = options;
  s->bin_dir_ = FindBinDir();
  s->uid_ = geteuid();
  s->gid_ = getegid();
  if (geteuid() == 0) {
    const passwd* pw = getpwnam("postgres");
    s->uid_ = pw->pw_uid;
    s->gid_ = pw->pw_gid;
  }
  absl::StatusOr<std::string> tmpl = TemplateDir(s->bin_dir_, s->uid_, s->gid_);
  if (!tmpl.ok()) return tmpl.status();
  std::string dir = fs::temp_directory_path().string() + "/evoscale-pg-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return absl::InternalError("mkdtemp");
  chmod(dir.c_str(), 0755);  // the server's user walks through it
  s->dir_ = dir;
  s->data_dir_ = dir + "/data";
  s->socket_dir_ = dir + "/sock";
  s->log_path_ = dir + "/postgres.log";
  absl::StatusOr<CommandResult> copied = RunCommand({"cp", "-a", *tmpl, s->data_dir_});
  if (!copied.ok()) return copied.status();
  if (copied->exit_code != 0) return absl::InternalError(copied->err);
  fs::create_directories(s->socket_dir_);
  std::ofstream(s->log_path_).flush();
  if (absl::Status st = Chown(dir, s->uid_, s->gid_); !st.ok()) return st;
  absl::Status st;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s->port_ = FreePort();
    st = s->Launch();
    if (st.ok()) return s;
  }
  return st;
}

absl::Status PostgresServer::Launch() {
  const std::vector<std::string> argv = {bin_dir_ + "/postgres",
                                         "-D",
                                         data_dir_,
                                         "-p",
                                         absl::StrCat(port_),
                                         "-k",
                                         socket_dir_,
                                         "-c",
                                         "listen_addresses=127.0.0.1",
                                         "-c",
                                         absl::StrCat("fsync=", options_.fsync ? "on" : "off"),
                                         "-c",
                                         absl::StrCat("max_connections=", options_.max_connections),
                                         "-c",
                                         "shared_buffers=32MB",
                                         "-c",
                                         "logging_collector=off"};
  std::vector<char*> args;  // built before fork: the child only calls async-signal-safe code
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork");
  if (pid == 0) {
    const int log = open(log_path_.c_str(), O_WRONLY | O_APPEND);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    if (uid_ != geteuid()) {
      if (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0) _exit(126);
    }
    // After the credential change, which clears it: a crashed test leaves no server behind.
    prctl(PR_SET_PDEATHSIG, SIGQUIT);
    execv(args[0], args.data());
    _exit(127);
  }
  pid_ = pid;
  const std::string conninfo = absl::StrCat("host=127.0.0.1 port=", port_,
                                            " user=postgres dbname=postgres connect_timeout=2");
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("postgres exited at start: ", LogTail()));
    }
    if (PQping(conninfo.c_str()) == PQPING_OK) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  Stop(/*immediate=*/true).IgnoreError();
  return absl::DeadlineExceededError(absl::StrCat("postgres did not start in 60 s: ", LogTail()));
}

PostgresServer::~PostgresServer() {
  Stop(/*immediate=*/true).IgnoreError();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

std::string PostgresServer::uri(const std::string& database) const {
  return absl::StrCat("postgresql://postgres@127.0.0.1:", port_, "/", database);
}

absl::Status PostgresServer::Exec(const std::string& database, const std::string& sql) {
  PGconn* conn = PQconnectdb(uri(database).c_str());
  absl::Status st;
  if (PQstatus(conn) != CONNECTION_OK) {
    st = absl::UnavailableError(PQerrorMessage(conn));
  } else {
    PGresult* r = PQexec(conn, sql.c_str());
    const ExecStatusType rs = PQresultStatus(r);
    if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
      st = absl::InternalError(absl::StrCat(sql, ": ", PQresultErrorMessage(r)));
    }
    PQclear(r);
  }
  PQfinish(conn);
  return st;
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase(const std::string& name) {
  if (absl::Status st = Exec("postgres", absl::StrCat("CREATE DATABASE \"", name, "\""));
      !st.ok()) {
    return st;
  }
  return uri(name);
}

absl::Status PostgresServer::Stop(bool immediate) {
  if (pid_ <= 0) return absl::OkStatus();
  kill(pid_, immediate ? SIGQUIT : SIGINT);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status PostgresServer::Restart() {
  if (pid_ > 0) return absl::FailedPreconditionError("the server is running");
  return Launch();
}

std::string PostgresServer::LogTail() const {
  std::ifstream in(log_path_);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const size_t from = lines.size() > 20 ? lines.size() - 20 : 0;
  return absl::StrJoin(lines.begin() + from, lines.end(), "\n");
}

}  // namespace evoscale::testing
