// End-to-end: the real evoscaled runs a managed study's trials as Slurm batch jobs on a real
// single-node Slurm cluster (tests/support/slurm_cluster.h), and validates the template's
// runner fields.
#include <signal.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_support.h"
#include "trainer_adapter/internal/slurm_text.h"

namespace evoscale {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::ReadFile;
using ::evoscale::testing::SlurmClusterTest;
using ::evoscale::testing::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::SizeIs;

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// Slurm's completion records of the jobs named `name`, in the order they ended.
std::vector<std::map<std::string, std::string>> CompletedJobsNamed(
    const testing::SlurmCluster& cluster, const std::string& name) {
  std::vector<std::map<std::string, std::string>> jobs;
  const std::string log = ReadFile(cluster.jobcomp_path());
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    auto record = trainer_adapter::internal::ParseSlurmRecord(line);
    if (record["Name"] == name) jobs.push_back(record);
  }
  return jobs;
}

// A managed study whose trials are /bin/sh scripts printing the trainer protocol: two
// progress lines, then the final line with a loss from the parameter x.
v1::Study SlurmStudy(int max_trials) {
  v1::Study study;
  static int serial = 0;
  study.set_display_name(absl::StrCat("slurm-e2e-", ++serial));
  v1::StudySpec* spec = study.mutable_spec();
  v1::MetricSpec* loss = spec->add_metrics();
  loss->set_name("loss");
  loss->set_goal(v1::MetricSpec::MINIMIZE);
  v1::ParameterSpec* x = spec->add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_min(0);
  x->mutable_double_spec()->set_max(1);
  spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  spec->mutable_algorithm()->set_seed(3);
  spec->set_max_trials(max_trials);
  v1::TrialTemplate* t = spec->mutable_trial_template();
  t->set_command("/bin/sh");
  t->add_args("-c");
  t->add_args(
      "for step in 1 2; do echo \"{\\\"event\\\":\\\"progress\\\",\\\"step\\\":$step,"
      "\\\"metrics\\\":{\\\"loss\\\":$1}}\"; sleep 0.2; done; "
      "echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":$1}}\"");
  t->add_args("trial");
  t->add_args("${x}");
  t->set_parallel_trials(2);
  t->set_fixed_resources(true);
  t->mutable_resources()->set_cpu_cores(1);
  t->mutable_resources()->set_memory_bytes(int64_t{96} << 20);
  t->set_runner("slurm");
  t->mutable_slurm()->set_partition("debug");
  t->mutable_slurm()->add_extra_args("--comment=evoscale-e2e");
  return study;
}

class SlurmE2eTest : public SlurmClusterTest {
 protected:
  void SetUp() override {
    SlurmClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    Restart();
  }

  void Restart() {
    server_.reset();
    auto p = EvoscaledProcess::Start(
        dir_.path() + "/evoscale.db",
        {"--slurm-conf", cluster_->conf_path(), "--capacity", "cpu=2,memory=1Gi"});
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
    stub_ = server_->NewStub();
  }

  std::string CreateStudy(const v1::Study& spec) {
    v1::CreateStudyRequest create;
    *create.mutable_study() = spec;
    v1::Study study;
    grpc::Status st = stub_->CreateStudy(Ctx().get(), create, &study);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return study.name();
  }

  // Waits until every one of the study's `n` trials has ended.
  bool AwaitEnded(const std::string& study, int n, absl::Duration timeout) {
    return AwaitCondition(
        [&] {
          int done = 0;
          for (const v1::Trial& t : AllTrials(study)) {
            done += t.state() == v1::Trial::SUCCEEDED || t.state() == v1::Trial::INFEASIBLE;
          }
          return done == n;
        },
        timeout, absl::Milliseconds(200));
  }

  // Slurm's completion records of the jobs named `name`, in the order they ended, once there
  // are `at_least` of them (slurmctld writes a record a moment after the job's end), or what
  // there are after 10 s.
  std::vector<std::map<std::string, std::string>> AwaitJobsNamed(const std::string& name,
                                                                 size_t at_least) {
    AwaitCondition([&] { return JobsNamed(name).size() >= at_least; }, absl::Seconds(10));
    return JobsNamed(name);
  }

  std::vector<std::map<std::string, std::string>> JobsNamed(const std::string& name) {
    return CompletedJobsNamed(*cluster_, name);
  }

