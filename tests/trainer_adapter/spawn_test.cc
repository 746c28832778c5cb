// Spawn's contract on real child processes: what the child gets (descriptors, signals, process
// group, environment), how a failure to run it is named, and that a Child leaves no zombie.
#include "trainer_adapter/internal/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace evoscale::trainer_adapter::internal {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

SpawnOptions Options(std::vector<std::string> argv) {
  SpawnOptions options;
  options.argv = std::move(argv);
  options.env = ProcessEnvironment();
  return options;
}

std::string ReadAll(ScopedFd& fd) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fd.get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// The descriptors process `pid` has open, from /proc/PID/fd.
std::set<int> OpenFds(pid_t pid) {
  std::set<int> fds;
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return fds;
  while (dirent* d = readdir(dir)) {
    int fd = 0;
    if (absl::SimpleAtoi(d->d_name, &fd)) fds.insert(fd);
  }
  closedir(dir);
  return fds;
}

std::string FdTarget(pid_t pid, int fd) {
  char target[4096];
  const ssize_t n =
      readlink(absl::StrCat("/proc/", pid, "/fd/", fd).c_str(), target, sizeof target);
  return n < 0 ? "" : std::string(target, static_cast<size_t>(n));
}

// A line of /proc/PID/status ("SigBlk", "SigIgn"), without its key.
std::string StatusField(pid_t pid, const std::string& key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, key + ":")) return std::string(absl::StripAsciiWhitespace(rest));
  }
  return "";
}

// True once `pid` is gone or a zombie nobody here can reap (a grandchild, reparented).
bool Ended(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool Reaped(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD; }

class SpawnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/evoscale-spawn-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf '" + dir_ + "'").c_str()), 0); }

  std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << text;
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    return path;
  }

  std::string dir_;
};

TEST_F(SpawnTest, AProgramNotInPathIsNotFound) {
  EXPECT_THAT(Spawn(Options({"evoscale-no-such-program"})).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "argv[0] \"evoscale-no-such-program\": not found in PATH"));
  EXPECT_THAT(Spawn(Options({})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "argv: empty"));
}

TEST_F(SpawnTest, AnExecThatFailsInTheChildIsNamedWithItsReason) {
  // Executable bits but no format the kernel knows: only execve itself can tell.
  SpawnOptions garbage = Options({"garbage"});
  garbage.program = WriteFile("garbage", std::string("\x7f\x01\x02\x03", 4), 0755);
  EXPECT_THAT(Spawn(garbage).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("cannot run \"", garbage.program, "\": Exec format error")));

  SpawnOptions elsewhere = Options({"/bin/true"});
  elsewhere.work_dir = dir_ + "/missing";
  EXPECT_THAT(Spawn(elsewhere).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("cannot run \"/bin/true\" in \"", elsewhere.work_dir,
                                    "\": No such file or directory")));
}

TEST_F(SpawnTest, TheChildGetsOnlyTheDescriptorsItWasGiven) {
  // Descriptors of the parent's that are not close-on-exec, one of them high.
  const int leaked = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 0);
  int leaked_pipe[2];
  ASSERT_EQ(pipe(leaked_pipe), 0);
  const int high = dup2(leaked, 200);
  ASSERT_EQ(high, 200);
  const std::string log_path = dir_ + "/log";
  ScopedFd log(open(log_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(log.valid());

  SpawnOptions options = Options({"/bin/sleep", "30"});
  options.stdout_source = StdioSource::Pipe();
  options.stderr_source = StdioSource::Fd(log.get());
  absl::StatusOr<Child> child = Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  // Spawn returns once the child has exec'd: what it has open now is what the program got.
  EXPECT_THAT(OpenFds(child->pid()), ElementsAre(0, 1, 2));
  EXPECT_EQ(FdTarget(child->pid(), 0), "/dev/null");
  EXPECT_THAT(FdTarget(child->pid(), 1), StartsWith("pipe:"));
  EXPECT_EQ(FdTarget(child->pid(), 2), log_path);
  EXPECT_TRUE(child->stdout_pipe().valid());
  EXPECT_FALSE(child->stdin_pipe().valid());
  EXPECT_FALSE(child->stderr_pipe().valid());
  for (int fd : {leaked, leaked_pipe[0], leaked_pipe[1], high}) close(fd);
}

TEST_F(SpawnTest, EachWayOfMarkingDescriptorsReachesEveryOne) {
  for (CloseOnExecWay way :
       {CloseOnExecWay::kBest, CloseOnExecWay::kListing, CloseOnExecWay::kLoop}) {
    int fds[3];
    ASSERT_EQ(pipe(fds), 0);
    fds[2] = dup2(fds[0], 300);
    ASSERT_EQ(fds[2], 300);
    const int first = std::min(fds[0], fds[1]);
    MarkCloseOnExecFrom(first, 301, way);
    for (int fd : fds) {
      EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC)
          << "fd " << fd << ", way " << static_cast<int>(way);
      close(fd);
    }
  }
}

