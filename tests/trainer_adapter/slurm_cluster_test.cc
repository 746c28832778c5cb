// The Slurm cluster fixture itself (tests/support/slurm_cluster.h): a batch job runs to its end
// on it, and the fixture leaves nothing running when it goes.
#include "tests/support/slurm_cluster.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace evoscale::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

class SlurmClusterFixtureTest : public SlurmClusterTest {};

TEST_F(SlurmClusterFixtureTest, BatchJobRunsToCompletionAndItsStateReadsBack) {
  const std::string out = absl::StrCat(cluster_->dir(), "/wrap.out");
  absl::StatusOr<trainer_adapter::internal::CommandResult> sbatch = cluster_->Run(
      {"sbatch", "--parsable", "--job-name=fixture-wrap", "--mem=64M", "--cpus-per-task=1",
       absl::StrCat("--output=", out), "--wrap=echo hello from slurm"});
  ASSERT_TRUE(sbatch.ok()) << sbatch.status();
  ASSERT_EQ(sbatch->exit_code, 0) << sbatch->err << cluster_->LogTails();
  const std::string job_id(absl::StripAsciiWhitespace(sbatch->out));
  int64_t id = 0;
  ASSERT_TRUE(absl::SimpleAtoi(job_id, &id)) << sbatch->out;

  absl::StatusOr<std::map<std::string, std::string>> end = cluster_->AwaitJobEnd(job_id);
  ASSERT_TRUE(end.ok()) << end.status() << cluster_->LogTails();
  EXPECT_THAT(*end, Contains(Pair("JobState", "COMPLETED")));
  EXPECT_THAT(*end, Contains(Pair("Name", "fixture-wrap")));
  EXPECT_THAT(*end, Contains(Pair("ExitCode", "0:0")));
  EXPECT_EQ(ReadFile(out), "hello from slurm\n");

  // scontrol still knows it for a while (MinJobAge), with what was asked.
  absl::StatusOr<std::map<std::string, std::string>> shown = cluster_->ShowJob(job_id);
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_THAT(*shown, Contains(Pair("JobState", "COMPLETED")));
  EXPECT_THAT(*shown, Contains(Pair("MinMemoryNode", "64M")));
}

TEST(SlurmClusterLifetimeTest, DestructorStopsEveryDaemonItStarted) {
  if (std::string why = SlurmCluster::UnavailableReason(); !why.empty()) {
    GTEST_SKIP() << "no Slurm cluster here: " << why;
  }
  std::vector<int> pids;
  std::string dir;
  {
    absl::StatusOr<std::unique_ptr<SlurmCluster>> cluster = SlurmCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    dir = (*cluster)->dir();
    for (const char* pid_file : {"munged.pid", "slurmctld.pid", "slurmd.pid"}) {
      int pid = 0;
      ASSERT_TRUE(absl::SimpleAtoi(
          absl::StripAsciiWhitespace(ReadFile(absl::StrCat(dir, "/", pid_file))), &pid))
          << pid_file;
      pids.push_back(pid);
    }
    // A job still running when the cluster goes.
    absl::StatusOr<trainer_adapter::internal::CommandResult> sbatch =
        (*cluster)->Run({"sbatch", "--parsable", "--mem=32M", "--wrap=sleep 600"});
    ASSERT_TRUE(sbatch.ok()) << sbatch.status();
    ASSERT_EQ(sbatch->exit_code, 0) << sbatch->err;
  }
  for (int pid : pids) EXPECT_TRUE(ProcessGone(pid)) << "pid " << pid << " still runs";
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

}  // namespace
}  // namespace evoscale::testing