  std::vector<v1::Trial> AllTrials(const std::string& study) {
    v1::ListTrialsRequest req;
    req.set_parent(study);
    req.set_page_size(1000);
    v1::ListTrialsResponse resp;
    grpc::Status st = stub_->ListTrials(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return {resp.trials().begin(), resp.trials().end()};
  }

  TempDir dir_;
  std::unique_ptr<EvoscaledProcess> server_;
  std::unique_ptr<v1::StudyService::Stub> stub_;
};

TEST_F(SlurmE2eTest, ManagedStudyRunsEachTrialAsASlurmJobOfItsRequest) {
  v1::CreateStudyRequest create;
  *create.mutable_study() = SlurmStudy(4);
  v1::Study study;
  grpc::Status st = stub_->CreateStudy(Ctx().get(), create, &study);
  ASSERT_TRUE(st.ok()) << st.error_message();

  ASSERT_TRUE(AwaitCondition(
      [&] {
        int done = 0;
        for (const v1::Trial& t : AllTrials(study.name())) {
          done += t.state() == v1::Trial::SUCCEEDED || t.state() == v1::Trial::INFEASIBLE;
        }
        return done == 4;
      },
      absl::Seconds(120)))
      << cluster_->LogTails();

  std::vector<v1::Trial> trials = AllTrials(study.name());
  ASSERT_THAT(trials, SizeIs(4));
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
    EXPECT_EQ(t.measurements_size(), 2) << t.ShortDebugString();
    EXPECT_THAT(t.usage().enforcement(), HasSubstr("slurm job ")) << t.ShortDebugString();
    // Slurm's own record: one job named after the trial, with the trial's request.
    std::vector<std::map<std::string, std::string>> jobs = AwaitJobsNamed(t.name(), 1);
    ASSERT_THAT(jobs, SizeIs(1)) << t.name() << "\n" << ReadFile(cluster_->jobcomp_path());
    EXPECT_THAT(jobs[0], Contains(Pair("JobState", "COMPLETED")));
    EXPECT_THAT(jobs[0], Contains(Pair("Partition", "debug")));
    EXPECT_THAT(jobs[0]["Tres"], HasSubstr("cpu=1,mem=96M"));
  }
}

// evoscaled killed with SIGKILL while its trials' jobs run: after the restart it follows those
// jobs (squeue --name) instead of submitting them again, and the study completes with one
// Slurm job per trial.
TEST_F(SlurmE2eTest, KillNineMidStudyReattachesToTheRunningJobs) {
  v1::Study spec = SlurmStudy(4);
  // Long enough to be running when evoscaled dies.
  spec.mutable_spec()->mutable_trial_template()->set_args(
      1,
      "sleep 3; echo \"{\\\"event\\\":\\\"progress\\\",\\\"step\\\":1,"
      "\\\"metrics\\\":{\\\"loss\\\":$1}}\"; "
      "echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":$1}}\"");
  const std::string study = CreateStudy(spec);
  ASSERT_TRUE(AwaitCondition(
      [&] {
        absl::StatusOr<trainer_adapter::internal::CommandResult> q =
            cluster_->Run({"squeue", "--noheader", "--states=RUNNING", "--format=%j"});
        return q.ok() && absl::StrContains(q->out, study + "/trials/");
      },
      absl::Seconds(60)))
      << cluster_->LogTails();
  server_->Stop(SIGKILL);
  Restart();
  ASSERT_TRUE(AwaitEnded(study, 4, absl::Seconds(120))) << cluster_->LogTails();
  for (const v1::Trial& t : AllTrials(study)) {
    EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
    std::vector<std::map<std::string, std::string>> jobs = AwaitJobsNamed(t.name(), 1);
    ASSERT_THAT(jobs, SizeIs(1)) << t.name() << "\n" << ReadFile(cluster_->jobcomp_path());
    EXPECT_THAT(jobs[0], Contains(Pair("JobState", "COMPLETED")));
  }
}

