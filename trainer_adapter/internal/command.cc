#include "trainer_adapter/internal/command.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace evoscale::trainer_adapter::internal {
namespace {

// Reads the child's stdout and stderr into `result` until both are at their end or poll fails
// (true), or until `deadline` (false). Closes both pipes: a child still writing then gets
// SIGPIPE rather than blocking on a full pipe that nobody reads.
bool ReadOutputUntil(absl::Time deadline, Child* child, CommandResult* result) {
  ScopedFd* pipes[2] = {&child->stdout_pipe(), &child->stderr_pipe()};
  std::string* sinks[2] = {&result->out, &result->err};
  pollfd fds[2] = {{pipes[0]->get(), POLLIN, 0}, {pipes[1]->get(), POLLIN, 0}};
  bool finished = true;
  int open_fds = 2;
  while (open_fds > 0) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      finished = false;
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
        pipes[i]->reset();
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (ScopedFd* pipe : pipes) pipe->reset();
  return finished;
}

}  // namespace

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env,
                                         absl::Duration timeout) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("argv: empty");
  SpawnOptions options;
  options.argv = argv;
  options.env = ProcessEnvironment();
  for (const auto& [k, v] : env) options.env[k] = v;
  options.stdout_source = StdioSource::Pipe();
  options.stderr_source = StdioSource::Pipe();
  const std::string cannot_run = absl::StrCat("\"", argv[0], "\": cannot be run (not in PATH?)");
  absl::StatusOr<Child> child = Spawn(options);
  if (absl::IsNotFound(child.status()) || absl::IsFailedPrecondition(child.status())) {
    return absl::NotFoundError(cannot_run);  // not found, not executable, or exec refused it
  }
  if (!child.ok()) return child.status();

  CommandResult result;
  const bool finished = ReadOutputUntil(absl::Now() + timeout, &*child, &result);
  if (!finished) child->Signal(SIGKILL);
  const ChildExit exit = child->Wait();
  if (!finished) {
    return absl::DeadlineExceededError(absl::StrCat(
        "\"", absl::StrJoin(argv, " "), "\" ran longer than ", absl::FormatDuration(timeout)));
  }
  result.exit_code = exit.exit_code;
  result.signal = exit.signal;
  // A shell's code for a command it could not run, printed by nothing: what the program's own
  // exec failure used to look like before Spawn reported it, kept for a wrapper that exits so.
  if (result.exit_code == 127 && result.out.empty() && result.err.empty()) {
    return absl::NotFoundError(cannot_run);
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
