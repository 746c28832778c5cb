// The local runner on real child processes: /bin/sh scripts for each way a trial can end, and
// the real evoscale-trainer.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <regex>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"
#include "trainer_adapter/cgroup.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale::trainer_adapter {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Records everything a trial reports.
class Recorder : public TrialObserver {
 public:
  void OnEvent(const TrialEvent& e) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
  }
  void OnUsage(const UsageSample& s) override {
    absl::MutexLock lock(&mu_);
    usage_.push_back(s);
  }
  // Blocks until `n` events have arrived (or the trial has ended and they never will).
  void AwaitEvents(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return events_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }
  std::vector<TrialEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<UsageSample> usage() {
    absl::MutexLock lock(&mu_);
    return usage_;
  }

 private:
  absl::Mutex mu_;
  std::vector<TrialEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<UsageSample> usage_ ABSL_GUARDED_BY(mu_);
};

// Processes of group `pgid` that are not zombies (a zombie waits for a reaper that, in a
// container, may never come).
int LiveProcessesInGroup(pid_t pgid) {
  int n = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* d = readdir(proc)) {
    std::ifstream in(std::string("/proc/") + d->d_name + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != "Z") ++n;
  }
  closedir(proc);
  return n;
}

class LocalRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/evoscale-runner-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf '" + dir_ + "'").c_str()), 0); }

  // Runs `script` with /bin/sh to the end.
  TrialOutcome RunScript(const std::string& script, Recorder* recorder = nullptr,
                         TrialLaunch launch = {}) {
    launch.argv = {"/bin/sh", "-c", script};
    absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, recorder);
    EXPECT_TRUE(trial.ok()) << trial.status();
    if (!trial.ok()) return {};
    return (*trial)->Wait();
  }

  std::string dir_;
  std::unique_ptr<TrialRunner> runner_ = NewLocalProcessRunner(
      LocalRunnerOptions{.sample_every = absl::Milliseconds(20), .stderr_tail_bytes = 4096});
};

TEST_F(LocalRunnerTest, EventsArriveInOrderAndLogLinesAreCountedNotFatal) {
  Recorder rec;
  const TrialOutcome o = RunScript(
      "echo 'loading data'\n"
      "echo '{\"event\":\"progress\",\"step\":1,\"metrics\":{\"loss\":0.9}}'\n"
      "echo '{\"event\":\"progress\",\"step\":2,\"metrics\":{\"loss\":0.7}}'\n"
      "printf '{\"event\":\"final\",\"metrics\":{\"loss\":0.5}}'\n",  // no newline at the end
      &rec);
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kSucceeded) << o.reason;
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.events, 3);
  EXPECT_EQ(o.other_lines, 1);
  EXPECT_THAT(o.first_bad_line_error, HasSubstr("not JSON"));
  EXPECT_THAT(o.first_bad_line_error, HasSubstr("parse error at line 1, column 1"));
  ASSERT_TRUE(o.final.has_value());
  EXPECT_THAT(o.final->metrics, ElementsAre(Pair("loss", 0.5)));
  const std::vector<TrialEvent> events = rec.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].step, 1);
  EXPECT_EQ(events[1].step, 2);
  EXPECT_EQ(events[2].kind, TrialEvent::Kind::kFinal);
}