// A trial over its --mem ends OUT_OF_MEMORY in Slurm and runs again with twice the memory
// (64M, 128M, 256M) until it fits.
TEST_F(SlurmE2eTest, TrialOverItsMemoryIsAnOomAndRunsAgainWithMore) {
  v1::Study spec = SlurmStudy(1);
  v1::TrialTemplate* t = spec.mutable_spec()->mutable_trial_template();
  t->set_command("python3");
  t->clear_args();
  t->add_args("-c");
  t->add_args(
      "import time\nx = bytearray(200 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\n"
      "time.sleep(2)\nprint('{\"event\":\"final\",\"metrics\":{\"loss\":0.5}}')");
  t->mutable_resources()->set_memory_bytes(int64_t{64} << 20);
  const std::string study = CreateStudy(spec);
  ASSERT_TRUE(AwaitEnded(study, 1, absl::Seconds(120))) << cluster_->LogTails();
  std::vector<v1::Trial> trials = AllTrials(study);
  ASSERT_THAT(trials, SizeIs(1));
  EXPECT_EQ(trials[0].state(), v1::Trial::SUCCEEDED) << trials[0].ShortDebugString();
  EXPECT_EQ(trials[0].resources().memory_bytes(), int64_t{256} << 20);
  std::vector<std::map<std::string, std::string>> jobs = AwaitJobsNamed(trials[0].name(), 3);
  ASSERT_THAT(jobs, SizeIs(3)) << ReadFile(cluster_->jobcomp_path());
  EXPECT_THAT(jobs[0], Contains(Pair("JobState", "OUT_OF_MEMORY")));
  EXPECT_THAT(jobs[0]["Tres"], HasSubstr("mem=64M"));
  EXPECT_THAT(jobs[1], Contains(Pair("JobState", "OUT_OF_MEMORY")));
  EXPECT_THAT(jobs[1]["Tres"], HasSubstr("mem=128M"));
  EXPECT_THAT(jobs[2], Contains(Pair("JobState", "COMPLETED")));
  EXPECT_THAT(jobs[2]["Tres"], HasSubstr("mem=256M"));
}

// StopTrial of a trial whose job runs: the job gets SIGTERM and leaves Slurm's queue, and the
// trial completes as a stop ends, with its last measurement.
TEST_F(SlurmE2eTest, StopTrialEndsItsJob) {
  v1::Study spec = SlurmStudy(1);
  spec.mutable_spec()->mutable_trial_template()->set_args(
      1,
      "echo \"{\\\"event\\\":\\\"progress\\\",\\\"step\\\":1,"
      "\\\"metrics\\\":{\\\"loss\\\":$1}}\"; while :; do sleep 0.1; done");
  const std::string study = CreateStudy(spec);
  ASSERT_TRUE(AwaitCondition(
      [&] {
        std::vector<v1::Trial> trials = AllTrials(study);
        return trials.size() == 1 && trials[0].measurements_size() == 1;
      },
      absl::Seconds(60)))
      << cluster_->LogTails();
  const std::string trial = AllTrials(study)[0].name();
  v1::StopTrialRequest stop;
  stop.set_name(trial);
  v1::Trial out;
  grpc::Status st = stub_->StopTrial(Ctx().get(), stop, &out);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(AwaitCondition([&] { return JobsNamed(trial).size() == 1; }, absl::Seconds(60)))
      << cluster_->LogTails();
  // Out of the queue once Slurm has cleaned up after it (COMPLETING comes after the record).
  EXPECT_TRUE(AwaitCondition([&] {
    absl::StatusOr<trainer_adapter::internal::CommandResult> q =
        cluster_->Run({"squeue", "--noheader", "--format=%i", absl::StrCat("--name=", trial)});
    return q.ok() && q->exit_code == 0 && q->out.empty();
  }));
  ASSERT_TRUE(AwaitCondition([&] {
    const v1::Trial::State state = AllTrials(study)[0].state();
    return state != v1::Trial::ACTIVE && state != v1::Trial::STOPPING;
  }));
  const v1::Trial ended = AllTrials(study)[0];
  EXPECT_EQ(ended.state(), v1::Trial::STOPPED) << ended.ShortDebugString();
  EXPECT_EQ(ended.final_measurement().step(), 1) << ended.ShortDebugString();
}

