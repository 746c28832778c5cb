#include "trainer_adapter/internal/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace evoscale::trainer_adapter::internal {

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

ExecStrings::ExecStrings(const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env)
    : arg_strings(args) {
  for (const auto& [k, v] : env) env_strings.push_back(absl::StrCat(k, "=", v));
  for (std::string& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env,
                                         absl::Duration timeout) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("argv: empty");
  std::map<std::string, std::string> merged = ProcessEnvironment();
  for (const auto& [k, v] : env) merged[k] = v;
  const ExecStrings exec(argv, merged);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError("pipe");
  }
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execvpe(exec.argv[0], exec.argv.data(), exec.envp.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);

  CommandResult result;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    const int ready = poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        "\"", absl::StrJoin(argv, " "), "\" ran longer than ", absl::FormatDuration(timeout)));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code == 127 && result.out.empty() && result.err.empty()) {
      return absl::NotFoundError(absl::StrCat("\"", argv[0], "\": cannot be run (not in PATH?)"));
    }
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

std::string DescribeFailure(const std::vector<std::string>& argv, const CommandResult& result) {
  std::string text = absl::StrCat(absl::StrJoin(argv, " "), " (");
  if (result.signal != 0) {
    absl::StrAppend(&text, "signal ", result.signal, ")");
  } else {
    absl::StrAppend(&text, "exit ", result.exit_code, ")");
  }
  absl::string_view err = absl::StripAsciiWhitespace(result.err);
  if (!err.empty()) absl::StrAppend(&text, ": ", err);
  return text;
}

}  // namespace evoscale::trainer_adapter::internal