TEST_F(LocalRunnerTest, TheTrialGetsItsNameLimitsGpusEnvironmentAndWorkDir) {
  Recorder rec;
  TrialLaunch launch;
  launch.trial_name = "studies/3/trials/7";
  launch.env = {{"FOO", "bar baz"}};
  launch.limits.cpu_cores = 1.5;
  launch.limits.memory_bytes = 1 << 30;
  launch.work_dir = dir_;
  const TrialOutcome o = RunScript(
      "echo \"{\\\"event\\\":\\\"checkpoint\\\",\\\"path\\\":\\\"$EVOSCALE_TRIAL|$FOO|"
      "$EVOSCALE_CPU_CORES|$EVOSCALE_MEMORY_BYTES|[$CUDA_VISIBLE_DEVICES]|$(pwd)\\\"}\"\n"
      "echo '{\"event\":\"final\"}'\n",
      &rec, launch);
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kSucceeded) << o.reason;
  const std::vector<TrialEvent> events = rec.events();
  ASSERT_FALSE(events.empty());
  char real[PATH_MAX];
  ASSERT_NE(realpath(dir_.c_str(), real), nullptr);
  EXPECT_EQ(events[0].path,
            "studies/3/trials/7|bar baz|1.5|1073741824|[]|" + std::string(real));

  launch.gpu_ids = {2, 3};
  Recorder rec2;
  RunScript(
      "echo \"{\\\"event\\\":\\\"checkpoint\\\",\\\"path\\\":\\\"$CUDA_VISIBLE_DEVICES\\\"}\"",
      &rec2, launch);
  ASSERT_FALSE(rec2.events().empty());
  EXPECT_EQ(rec2.events()[0].path, "2,3");
}

TEST_F(LocalRunnerTest, EachWayOfFailingIsReported) {
  TrialOutcome o = RunScript("echo 'no space left' >&2; exit 3");
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(o.reason, "exit code 3; stderr: no space left");
  EXPECT_EQ(o.stderr_tail, "no space left\n");

  o = RunScript(
      "echo '{\"event\":\"error\",\"code\":\"INTERNAL\",\"message\":\"non-finite loss\"}'; exit 1");
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(o.reason, "error event: INTERNAL: non-finite loss");
  ASSERT_TRUE(o.error.has_value());

  o = RunScript("echo '{\"event\":\"progress\",\"step\":1}'");
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(o.reason, "exited 0 without a \"final\" event");

  o = RunScript("kill -SEGV $$");
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(o.signal, SIGSEGV);
  EXPECT_EQ(o.exit_code, -1);
  EXPECT_EQ(o.reason, "killed by SIGSEGV");

  // A "final" followed by a non-zero exit is not a success.
  o = RunScript("echo '{\"event\":\"final\"}'; exit 2");
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(o.reason, "exit code 2");
}

TEST_F(LocalRunnerTest, StopEndsTheWholeGroupAndKillsWhatIgnoresSigterm) {
  // The script ignores SIGTERM and leaves a child of its own running.
  Recorder rec;
  TrialLaunch launch;
  launch.argv = {"/bin/sh", "-c",
                 "trap '' TERM; sleep 300 & echo '{\"event\":\"progress\",\"step\":1}'; "
                 "while true; do sleep 0.05; done"};
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, &rec);
  ASSERT_TRUE(trial.ok()) << trial.status();
  rec.AwaitEvents(1);
  ASSERT_EQ(rec.events().size(), 1u);
  const pid_t pid = (*trial)->pid();
  (*trial)->Stop(absl::Milliseconds(100));
  const TrialOutcome& o = (*trial)->Wait();
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kStopped);
  EXPECT_EQ(o.signal, SIGKILL);  // SIGTERM was ignored
  // Nothing of the group is left running (the background sleep included). A killed process
  // closes its pipes before it becomes a zombie, so it may still be on its way out here.
  EXPECT_TRUE(AwaitCondition([&] { return LiveProcessesInGroup(pid) == 0; }, absl::Seconds(10)))
      << LiveProcessesInGroup(pid) << " processes of the group still run";

  // A trial that honours SIGTERM ends with it, even when the runner's thread blocks SIGTERM
  // (as evoscaled's threads do: the mask would otherwise pass to the trial).
  launch.argv = {"/bin/sh", "-c", "echo '{\"event\":\"progress\"}'; exec sleep 300"};
  Recorder rec2;
  sigset_t term, old_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old_mask), 0);
  trial = runner_->Start(launch, &rec2);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old_mask, nullptr), 0);
  ASSERT_TRUE(trial.ok()) << trial.status();
  rec2.AwaitEvents(1);
  (*trial)->Stop(absl::Seconds(60));
  EXPECT_EQ((*trial)->Wait().kind, TrialOutcome::Kind::kStopped);
  EXPECT_EQ((*trial)->Wait().signal, SIGTERM);
}