// The real trainer: a study of 12 trials runs as 12 Slurm jobs, each asking Slurm for the
// trial's request, its progress streamed as measurements.
TEST_F(SlurmE2eTest, TwelveRealTrainerTrialsRunAsSlurmJobs) {
  v1::Study spec = SlurmStudy(12);
  v1::StudySpec* s = spec.mutable_spec();
  s->mutable_metrics(0)->set_name("auc");
  s->mutable_metrics(0)->set_goal(v1::MetricSpec::MAXIMIZE);
  s->mutable_parameters(0)->set_name("lr_dense");
  s->mutable_parameters(0)->mutable_double_spec()->set_min(0.0003);
  s->mutable_parameters(0)->mutable_double_spec()->set_max(0.03);
  v1::TrialTemplate* t = s->mutable_trial_template();
  t->set_command(std::string(EVOSCALE_BIN_DIR) + "/evoscale-trainer");
  t->clear_args();
  for (const char* arg :
       {"--synthetic", "20000", "--batch-size", "256", "--embedding-dim", "8", "--hidden", "16",
        "--threads", "1", "--progress-every", "10", "--seed", "5", "--lr-dense", "${lr_dense}"}) {
    t->add_args(arg);
  }
  t->mutable_resources()->set_memory_bytes(int64_t{512} << 20);
  // Right-sized: 512 MiB until three trials have run to their end, then what the load model
  // predicts for each trial's parameters; Slurm gets each trial's request as it stands.
  t->set_fixed_resources(false);
  const std::string study = CreateStudy(spec);
  ASSERT_TRUE(AwaitEnded(study, 12, absl::Seconds(300))) << cluster_->LogTails();
  std::vector<v1::Trial> trials = AllTrials(study);
  ASSERT_THAT(trials, SizeIs(12));
  int right_sized = 0;
  for (const v1::Trial& trial : trials) {
    EXPECT_EQ(trial.state(), v1::Trial::SUCCEEDED) << trial.ShortDebugString();
    EXPECT_GE(trial.measurements_size(), 2) << trial.ShortDebugString();
    EXPECT_GT(trial.final_measurement().metrics().at("auc"), 0.5);
    std::vector<std::map<std::string, std::string>> jobs = AwaitJobsNamed(trial.name(), 1);
    ASSERT_THAT(jobs, SizeIs(1)) << trial.name();
    EXPECT_THAT(jobs[0], Contains(Pair("JobState", "COMPLETED")));
    // The job's allocation, as Slurm recorded it, is the trial's request.
    const int64_t cpus = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(trial.resources().cpu_cores())));
    const int64_t mib = (trial.resources().memory_bytes() + (1 << 20) - 1) >> 20;
    EXPECT_THAT(jobs[0]["Tres"], HasSubstr(absl::StrCat("cpu=", cpus, ",mem=", mib, "M")))
        << trial.ShortDebugString();
    right_sized += trial.resources().memory_bytes() != int64_t{512} << 20 ? 1 : 0;
  }
  EXPECT_GE(right_sized, 1);  // the load model's requests reached Slurm
}

