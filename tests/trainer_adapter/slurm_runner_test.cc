// The Slurm runner on a real single-node Slurm cluster (tests/support/slurm_cluster.h): what
// it asks Slurm for, what reaches the observer, stop, out of memory, and re-attaching.
#include "trainer_adapter/slurm_runner.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_support.h"

namespace evoscale::trainer_adapter {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::ReadFile;
using ::evoscale::testing::SlurmCluster;
using ::evoscale::testing::SlurmClusterOptions;
using ::evoscale::testing::SlurmClusterTest;
using ::evoscale::testing::StatusIs;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr int64_t kMiB = int64_t{1} << 20;

class Recorder : public TrialObserver {
 public:
  void OnEvent(const TrialEvent& e) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
  }
  std::vector<TrialEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<TrialEvent> events_ ABSL_GUARDED_BY(mu_);
};

// A trial that is a /bin/sh script.
TrialLaunch ShellTrial(const std::string& name, const std::string& script) {
  TrialLaunch launch;
  launch.trial_name = name;
  launch.argv = {"/bin/sh", "-c", script};
  launch.limits.cpu_cores = 1;
  launch.limits.memory_bytes = 128 * kMiB;
  return launch;
}

// Prints the trainer protocol: a log line, three progress lines, the final line.
constexpr char kProtocolScript[] = R"sh(
echo "starting (not a protocol line)"
for step in 1 2 3; do
  echo "{\"event\":\"progress\",\"step\":$step,\"examples\":$((step * 100)),\"metrics\":{\"auc\":0.$((5 + step))}}"
  sleep 0.2
done
echo "{\"event\":\"final\",\"examples_per_s\":1000,\"metrics\":{\"auc\":0.9}}"
)sh";

class SlurmRunnerTest : public SlurmClusterTest {
 protected:
  void SetUp() override {
    SlurmClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    runner_ = NewRunner();
    ASSERT_NE(runner_, nullptr);
  }

  std::unique_ptr<TrialRunner> NewRunner() {
    SlurmRunnerOptions options;
    options.slurm_conf = cluster_->conf_path();
    options.output_dir = cluster_->dir();
    options.poll_every = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<TrialRunner>> runner = NewSlurmRunner(options);
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  // The job's JobState, as scontrol says now ("" when it cannot say).
  std::string JobState(const std::string& job_id) {
    absl::StatusOr<std::map<std::string, std::string>> job = cluster_->ShowJob(job_id);
    return job.ok() ? (*job)["JobState"] : "";
  }

  // The ids of this cluster's jobs named `name` still queued or running.
  std::vector<std::string> QueuedJobsNamed(const std::string& name) {
    absl::StatusOr<internal::CommandResult> q =
        cluster_->Run({"squeue", "--noheader", "--format=%i", absl::StrCat("--name=", name)});
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return {};
    return absl::StrSplit(q->out, '\n', absl::SkipWhitespace());
  }

  std::unique_ptr<TrialRunner> runner_;
};

TEST_F(SlurmRunnerTest, JobAsksSlurmForTheTrialsMemoryAndCpus) {
  TrialLaunch launch = ShellTrial("studies/1/trials/1", kProtocolScript);
  launch.limits.cpu_cores = 1.5;            // whole CPUs: 2
  launch.limits.memory_bytes = 192 * kMiB;  // 192M
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kSucceeded) << outcome.reason;

  // Slurm's own record of the job.
  absl::StatusOr<std::map<std::string, std::string>> job = cluster_->ShowJob((*trial)->job_id());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_THAT(*job, Contains(Pair("JobName", "studies/1/trials/1")));
  EXPECT_THAT(*job, Contains(Pair("MinMemoryNode", "192M")));
  EXPECT_THAT(*job, Contains(Pair("CPUs/Task", "2")));
  EXPECT_THAT(*job, Contains(Pair("NumCPUs", "2")));
  EXPECT_THAT(*job, Contains(Pair("JobState", "COMPLETED")));
}