TEST_F(LocalRunnerTest, DestroyingARunningTrialStopsIt) {
  TrialLaunch launch;
  launch.argv = {"sleep", "300"};  // found in PATH
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const pid_t pid = (*trial)->pid();
  trial->reset();
  EXPECT_NE(kill(pid, 0), 0);
}

TEST_F(LocalRunnerTest, ATrialCanBeTiedToTheThreadThatStartedIt) {
  // Started from a thread that then ends: with die_with_starting_thread the trial is killed
  // (as when evoscaled itself is killed), without it the trial runs on.
  for (bool tied : {true, false}) {
    std::unique_ptr<TrialRunner> runner =
        NewLocalProcessRunner(LocalRunnerOptions{.sample_every = absl::Milliseconds(20),
                                                 .die_with_starting_thread = tied});
    TrialLaunch launch;
    launch.argv = {"sleep", "300"};
    std::unique_ptr<RunningTrial> trial;
    std::thread starter([&] {
      absl::StatusOr<std::unique_ptr<RunningTrial>> started = runner->Start(launch, nullptr);
      ASSERT_TRUE(started.ok()) << started.status();
      trial = *std::move(started);
    });
    starter.join();
    ASSERT_NE(trial, nullptr);
    if (tied) {
      const TrialOutcome& o = trial->Wait();
      EXPECT_EQ(o.kind, TrialOutcome::Kind::kFailed);
      EXPECT_EQ(o.signal, SIGKILL);
    } else {
      usleep(100000);
      EXPECT_EQ(kill(trial->pid(), 0), 0);  // still running
      trial->Stop(absl::Seconds(10));
      EXPECT_EQ(trial->Wait().kind, TrialOutcome::Kind::kStopped);
    }
  }
}

TEST_F(LocalRunnerTest, WithoutACgroupUsingMoreMemoryThanTheLimitKillsTheGroup) {
  // The sampling fallback (cgroup_test.cc has the kernel's limit). `tail -n 1` keeps a line
  // without newlines in memory: the group's RSS grows until killed.
  runner_ = NewLocalProcessRunner(LocalRunnerOptions{
      .use_cgroups = false, .sample_every = absl::Milliseconds(20), .stderr_tail_bytes = 4096});
  Recorder rec;
  TrialLaunch launch;
  launch.limits.memory_bytes = 64 << 20;
  const TrialOutcome o =
      RunScript("head -c 2000000000 /dev/zero | tail -n 1 > /dev/null", &rec, launch);
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kOutOfMemory) << o.reason;
  EXPECT_THAT(o.reason, AllOf(HasSubstr("over the limit of 67108864 bytes"), HasSubstr("killed")));
  EXPECT_GT(o.peak_rss_bytes, 64 << 20);
  EXPECT_FALSE(rec.usage().empty());
  EXPECT_EQ(o.enforcement, "sampling /proc every 20ms: cgroups turned off");
}

