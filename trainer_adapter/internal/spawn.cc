#include "trainer_adapter/internal/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace evoscale::trainer_adapter::internal {
namespace {

// What the child needs between fork and exec, all of it made before fork.
struct ChildPlan {
  const char* program;
  char* const* argv;
  char* const* envp;
  const char* work_dir;  // nullptr: the parent's
  int stdio[3];          // what becomes the child's 0, 1 and 2
  int status_fd;         // the exec status pipe's write end
  bool new_group;
  int death_signal;  // 0: none
  pid_t parent;
  int fd_limit;  // for MarkCloseOnExecFrom's last fallback
  const std::function<void()>* in_child;
};

// Every signal to its default disposition (exec keeps the ignored ones), then none blocked.
// In this order, so that no handler of the parent's runs in the child once signals arrive.
void ResetSignals() {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  // SIGKILL, SIGSTOP and the C library's own signals refuse: nothing to reset there.
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Makes `source` the child's descriptors 0, 1 and 2. A source that is itself one of 0-2 (the
// parent had closed its own) first moves above them, so that no dup2 overwrites another's
// source, and dup2 onto a different number clears FD_CLOEXEC. errno of a failure, or 0.
int SetUpStdio(const int (&source)[3]) {
  int fds[3] = {source[0], source[1], source[2]};
  for (int& fd : fds) {
    if (fd < 3 && (fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) return errno;
  }
  for (int i = 0; i < 3; ++i) {
    if (dup2(fds[i], i) < 0) return errno;
  }
  return 0;
}

[[noreturn]] void RunChild(const ChildPlan& plan) {
  if (plan.new_group) setpgid(0, 0);
  if (*plan.in_child) (*plan.in_child)();
  if (plan.death_signal != 0) {
    prctl(PR_SET_PDEATHSIG, plan.death_signal);
    if (getppid() != plan.parent) _exit(127);  // the parent died before prctl
  }
  ResetSignals();
  MarkCloseOnExecFrom(3, plan.fd_limit);
  int error = SetUpStdio(plan.stdio);
  if (error == 0 && plan.work_dir != nullptr && chdir(plan.work_dir) != 0) error = errno;
  if (error == 0) {
    execve(plan.program, plan.argv, plan.envp);
    error = errno;
  }
  ssize_t ignored = write(plan.status_fd, &error, sizeof error);
  (void)ignored;
  _exit(127);
}

// The descriptor a /proc/self/fd entry names, or -1 ("." and "..").
int ParseFd(const char* name) {
  if (*name == '\0') return -1;
  int fd = 0;
  for (; *name != '\0'; ++name) {
    if (*name < '0' || *name > '9' || fd > (INT_MAX - 9) / 10) return -1;
    fd = fd * 10 + (*name - '0');
  }
  return fd;
}

// MarkCloseOnExecFrom through /proc/self/fd, read with getdents64 into a stack buffer (opendir
// allocates). False when /proc cannot be read.
bool MarkListed(int first) {
  const int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(struct dirent64) char buf[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) {
      close(dir);
      return n == 0;
    }
    for (long offset = 0; offset < n;) {
      const auto* entry = reinterpret_cast<const struct dirent64*>(buf + offset);
      offset += entry->d_reclen;
      const int fd = ParseFd(entry->d_name);
      if (fd >= first && fd != dir) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
}

// The child's standard descriptors: its ends, and the parent's ends of the pipes.
struct Stdio {
  ScopedFd dev_null;
  ScopedFd child_end[3];   // pipe ends the child gets; the parent closes its copies
  ScopedFd parent_end[3];  // what Child keeps
  int child_fd[3] = {-1, -1, -1};
};

absl::Status OpenStdio(const SpawnOptions& options, Stdio* stdio) {
  static constexpr const char* kNames[3] = {"stdin", "stdout", "stderr"};
  const StdioSource* sources[3] = {&options.stdin_source, &options.stdout_source,
                                   &options.stderr_source};
  for (int i = 0; i < 3; ++i) {
    switch (sources[i]->kind) {
      case StdioSource::Kind::kDevNull:
        if (!stdio->dev_null.valid()) {
          stdio->dev_null.reset(open("/dev/null", O_RDWR | O_CLOEXEC));
          if (!stdio->dev_null.valid()) {
            return absl::InternalError(absl::StrCat("open /dev/null: ", std::strerror(errno)));
          }
        }
        stdio->child_fd[i] = stdio->dev_null.get();
        break;
      case StdioSource::Kind::kPipe: {
        int ends[2];
        if (pipe2(ends, O_CLOEXEC) != 0) {
          return absl::InternalError(absl::StrCat("pipe for ", kNames[i]));
        }
        // The child reads its stdin and writes its stdout and stderr.
        ScopedFd read_end(ends[0]), write_end(ends[1]);
        stdio->child_end[i] = std::move(i == 0 ? read_end : write_end);
        stdio->parent_end[i] = std::move(i == 0 ? write_end : read_end);
        stdio->child_fd[i] = stdio->child_end[i].get();
        break;
      }
      case StdioSource::Kind::kFd:
        if (sources[i]->fd < 0) {
          return absl::InvalidArgumentError(absl::StrCat(kNames[i], ": fd ", sources[i]->fd));
        }
        stdio->child_fd[i] = sources[i]->fd;
        break;
    }
  }
  return absl::OkStatus();
}

// The program Spawn executes: options.program, else argv[0] found as execvp finds it.
absl::StatusOr<std::string> ProgramToRun(const SpawnOptions& options) {
  if (!options.program.empty()) return options.program;
  const auto path = options.env.find("PATH");
  // execvp's search path where PATH is unset.
  return ResolveProgram(options.argv[0],
                        path != options.env.end() ? path->second : "/bin:/usr/bin");
}

int DescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur > INT_MAX) return INT_MAX;
  return static_cast<int>(limit.rlim_cur);
}

// What the child sent through the exec status pipe: its errno, or 0 once it has exec'd (the
// pipe closed on exec without a word).
int ReadExecStatus(int fd) {
  int child_errno = 0;
  ssize_t n;
  while ((n = read(fd, &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  return n == sizeof child_errno ? child_errno : 0;
}

// A wait status as exit code and signal.
ChildExit ExitOf(int status) {
  ChildExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int ScopedFd::release() { return std::exchange(fd_, -1); }

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this == &other) return *this;
  KillAndReap();
  pid_ = std::exchange(other.pid_, -1);
  group_ = std::exchange(other.group_, false);
  reaped_ = std::exchange(other.reaped_, false);
  exit_ = other.exit_;
  for (int i = 0; i < 3; ++i) stdio_[i] = std::move(other.stdio_[i]);
  return *this;
}

Child::~Child() { KillAndReap(); }

void Child::KillAndReap() {
  if (pid_ < 0 || reaped_) return;
  Signal(SIGKILL);
  Wait();
}

void Child::Signal(int sig) const {
  if (pid_ > 0 && !reaped_) kill(group_ ? -pid_ : pid_, sig);
}

void Child::AwaitExit() const {
  if (pid_ < 0 || reaped_) return;
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
}

ChildExit Child::Wait() {
  if (pid_ < 0 || reaped_) return exit_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  exit_ = ExitOf(status);
  return exit_;
}

std::optional<ChildExit> Child::TryWait() {
  if (pid_ < 0 || reaped_) return exit_;
  int status = 0;
  pid_t reaped;
  while ((reaped = waitpid(pid_, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (reaped == 0) return std::nullopt;
  reaped_ = true;  // or gone already (ECHILD): nothing left to wait for either way
  if (reaped == pid_) exit_ = ExitOf(status);
  return exit_;
}

absl::StatusOr<Child> Spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("argv: empty");
  }
  absl::StatusOr<std::string> program = ProgramToRun(options);
  if (!program.ok()) return program.status();
  Stdio stdio;
  if (absl::Status st = OpenStdio(options, &stdio); !st.ok()) return st;
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe for exec status");
  ScopedFd status_read(status_pipe[0]), status_write(status_pipe[1]);

  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  const ExecStrings exec(options.argv, options.env);
  const ChildPlan plan = {
      .program = program->c_str(),
      .argv = exec.argv.data(),
      .envp = exec.envp.data(),
      .work_dir = options.work_dir.empty() ? nullptr : options.work_dir.c_str(),
      .stdio = {stdio.child_fd[0], stdio.child_fd[1], stdio.child_fd[2]},
      .status_fd = status_write.get(),
      .new_group = options.new_process_group,
      .death_signal = options.parent_death_signal,
      .parent = getpid(),
      .fd_limit = DescriptorLimit(),
      .in_child = &options.in_child,
  };
  const pid_t pid = fork();
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) RunChild(plan);

  Child child;
  child.pid_ = pid;
  child.group_ = options.new_process_group;
  if (child.group_) setpgid(pid, pid);  // also here, so that a signal right away reaches the group
  for (int i = 0; i < 3; ++i) child.stdio_[i] = std::move(stdio.parent_end[i]);
  status_write.reset();
  if (const int child_errno = ReadExecStatus(status_read.get()); child_errno != 0) {
    child.Wait();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run \"", *program, "\"",
                     options.work_dir.empty() ? "" : absl::StrCat(" in \"", options.work_dir, "\""),
                     ": ", std::strerror(child_errno)));
  }
  return child;
}

absl::StatusOr<std::string> ResolveProgram(const std::string& program, const std::string& path) {
  auto check = [](const std::string& candidate) -> absl::Status {
    struct stat st {};
    if (stat(candidate.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("argv[0] \"", candidate, "\": not found"));
    }
    if (!S_ISREG(st.st_mode) || access(candidate.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("argv[0] \"", candidate, "\": not an executable file"));
    }
    return absl::OkStatus();
  };
  if (program.find('/') != std::string::npos) {
    if (absl::Status st = check(program); !st.ok()) return st;
    return program;
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (check(candidate).ok()) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("argv[0] \"", program, "\": not found in PATH"));
}

void MarkCloseOnExecFrom(int first, int limit, CloseOnExecWay way) {
  if (way == CloseOnExecWay::kBest &&
      syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) {
    return;
  }
  if (way != CloseOnExecWay::kLoop && MarkListed(first)) return;
  for (int fd = first; fd < limit; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

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

}  // namespace evoscale::trainer_adapter::internal