// processes = 2: one job of two tasks (Slurm's record says so), run by mpirun in the allocation.
TEST_F(SlurmRunnerTest, ATrialOfSeveralProcessesIsAJobOfAsManyTasksUnderMpirun) {
  if (access("/usr/bin/mpirun", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/mpirun";
  TrialLaunch launch = ShellTrial(
      "studies/1/trials/9",
      "echo \"rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE in job $SLURM_JOB_ID\" >&2; "
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then "
      "echo '{\"event\":\"final\",\"metrics\":{\"auc\":0.8}}'; fi");
  launch.processes = 2;
  launch.limits.cpu_cores = 2;
  launch.limits.memory_bytes = 256 * kMiB;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kSucceeded) << outcome.reason << "\n" << outcome.stderr_tail;
  EXPECT_THAT(outcome.stderr_tail, HasSubstr("rank 0 of 2 in job " + (*trial)->job_id()));
  EXPECT_THAT(outcome.stderr_tail, HasSubstr("rank 1 of 2 in job " + (*trial)->job_id()));
  absl::StatusOr<std::map<std::string, std::string>> job = cluster_->ShowJob((*trial)->job_id());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_THAT(*job, Contains(Pair("NumTasks", "2")));
  EXPECT_THAT(*job, Contains(Pair("CPUs/Task", "1")));
  // Memory per CPU (--mem would be per node): the job's 256 MiB over its 2 CPUs, wherever its
  // tasks land.
  EXPECT_THAT(*job, Contains(Pair("MinMemoryCPU", "128M")));
}

TEST_F(SlurmRunnerTest, ProgressLinesArriveAsEventsAndTheFinalLineEndsTheTrial) {
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial =
      runner_->Start(ShellTrial("studies/1/trials/2", kProtocolScript), &recorder);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kSucceeded) << outcome.reason;
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.events, 4);
  EXPECT_EQ(outcome.other_lines, 1);
  ASSERT_TRUE(outcome.final.has_value());
  EXPECT_THAT(outcome.final->metrics, ElementsAre(Pair("auc", 0.9)));
  EXPECT_THAT(
      recorder.events(),
      ElementsAre(Field(&TrialEvent::step, 1), Field(&TrialEvent::step, 2),
                  Field(&TrialEvent::step, 3), Field(&TrialEvent::kind, TrialEvent::Kind::kFinal)));
  EXPECT_THAT(recorder.events()[1].metrics, ElementsAre(Pair("auc", 0.7)));
}

TEST_F(SlurmRunnerTest, RealTrainerRunsAsABatchJobAndStreamsItsProgress) {
  const std::string trainer = std::string(EVOSCALE_BIN_DIR) + "/evoscale-trainer";
  if (access(trainer.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << trainer;
  Recorder recorder;
  TrialLaunch launch;
  launch.trial_name = "studies/1/trials/8";
  launch.argv = {trainer, "--synthetic", "40000", "--batch-size", "256", "--embedding-dim",
                 "8",     "--hidden",    "16",    "--threads",    "1",   "--progress-every",
                 "10",    "--seed",      "5"};
  launch.limits.cpu_cores = 1;
  launch.limits.memory_bytes = int64_t{1} << 30;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, &recorder);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& outcome = (*trial)->Wait();
  ASSERT_EQ(outcome.kind, TrialOutcome::Kind::kSucceeded) << outcome.reason;
  ASSERT_TRUE(outcome.final.has_value());
  EXPECT_GT(outcome.final->metrics.at("auc"), 0.5);
  EXPECT_EQ(outcome.peak_memory_bytes, outcome.final->peak_rss_bytes);
  EXPECT_GT(outcome.peak_memory_bytes, 0);
  int progress = 0;
  int64_t last_step = 0;
  for (const TrialEvent& e : recorder.events()) {
    if (e.kind != TrialEvent::Kind::kProgress) continue;
    ++progress;
    EXPECT_GT(e.step, last_step);
    last_step = e.step;
  }
  EXPECT_GE(progress, 2);
  EXPECT_EQ(recorder.events().back().kind, TrialEvent::Kind::kFinal);
}

TEST_F(SlurmRunnerTest, TrialEnvironmentReachesTheJob) {
  TrialLaunch launch = ShellTrial(
      "studies/1/trials/3",
      R"(echo "{\"event\":\"final\",\"metrics\":{\"x\":$X}}"; echo "$EVOSCALE_TRIAL $EVOSCALE_MEMORY_BYTES" >&2; exit 3)");
  launch.env["X"] = "1.5";
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kFailed);
  EXPECT_EQ(outcome.exit_code, 3);
  ASSERT_TRUE(outcome.final.has_value());
  EXPECT_THAT(outcome.final->metrics, ElementsAre(Pair("x", 1.5)));
  EXPECT_THAT(outcome.reason, HasSubstr("FAILED"));
  EXPECT_THAT(outcome.reason, HasSubstr(absl::StrCat("stderr: studies/1/trials/3 ", 128 * kMiB)));
}

TEST_F(SlurmRunnerTest, StopSendsTermToTheTrialAndEndsTheJob) {
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial =
      runner_->Start(ShellTrial("studies/1/trials/4",
                                "trap 'echo got TERM >&2; exit 143' TERM; "
                                R"(echo '{"event":"progress","step":1,"metrics":{}}'; )"
                                "while :; do sleep 0.1; done"),
                     &recorder);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const std::string job_id = (*trial)->job_id();
  // Its trap is set once it has said so.
  ASSERT_TRUE(AwaitCondition([&] { return recorder.events().size() == 1; }))
      << JobState(job_id) << cluster_->LogTails();
  (*trial)->Stop(absl::Seconds(30));
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kStopped);
  EXPECT_THAT(outcome.stderr_tail, HasSubstr("got TERM"));
  // Out of the queue once Slurm has cleaned up after it (COMPLETING follows the end).
  EXPECT_TRUE(AwaitCondition([&] { return QueuedJobsNamed("studies/1/trials/4").empty(); }));
  absl::StatusOr<std::map<std::string, std::string>> end = cluster_->AwaitJobEnd(job_id);
  EXPECT_TRUE(end.ok()) << end.status();
}