TEST_F(LocalRunnerTest, StartErrorsNameTheProblem) {
  TrialLaunch launch;
  EXPECT_EQ(runner_->Start(launch, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  launch.argv = {"evoscale-no-such-program"};
  absl::Status st = runner_->Start(launch, nullptr).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("\"evoscale-no-such-program\": not found in PATH"));
  const std::string not_exec = dir_ + "/data.txt";
  std::ofstream(not_exec) << "x";
  launch.argv = {not_exec};
  st = runner_->Start(launch, nullptr).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("not an executable file"));
  launch.argv = {"/bin/true"};
  launch.work_dir = dir_ + "/missing";
  st = runner_->Start(launch, nullptr).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("work_dir"));
  launch.work_dir.clear();
  launch.env = {{"A=B", "c"}};
  EXPECT_EQ(runner_->Start(launch, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// processes = 2: the trial is an MPI job of two ranks under mpirun, in the trial's one group.
TEST_F(LocalRunnerTest, ATrialOfSeveralProcessesRunsUnderMpirun) {
  if (access("/usr/bin/mpirun", X_OK) != 0) {
    GTEST_SKIP() << "no /usr/bin/mpirun (scripts/dev.sh deps installs openmpi-bin)";
  }
  TrialLaunch launch;
  launch.processes = 2;
  // Rank 0 speaks the protocol; every rank says who it is on stderr.
  const TrialOutcome o = RunScript(
      "echo \"rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE\" >&2; "
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then "
      "echo '{\"event\":\"final\",\"metrics\":{\"auc\":0.75}}'; fi",
      nullptr, launch);
  ASSERT_EQ(o.kind, TrialOutcome::Kind::kSucceeded) << o.reason << "\n" << o.stderr_tail;
  EXPECT_THAT(o.stderr_tail, HasSubstr("rank 0 of 2"));
  EXPECT_THAT(o.stderr_tail, HasSubstr("rank 1 of 2"));
  ASSERT_TRUE(o.final.has_value());
  EXPECT_EQ(o.final->metrics.at("auc"), 0.75);
  // A rank that fails fails the trial.
  const TrialOutcome failed = RunScript(
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exit 3; fi; sleep 5", nullptr, launch);
  EXPECT_EQ(failed.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(failed.exit_code, 3);
  // mpirun names the rank that failed first, though not every time (under load its report can
  // lose that part): when it does, the reason carries it; else mpirun's own last words.
  if (absl::StrContains(failed.stderr_tail, "Process name")) {
    EXPECT_THAT(failed.reason, HasSubstr("rank 1 exited with code 3 (mpirun ended the job)"));
  } else {
    EXPECT_THAT(failed.reason, HasSubstr("the job has been aborted"));
  }
  const TrialOutcome killed = RunScript(
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then kill -9 $$; fi; sleep 5", nullptr, launch);
  EXPECT_EQ(killed.kind, TrialOutcome::Kind::kFailed);
  if (absl::StrContains(killed.stderr_tail, "process rank 1")) {
    EXPECT_THAT(killed.reason, HasSubstr("rank 1 was killed by signal 9 (Killed)"));
  } else {
    EXPECT_THAT(killed.reason, HasSubstr("the job has been aborted"));
  }
  launch.processes = 0;
  launch.argv = {"/bin/true"};
  const absl::Status bad = runner_->Start(launch, nullptr).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("processes: 0 must be in [1, 1024]"));
}

// Runs `command` with /bin/sh; its stdout's last line.
std::string LastLine(const std::string& command) {
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return "";
  std::string last;
  char line[1 << 16];
  while (std::fgets(line, sizeof(line), out) != nullptr) last = line;
  pclose(out);
  return last;
}

double Field(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":([-0-9.e+]+)"))) return -1;
  return std::stod(m[1].str());
}

// The distributed trainer's point: a table over what one process may use trains as two ranks
// that each hold half. Each process gets a cgroup memory limit halfway between the single
// process's peak and the largest rank's: one process is OOM-killed, two ranks are not.
TEST_F(LocalRunnerTest, ATableOverOneProcessesMemoryCapTrainsAsTwoRanks) {
  const std::string trainer = std::string(EVOSCALE_BIN_DIR) + "/evoscale-trainer";
  if (access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << trainer;
  if (access("/usr/bin/mpirun", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/mpirun";
  absl::StatusOr<std::unique_ptr<CgroupRoot>> root = CgroupRoot::Detect("evoscale-mpicap");
  if (!root.ok()) GTEST_SKIP() << "no cgroups to cap a process: " << root.status();
  const std::string args = trainer + " --synthetic 400000 --threads 1 --seed 2 --progress-every 0";
  const std::string mpirun = "/usr/bin/mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ";
  const std::string one = LastLine(args);
  const std::string two = LastLine(mpirun + args);
  const double one_peak = Field(one, "peak_rss_bytes"), two_peak = Field(two, "peak_rss_bytes");
  ASSERT_GT(one_peak, 0) << one;
  ASSERT_GT(two_peak, 0) << two;
  ASSERT_GT(one_peak, 1.4 * two_peak) << "each rank should need well under one process";
  const int64_t cap = int64_t((one_peak + two_peak) / 2);

  // One process under the cap: killed for it.
  TrialLaunch launch;
  launch.limits.memory_bytes = cap;
  launch.argv = {trainer, "--synthetic", "400000", "--threads", "1", "--seed", "2",
                 "--progress-every", "0"};
  absl::StatusOr<std::unique_ptr<RunningTrial>> single = runner_->Start(launch, nullptr);
  ASSERT_TRUE(single.ok()) << single.status();
  const TrialOutcome& o = (*single)->Wait();
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kOutOfMemory) << o.reason;

  // Two ranks, each in a group of its own with the same cap: the job trains to the end.
  absl::StatusOr<std::unique_ptr<TrialCgroup>> g0 = (*root)->Create(cap, 0);
  absl::StatusOr<std::unique_ptr<TrialCgroup>> g1 = (*root)->Create(cap, 0);
  ASSERT_TRUE(g0.ok() && g1.ok());
  const std::string join =
      "sh -c 'eval d=\\$G$OMPI_COMM_WORLD_RANK; echo $$ > \"$d/cgroup.procs\" && exec \"$@\"' rank ";
  const std::string capped = LastLine("G0=" + (*g0)->memory_dir() + " G1=" + (*g1)->memory_dir() +
                                      " " + mpirun + join + args);
  EXPECT_NE(capped.find("\"event\":\"final\""), std::string::npos) << capped;
  EXPECT_EQ((*g0)->oom_kills() + (*g1)->oom_kills(), 0);
  EXPECT_LE((*g0)->peak_memory_bytes(), cap);
  EXPECT_LE((*g1)->peak_memory_bytes(), cap);
  EXPECT_NEAR(Field(capped, "auc"), Field(two, "auc"), 1e-9);  // the same job, capped or not
}

TEST_F(LocalRunnerTest, RunsTheRealTrainerAndSamplesItsUsage) {
  const std::string trainer = std::string(EVOSCALE_BIN_DIR) + "/evoscale-trainer";
  if (access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << trainer;
  Recorder rec;
  TrialLaunch launch;
  launch.trial_name = "studies/1/trials/1";
  launch.limits.memory_bytes = int64_t{4} << 30;
  launch.argv = {trainer, "--synthetic", "40000", "--batch-size", "256", "--embedding-dim", "8",
                 "--hidden", "16", "--threads", "1", "--progress-every", "10", "--seed", "5"};
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, &rec);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& o = (*trial)->Wait();
  ASSERT_EQ(o.kind, TrialOutcome::Kind::kSucceeded) << o.reason;
  ASSERT_TRUE(o.final.has_value());
  EXPECT_GT(o.final->metrics.at("auc"), 0.5);
  EXPECT_GT(o.final->peak_rss_bytes, 0);
  int progress = 0;
  int64_t last_step = 0;
  for (const TrialEvent& e : rec.events()) {
    if (e.kind != TrialEvent::Kind::kProgress) continue;
    ++progress;
    EXPECT_GT(e.step, last_step);
    last_step = e.step;
    EXPECT_TRUE(e.metrics.contains("logloss"));
  }
  EXPECT_GE(progress, 2);
  EXPECT_EQ(o.other_lines, 0);
  EXPECT_GT(o.cpu_seconds, 0);
  EXPECT_GT(o.peak_rss_bytes, 0);
}

}  // namespace
}  // namespace evoscale::trainer_adapter