TEST_F(SpawnTest, SignalsTheParentIgnoresOrBlocksReachTheChild) {
  struct sigaction ignore = {};
  struct sigaction before_term = {};
  struct sigaction before_pipe = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGTERM, &ignore, &before_term), 0);
  ASSERT_EQ(sigaction(SIGPIPE, &ignore, &before_pipe), 0);
  sigset_t term, before_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &before_mask), 0);

  absl::StatusOr<Child> child = Spawn(Options({"/bin/sleep", "30"}));

  pthread_sigmask(SIG_SETMASK, &before_mask, nullptr);
  sigaction(SIGTERM, &before_term, nullptr);
  sigaction(SIGPIPE, &before_pipe, nullptr);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(StatusField(child->pid(), "SigIgn"), "0000000000000000");
  EXPECT_EQ(StatusField(child->pid(), "SigBlk"), "0000000000000000");
  child->Signal(SIGTERM);
  std::optional<ChildExit> exit;
  EXPECT_TRUE(
      AwaitCondition([&] { return (exit = child->TryWait()).has_value(); }, absl::Seconds(10)))
      << "SIGTERM did not end the child";
  if (!exit.has_value()) exit = (child->Signal(SIGKILL), child->Wait());
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_EQ(exit->exit_code, -1);
}

TEST_F(SpawnTest, ANewProcessGroupIsTheChildsAndASignalReachesAllOfIt) {
  SpawnOptions options = Options({"/bin/sh", "-c", "sleep 30 & echo $!; wait"});
  options.stdout_source = StdioSource::Pipe();
  options.new_process_group = true;
  absl::StatusOr<Child> child = Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE(child->has_process_group());
  EXPECT_EQ(getpgid(child->pid()), child->pid());
  // The first line of the shell's output: its background sleep's pid.
  std::string line;
  char c;
  while (read(child->stdout_pipe().get(), &c, 1) == 1 && c != '\n') line.push_back(c);
  pid_t grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line, &grandchild)) << line;
  EXPECT_EQ(getpgid(grandchild), child->pid());

  child->Signal(SIGKILL);
  EXPECT_EQ(child->Wait().signal, SIGKILL);
  EXPECT_TRUE(AwaitCondition([&] { return Ended(grandchild); }));

  absl::StatusOr<Child> same_group = Spawn(Options({"/bin/sleep", "30"}));
  ASSERT_TRUE(same_group.ok()) << same_group.status();
  EXPECT_FALSE(same_group->has_process_group());
  EXPECT_EQ(getpgid(same_group->pid()), getpgrp());
}

TEST_F(SpawnTest, TheHookRunsInTheChildBeforeExecInItsOwnGroup) {
  int report[2];
  ASSERT_EQ(pipe2(report, O_CLOEXEC), 0);
  ScopedFd report_read(report[0]), report_write(report[1]);
  SpawnOptions options = Options({"/bin/true"});
  options.new_process_group = true;
  const int fd = report_write.get();
  options.in_child = [fd] {
    const pid_t group = getpgrp();
    ssize_t ignored = write(fd, &group, sizeof group);
    (void)ignored;
  };
  absl::StatusOr<Child> child = Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  report_write.reset();
  pid_t group = 0;
  ASSERT_EQ(read(report_read.get(), &group, sizeof group), static_cast<ssize_t>(sizeof group));
  EXPECT_EQ(group, child->pid());
  EXPECT_EQ(child->Wait().exit_code, 0);
}

