// Starts a child process: the one fork/exec of the trainer adapter, used by the local runner
// (a trial) and by RunCommand (the Slurm clients).
//
// Between fork and exec the child, in this order: makes a process group of its own (when
// asked), runs the caller's hook (a trial joins its cgroup), asks for a signal when the
// starting thread ends (when asked), resets every signal's disposition and unblocks every
// signal (a blocked mask and ignored signals survive exec, and the host may have both: evoscaled
// blocks SIGTERM in every thread to sigwait for it and ignores SIGPIPE), gives every descriptor
// but its standard three FD_CLOEXEC (so that none of the parent's sockets or databases leaks
// into it), sets up its standard descriptors, changes directory (when asked) and execs. It
// makes only async-signal-safe calls there: everything it needs is built before fork. When
// the chdir or the exec fails, the child sends errno through a close-on-exec pipe and Spawn
// returns the failure, so a Child is always a running program.
#ifndef EVOSCALE_TRAINER_ADAPTER_INTERNAL_SPAWN_H_
#define EVOSCALE_TRAINER_ADAPTER_INTERNAL_SPAWN_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace evoscale::trainer_adapter::internal {

// Owns one file descriptor and closes it; -1 when empty. Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();            // gives the descriptor up without closing it
  void reset(int fd = -1);  // closes the one it held

 private:
  int fd_ = -1;
};

// One of the child's standard descriptors (stdin, stdout, stderr).
struct StdioSource {
  enum class Kind {
    kDevNull,  // /dev/null
    kPipe,     // a pipe whose other end the parent gets (Child::stdin_pipe() ...)
    kFd,       // `fd`, the caller's: the child gets a copy, the caller keeps it
  };
  static StdioSource DevNull() { return {Kind::kDevNull, -1}; }
  static StdioSource Pipe() { return {Kind::kPipe, -1}; }
  static StdioSource Fd(int fd) { return {Kind::kFd, fd}; }

  Kind kind = Kind::kDevNull;
  int fd = -1;  // kFd only
};

struct SpawnOptions {
  std::vector<std::string> argv;  // must not be empty
  // The file to execute; empty: argv[0], found as execvp finds it (ResolveProgram, in the PATH
  // of `env`).
  std::string program;
  // The child's whole environment (ProcessEnvironment() gives this process's, to add to).
  std::map<std::string, std::string> env;
  std::string work_dir;  // empty: the parent's
  StdioSource stdin_source = StdioSource::DevNull();
  StdioSource stdout_source = StdioSource::DevNull();
  StdioSource stderr_source = StdioSource::DevNull();
  // The child leads a process group of its own (setpgid, in the child and in the parent, so
  // that a signal to the group right after Spawn returns reaches it). Child::Signal and the
  // destructor then signal the whole group.
  bool new_process_group = false;
  // PR_SET_PDEATHSIG: the signal the child gets when the thread that called Spawn ends; 0:
  // none. Where that thread is already gone before the child asks, the child exits 127.
  int parent_death_signal = 0;
  // Runs in the child after setpgid and before everything else; async-signal-safe calls only
  // (no allocation, no locks). The local runner joins the trial's cgroup here, so that nothing
  // of the trial runs outside it.
  std::function<void()> in_child;
};

// How a child ended.
struct ChildExit {
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;      // the signal that ended it, or 0
};

// A started child process. Owns its pid and the parent's ends of its pipes. Destroying a Child
// that was not reaped (Wait, or TryWait with an answer) kills it with SIGKILL (its group, when
// it made one) and reaps it, so it leaves no zombie. Move-only.
//
// Not thread-safe, with one exception: AwaitExit() may block in one thread while another calls
// Signal() (the child is not reaped while AwaitExit waits, so its pid, and its group's id,
// cannot be reused under the signal).
class Child {
 public:
  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  bool has_process_group() const { return group_; }