TEST_F(SlurmRunnerTest, StopCancelsAJobThatIgnoresTermAfterTheGrace) {
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial =
      runner_->Start(ShellTrial("studies/1/trials/5",
                                "trap '' TERM; "
                                R"(echo '{"event":"progress","step":1,"metrics":{}}'; )"
                                "while :; do sleep 0.1; done"),
                     &recorder);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const std::string job_id = (*trial)->job_id();
  ASSERT_TRUE(AwaitCondition([&] { return recorder.events().size() == 1; })) << JobState(job_id);
  (*trial)->Stop(absl::Seconds(1));
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kStopped);
  absl::StatusOr<std::map<std::string, std::string>> end = cluster_->AwaitJobEnd(job_id);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_THAT(*end, Contains(Pair("JobState", "CANCELLED")));
}

TEST_F(SlurmRunnerTest, RestartedRunnerReattachesToTheRunningJobInsteadOfSubmittingAnother) {
  TrialLaunch launch = ShellTrial(
      "studies/1/trials/6",
      R"(echo '{"event":"progress","step":1,"metrics":{"auc":0.5}}'; while [ ! -e "$GO" ]; do sleep 0.1; done; echo '{"event":"final","metrics":{"auc":0.8}}')");
  const std::string go = absl::StrCat(cluster_->dir(), "/go");
  launch.env["GO"] = go;
  absl::StatusOr<std::unique_ptr<RunningTrial>> first = runner_->Start(launch, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string job_id = (*first)->job_id();
  ASSERT_TRUE(AwaitCondition([&] { return JobState(job_id) == "RUNNING"; })) << JobState(job_id);

  // A second runner, as evoscaled has after a restart, asked to run the same trial.
  std::unique_ptr<TrialRunner> restarted = NewRunner();
  ASSERT_NE(restarted, nullptr);
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<RunningTrial>> second = restarted->Start(launch, &recorder);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->job_id(), job_id);
  EXPECT_THAT(QueuedJobsNamed("studies/1/trials/6"), ElementsAre(job_id));
  // What the job printed before the restart reaches the new observer too.
  ASSERT_TRUE(AwaitCondition([&] { return recorder.events().size() == 1; }));

  // The trial ends on its own: both follow the one job to its end.
  { std::ofstream touch(go); }
  EXPECT_EQ((*second)->Wait().kind, TrialOutcome::Kind::kSucceeded) << (*second)->Wait().reason;
  EXPECT_EQ((*first)->Wait().kind, TrialOutcome::Kind::kSucceeded) << (*first)->Wait().reason;
  EXPECT_EQ(recorder.events().size(), 2u);
  // Slurm ran one job of that name.
  EXPECT_EQ(ReadFile(cluster_->jobcomp_path()).find("Name=studies/1/trials/6 "),
            ReadFile(cluster_->jobcomp_path()).rfind("Name=studies/1/trials/6 "));
}