// Validation needs no cluster: evoscaled alone.
// Two evoscaled replicas on one PostgreSQL database (issue 30) sharing the Slurm cluster: the
// owner of a managed study is killed with SIGKILL while its trials' jobs run, and the other
// replica, adopting the study on its scheduler's next pass, follows those same jobs (squeue
// --name: the trial names are the database's, the same on every replica) instead of submitting
// them again. Skipped, saying why, where PostgreSQL is not installed.
class SlurmReplicasE2eTest : public SlurmClusterTest {
 protected:
  void SetUp() override {
    SlurmClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (std::string why = PostgresServer::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    postgres_ = *std::move(pg);
    absl::StatusOr<std::string> uri = postgres_->CreateDatabase("evoscale");
    ASSERT_TRUE(uri.ok()) << uri.status();
    for (const char* name : {"a", "b"}) {
      absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p = EvoscaledProcess::Start(
          *uri, {"--slurm-conf", cluster_->conf_path(), "--capacity", "cpu=2,memory=1Gi",
                 "--lease-seconds", "2", "--telemetry-db",
                 absl::StrCat(dir_.path(), "/", name, ".telemetry.db")});
      ASSERT_TRUE(p.ok()) << p.status();
      replicas_.push_back(*std::move(p));
    }
  }
  void TearDown() override { replicas_.clear(); }  // before their database

  std::vector<v1::Trial> AllTrials(EvoscaledProcess& replica, const std::string& study) {
    v1::ListTrialsRequest req;
    req.set_parent(study);
    req.set_page_size(1000);
    v1::ListTrialsResponse resp;
    if (!replica.NewStub()->ListTrials(Ctx().get(), req, &resp).ok()) return {};
    return {resp.trials().begin(), resp.trials().end()};
  }

  std::vector<std::map<std::string, std::string>> JobsNamed(const std::string& name) {
    return CompletedJobsNamed(*cluster_, name);
  }

  TempDir dir_;
  std::unique_ptr<PostgresServer> postgres_;
  std::vector<std::unique_ptr<EvoscaledProcess>> replicas_;
};

TEST_F(SlurmReplicasE2eTest, TheSurvivingReplicaFollowsTheKilledOwnersSlurmJobs) {
  v1::Study spec = SlurmStudy(2);
  spec.mutable_spec()->mutable_trial_template()->set_args(
      1,
      "sleep 4; echo \"{\\\"event\\\":\\\"progress\\\",\\\"step\\\":1,"
      "\\\"metrics\\\":{\\\"loss\\\":$1}}\"; "
      "echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":$1}}\"");
  v1::CreateStudyRequest create;
  *create.mutable_study() = spec;
  v1::Study study;
  grpc::Status st = replicas_[0]->NewStub()->CreateStudy(Ctx().get(), create, &study);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // Both trials' jobs running under the owner, replica a.
  ASSERT_TRUE(AwaitCondition(
      [&] {
        absl::StatusOr<trainer_adapter::internal::CommandResult> q =
            cluster_->Run({"squeue", "--noheader", "--states=RUNNING", "--format=%j"});
        return q.ok() && absl::StrContains(q->out, study.name() + "/trials/1") &&
               absl::StrContains(q->out, study.name() + "/trials/2");
      },
      absl::Seconds(60)))
      << cluster_->LogTails();
  replicas_[0]->Stop(SIGKILL);
  // Nobody calls the study: replica b's scheduler finds it on its own.
  ASSERT_TRUE(AwaitCondition(
      [&] {
        std::vector<v1::Trial> trials = AllTrials(*replicas_[1], study.name());
        int done = 0;
        for (const v1::Trial& t : trials) done += t.state() == v1::Trial::SUCCEEDED;
        return done == 2;
      },
      absl::Seconds(120), absl::Milliseconds(200)))
      << cluster_->LogTails() << [&] {
           std::string out;
           for (const v1::Trial& t : AllTrials(*replicas_[1], study.name())) {
             out += t.ShortDebugString() + "\n";
           }
           return out;
         }();
  std::vector<v1::Trial> trials = AllTrials(*replicas_[1], study.name());
  ASSERT_THAT(trials, SizeIs(2));
  for (const v1::Trial& t : trials) {
    EXPECT_THAT(t.usage().enforcement(), HasSubstr("(re-attached)")) << t.ShortDebugString();
    // One job per trial: followed, never submitted twice.
    AwaitCondition([&] { return !JobsNamed(t.name()).empty(); }, absl::Seconds(10));
    std::vector<std::map<std::string, std::string>> jobs = JobsNamed(t.name());
    ASSERT_THAT(jobs, SizeIs(1)) << t.name() << "\n" << ReadFile(cluster_->jobcomp_path());
    EXPECT_THAT(jobs[0], Contains(Pair("JobState", "COMPLETED")));
  }
}

class RunnerValidationE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = EvoscaledProcess::Start(dir_.path() + "/evoscale.db", {});
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
    stub_ = server_->NewStub();
  }
  TempDir dir_;
  std::unique_ptr<EvoscaledProcess> server_;
  std::unique_ptr<v1::StudyService::Stub> stub_;
};

TEST_F(RunnerValidationE2eTest, RunnerFieldsAreValidatedNamingTheField) {
  struct Case {
    std::function<void(v1::TrialTemplate*)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::TrialTemplate* t) { t->set_runner("kubernetes"); },
       "study.spec.trial_template.runner: \"kubernetes\" is not local or slurm"},
      {[](v1::TrialTemplate* t) { t->set_runner("local"); },
       "study.spec.trial_template.slurm: set, but the runner is not \"slurm\""},
      {[](v1::TrialTemplate* t) { t->mutable_slurm()->add_extra_args("time=5"); },
       "study.spec.trial_template.slurm.extra_args[1]: \"time=5\" is not an sbatch option "
       "(\"--name=value\" or \"-x\")"},
      {[](v1::TrialTemplate* t) { t->mutable_slurm()->set_partition("a b"); },
       "study.spec.trial_template.slurm.partition: \"a b\" is not a Slurm name"},
      {[](v1::TrialTemplate* t) { (*t->mutable_env())["A-B"] = "1"; },
       "study.spec.trial_template.env: \"A-B\" is not a shell variable name (runner slurm)"},
  };
  for (const Case& c : cases) {
    v1::CreateStudyRequest create;
    *create.mutable_study() = SlurmStudy(1);
    c.edit(create.mutable_study()->mutable_spec()->mutable_trial_template());
    v1::Study out;
    grpc::Status st = stub_->CreateStudy(Ctx().get(), create, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_EQ(st.error_message(), c.message);
  }
}

}  // namespace
}  // namespace evoscale