TEST_F(SpawnTest, PipesCarryStdinOutAndErrAndTheEnvironmentIsTheGivenOne) {
  SpawnOptions options =
      Options({"/bin/sh", "-c", "read line; echo \"$line $WHO\"; echo err >&2; exit 3"});
  options.env = {{"WHO", "me"}, {"PATH", "/usr/bin:/bin"}};
  options.stdin_source = StdioSource::Pipe();
  options.stdout_source = StdioSource::Pipe();
  options.stderr_source = StdioSource::Pipe();
  absl::StatusOr<Child> child = Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_EQ(write(child->stdin_pipe().get(), "hello\n", 6), 6);
  child->stdin_pipe().reset();
  EXPECT_EQ(ReadAll(child->stdout_pipe()), "hello me\n");
  EXPECT_EQ(ReadAll(child->stderr_pipe()), "err\n");
  EXPECT_EQ(child->Wait().exit_code, 3);
  EXPECT_EQ(child->Wait().exit_code, 3);  // the same answer again
}

TEST_F(SpawnTest, TryWaitAnswersOnlyOnceTheChildHasEnded) {
  absl::StatusOr<Child> child = Spawn(Options({"/bin/sleep", "30"}));
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_FALSE(child->TryWait().has_value());
  child->Signal(SIGKILL);
  std::optional<ChildExit> exit;
  EXPECT_TRUE(AwaitCondition([&] { return (exit = child->TryWait()).has_value(); }));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_TRUE(Reaped(child->pid()));
}

TEST_F(SpawnTest, DestroyingAChildKillsAndReapsItSoNoZombieIsLeft) {
  pid_t running_pid = -1, ended_pid = -1, grandchild = 0;
  {
    absl::StatusOr<Child> running = Spawn(Options({"/bin/sleep", "30"}));
    ASSERT_TRUE(running.ok()) << running.status();
    running_pid = running->pid();
    SpawnOptions group = Options({"/bin/sh", "-c", "sleep 30 & echo $!; wait"});
    group.stdout_source = StdioSource::Pipe();
    group.new_process_group = true;
    absl::StatusOr<Child> leader = Spawn(group);
    ASSERT_TRUE(leader.ok()) << leader.status();
    std::string line;
    char c;
    while (read(leader->stdout_pipe().get(), &c, 1) == 1 && c != '\n') line.push_back(c);
    ASSERT_TRUE(absl::SimpleAtoi(line, &grandchild)) << line;
    absl::StatusOr<Child> ended = Spawn(Options({"/bin/true"}));
    ASSERT_TRUE(ended.ok()) << ended.status();
    ended_pid = ended->pid();
    ended->AwaitExit();  // a zombie now, until the Child goes
    EXPECT_FALSE(Reaped(ended_pid));
    // A moved-from Child owns nothing; the one moved into still does.
    Child moved = *std::move(ended);
    EXPECT_EQ(ended->pid(), -1);
    EXPECT_EQ(moved.pid(), ended_pid);
  }
  EXPECT_TRUE(Reaped(running_pid));
  EXPECT_TRUE(Reaped(ended_pid));
  EXPECT_TRUE(AwaitCondition([&] { return Ended(grandchild); }));  // its group was killed
}

TEST_F(SpawnTest, AParentDeathSignalEndsTheChildWithTheThreadThatSpawnedIt) {
  absl::StatusOr<Child> child;
  std::thread starter([&] {
    SpawnOptions options = Options({"/bin/sleep", "30"});
    options.parent_death_signal = SIGKILL;
    child = Spawn(options);
  });
  starter.join();
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(child->Wait().signal, SIGKILL);
}

TEST(ResolveProgramTest, FindsWhatExecvpWouldAndNamesWhatItCannotRun) {
  absl::StatusOr<std::string> sh = ResolveProgram("sh", "/nonexistent:/bin");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ(*sh, "/bin/sh");
  EXPECT_THAT(ResolveProgram("sh", "").status(),
              StatusIs(absl::StatusCode::kNotFound, "argv[0] \"sh\": not found in PATH"));
  EXPECT_THAT(ResolveProgram("/nonexistent/x", "/bin").status(),
              StatusIs(absl::StatusCode::kNotFound, "argv[0] \"/nonexistent/x\": not found"));
  EXPECT_THAT(ResolveProgram("/etc", "/bin").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("\"/etc\": not an executable file")));
}

}  // namespace
}  // namespace evoscale::trainer_adapter::internal