TEST_F(SlurmRunnerTest, PartitionAccountAndExtraArgumentsReachSbatch) {
  SlurmRunnerOptions options;
  options.slurm_conf = cluster_->conf_path();
  options.output_dir = cluster_->dir();
  options.partition = "debug";
  options.account = "research";
  options.extra_args = {"--time=7", "--comment=from-evoscale"};
  absl::StatusOr<std::unique_ptr<TrialRunner>> runner = NewSlurmRunner(options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial =
      (*runner)->Start(ShellTrial("studies/2/trials/1", kProtocolScript), nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  EXPECT_EQ((*trial)->Wait().kind, TrialOutcome::Kind::kSucceeded) << (*trial)->Wait().reason;
  absl::StatusOr<std::map<std::string, std::string>> job = cluster_->ShowJob((*trial)->job_id());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_THAT(*job, Contains(Pair("Partition", "debug")));
  EXPECT_THAT(*job, Contains(Pair("Account", "research")));
  EXPECT_THAT(*job, Contains(Pair("TimeLimit", "00:07:00")));
  EXPECT_THAT(*job, Contains(Pair("Comment", "from-evoscale")));
}

TEST_F(SlurmRunnerTest, GpuRequestIsAGresRequestThatANodeWithoutGpusRefuses) {
  TrialLaunch launch = ShellTrial("studies/2/trials/2", kProtocolScript);
  launch.limits.gpus = 1;
  EXPECT_THAT(runner_->Start(launch, nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--gres=gpu:1")));
}

TEST_F(SlurmRunnerTest, JobTheControllerForgetsIsFailedAsVanished) {
  Recorder recorder;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(
      ShellTrial(
          "studies/2/trials/3",
          R"(echo '{"event":"progress","step":1,"metrics":{}}'; while :; do sleep 0.1; done)"),
      &recorder);
  ASSERT_TRUE(trial.ok()) << trial.status();
  ASSERT_TRUE(AwaitCondition([&] { return recorder.events().size() == 1; }));
  // The controller comes back without its state: neither it nor the completion log knows the
  // job any more.
  ASSERT_TRUE(cluster_->RestartController(/*clear_state=*/true).ok()) << cluster_->LogTails();
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kFailed);
  EXPECT_THAT(outcome.reason,
              HasSubstr(absl::StrCat("Slurm job ", (*trial)->job_id(),
                                     " vanished: neither scontrol nor the job completion log ",
                                     cluster_->jobcomp_path(), " knows it")));
}

// Over-memory jobs under both ways the fixture can have Slurm enforce --mem.
class SlurmRunnerMemoryTest
    : public SlurmRunnerTest,
      public ::testing::WithParamInterface<SlurmClusterOptions::MemoryEnforcement> {
 protected:
  void SetUp() override {
    if (GetParam() == SlurmClusterOptions::MemoryEnforcement::kCgroup) {
      if (std::string why = SlurmCluster::CgroupUnavailableReason(); !why.empty()) {
        GTEST_SKIP() << "no task/cgroup here: " << why;
      }
    }
    SlurmRunnerTest::SetUp();
  }
  SlurmClusterOptions cluster_options() const override {
    SlurmClusterOptions options;
    options.memory = GetParam();
    return options;
  }
};

TEST_P(SlurmRunnerMemoryTest, JobOverItsMemoryIsAnOutOfMemoryOutcome) {
  // 400 MiB held for 5 s (OverMemoryKill samples every second) under --mem=100M.
  TrialLaunch launch;
  launch.trial_name = "studies/1/trials/7";
  launch.argv = {
      "python3", "-c",
      "import time\nx = bytearray(400 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\n"
      "time.sleep(5)\nprint('{\"event\":\"final\",\"metrics\":{}}')"};
  launch.limits.cpu_cores = 1;
  launch.limits.memory_bytes = 100 * kMiB;
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner_->Start(launch, nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& outcome = (*trial)->Wait();
  EXPECT_EQ(outcome.kind, TrialOutcome::Kind::kOutOfMemory)
      << outcome.reason << "\n"
      << outcome.stderr_tail << cluster_->LogTails();
  EXPECT_THAT(outcome.reason, HasSubstr("memory limit 104857600 bytes"));
  EXPECT_THAT(outcome.reason, HasSubstr("--mem=100M"));
  EXPECT_EQ(outcome.oom_kills, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Enforcement, SlurmRunnerMemoryTest,
    ::testing::Values(SlurmClusterOptions::MemoryEnforcement::kCgroup,
                      SlurmClusterOptions::MemoryEnforcement::kOverMemoryKill),
    [](const ::testing::TestParamInfo<SlurmClusterOptions::MemoryEnforcement>& info) {
      return info.param == SlurmClusterOptions::MemoryEnforcement::kCgroup ? "TaskCgroup"
                                                                           : "OverMemoryKill";
    });

TEST(SlurmRunnerStartTest, RunnerWithoutAReachableControllerIsAFailedPrecondition) {
  if (std::string why = SlurmCluster::UnavailableReason(); !why.empty()) {
    GTEST_SKIP() << "no Slurm clients here: " << why;
  }
  ::evoscale::testing::ScopedTempDir dir;
  SlurmRunnerOptions options;
  options.slurm_conf = dir.File("missing-slurm.conf");
  options.output_dir = dir.path();
  options.command_timeout = absl::Seconds(3);
  EXPECT_THAT(NewSlurmRunner(options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the Slurm controller does not answer")));
  options.output_dir = dir.File("nowhere");
  EXPECT_THAT(NewSlurmRunner(options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("output_dir")));
}

}  // namespace
}  // namespace evoscale::trainer_adapter