  // The parent's ends of the pipes asked for (StdioSource::Pipe()): stdin's write end,
  // stdout's and stderr's read ends. Empty where no pipe was asked for. Move them out to hand
  // them on (a reading thread); the Child does not need them.
  ScopedFd& stdin_pipe() { return stdio_[0]; }
  ScopedFd& stdout_pipe() { return stdio_[1]; }
  ScopedFd& stderr_pipe() { return stdio_[2]; }

  // Sends `sig` to the child's process group when it made one, else to the child. Nothing
  // once it is reaped.
  void Signal(int sig) const;

  // Blocks until the child has ended, without reaping it (waitid WNOWAIT): the caller can
  // still signal what is left of its process group, whose id stays the child's until Wait().
  void AwaitExit() const;

  // Blocks until the child has ended and reaps it. Once; a second call gives the same answer.
  ChildExit Wait();

  // Reaps the child if it has ended; nullopt while it runs.
  std::optional<ChildExit> TryWait();

 private:
  friend absl::StatusOr<Child> Spawn(const SpawnOptions& options);
  void KillAndReap();

  pid_t pid_ = -1;
  bool group_ = false;
  bool reaped_ = false;
  ChildExit exit_;  // once reaped_
  ScopedFd stdio_[3];
};

// Starts options.argv. INVALID_ARGUMENT for an empty argv; what ResolveProgram says when the
// program is not found; FAILED_PRECONDITION "cannot run \"PROGRAM\" in \"WORK_DIR\": REASON"
// when the child could not change to work_dir or exec the program; INTERNAL when a pipe
// cannot be made, RESOURCE_EXHAUSTED when fork fails. Thread-safe: several threads may spawn
// at once (every descriptor Spawn opens is close-on-exec, so no child gets another's pipes).
absl::StatusOr<Child> Spawn(const SpawnOptions& options);

// Finds `program` the way execvp would: as given if it has a '/', else the first regular,
// executable file of that name in the directories of `path` (':'-separated). NOT_FOUND
// "argv[0] \"P\": not found" / "... not found in PATH"; FAILED_PRECONDITION "argv[0] \"P\": not
// an executable file" for a program given with a '/' that cannot be run.
absl::StatusOr<std::string> ResolveProgram(const std::string& program, const std::string& path);

// How MarkCloseOnExecFrom finds the descriptors to mark.
enum class CloseOnExecWay {
  kBest,     // close_range(2), else kListing, else kLoop
  kListing,  // each descriptor /proc/self/fd lists, else kLoop
  kLoop,     // every number from `first` below `limit`
};

// Marks every open descriptor from `first` up FD_CLOEXEC (the descriptor a listing reads
// through is closed again). close_range(2) with CLOSE_RANGE_CLOEXEC needs Linux 5.11; where
// it is missing, the listing of /proc/self/fd; without /proc, every number below `limit` (the
// descriptor limit, read before fork). Async-signal-safe: Spawn's child calls it before exec.
// Declared here so that its fallbacks can be tested.
void MarkCloseOnExecFrom(int first, int limit, CloseOnExecWay way = CloseOnExecWay::kBest);

// This process's environment, NAME -> value.
std::map<std::string, std::string> ProcessEnvironment();

// What execve takes for `argv` and `env`, built before fork (after it the child makes only
// async-signal-safe calls). The pointer arrays end with nullptr and point into the strings,
// so the object is neither copied nor moved.
struct ExecStrings {
  ExecStrings(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  ExecStrings(const ExecStrings&) = delete;
  ExecStrings& operator=(const ExecStrings&) = delete;

  std::vector<std::string> arg_strings;  // argv, as given
  std::vector<std::string> env_strings;  // "NAME=value"
  std::vector<char*> argv;
  std::vector<char*> envp;
};

}  // namespace evoscale::trainer_adapter::internal

#endif  // EVOSCALE_TRAINER_ADAPTER_INTERNAL_SPAWN_H_
