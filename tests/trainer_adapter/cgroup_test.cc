// Tests of trainer_adapter/cgroup.h and the local runner's cgroup mode, on real cgroups and
// real processes. Skipped, with the reason, where this process may make no cgroup.
#include "trainer_adapter/cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale::trainer_adapter {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::ProcessGone;
using ::evoscale::testing::ScopedTempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CgroupRoot>> root = CgroupRoot::Detect("evoscale-test");
    if (!root.ok()) GTEST_SKIP() << "no writable cgroup here: " << root.status();
    root_ = *std::move(root);
  }

  TrialLaunch Shell(const std::string& script, int64_t memory_bytes = 0) {
    TrialLaunch launch;
    launch.trial_name = "studies/1/trials/1";
    launch.argv = {"/bin/sh", "-c", script};
    launch.limits.memory_bytes = memory_bytes;
    return launch;
  }

  std::unique_ptr<CgroupRoot> root_;
  ScopedTempDir dir_;
};

TEST_F(CgroupTest, GroupHoldsTheLimitsAndIsRemovedWithItsProcesses) {
  absl::StatusOr<std::unique_ptr<TrialCgroup>> group = root_->Create(64 << 20, 0.5);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->memory_limit_bytes(), 64 << 20);
  EXPECT_EQ((*group)->cpu_quota_us(), 50000);  // half of the 100 ms period
  const std::string memory_dir = (*group)->memory_dir();
  struct stat st {};
  EXPECT_EQ(stat(memory_dir.c_str(), &st), 0);
  group->reset();
  EXPECT_NE(stat(memory_dir.c_str(), &st), 0) << memory_dir << " was not removed";
}

TEST_F(CgroupTest, OomInsideTheGroupIsRecordedAsOutOfMemory) {
  std::unique_ptr<TrialRunner> runner = NewLocalProcessRunner();
  // 300 MiB written into memory under a 64 MiB limit: the kernel kills it at once, long
  // before a 200 ms sample could see it.
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner->Start(
      Shell("exec python3 -c \"b = b'x' * (300 << 20); print(len(b))\"", 64 << 20), nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& o = (*trial)->Wait();
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kOutOfMemory) << o.reason;
  EXPECT_GE(o.oom_kills, 1);
  EXPECT_THAT(o.reason, StartsWith("OOM-killed in its cgroup: memory limit 67108864 bytes"));
  EXPECT_THAT(o.enforcement, StartsWith("cgroup v1"));
  EXPECT_LE(o.peak_memory_bytes, int64_t{64 << 20});
}

TEST_F(CgroupTest, DoubleForkedGrandchildEndsWithItsTrial) {
  const std::string pid_file = dir_.File("grandchild.pid");
  // The grandchild leaves the trial's process group and session (setsid) and its output
  // pipes: only the cgroup still knows it belongs to the trial.
  const std::string script = absl::StrCat(
      "setsid sh -c 'echo $$ > ", pid_file, "; exec sleep 300' </dev/null >/dev/null 2>&1 & ",
      "while [ ! -s ", pid_file, " ]; do sleep 0.01; done; ",
      "echo '{\"event\":\"final\",\"metrics\":{\"loss\":1}}'");
  for (bool cgroups : {true, false}) {
    SCOPED_TRACE(cgroups ? "in a cgroup" : "sampling");
    unlink(pid_file.c_str());
    std::unique_ptr<TrialRunner> runner =
        NewLocalProcessRunner(LocalRunnerOptions{.use_cgroups = cgroups});
    absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner->Start(Shell(script), nullptr);
    ASSERT_TRUE(trial.ok()) << trial.status();
    const TrialOutcome& o = (*trial)->Wait();
    EXPECT_EQ(o.kind, TrialOutcome::Kind::kSucceeded) << o.reason;
    const pid_t grandchild = ReadPid(pid_file);
    ASSERT_GT(grandchild, 0);
    if (cgroups) {
      EXPECT_THAT(o.enforcement, StartsWith("cgroup v1"));
      EXPECT_TRUE(AwaitCondition([&] { return ProcessGone(grandchild); }, absl::Seconds(10)))
          << "grandchild " << grandchild << " outlived its trial";
    } else {
      // Without a cgroup it escapes: what the cgroup mode is for. Clean up after it.
      EXPECT_THAT(o.enforcement, HasSubstr("cgroups turned off"));
      EXPECT_FALSE(ProcessGone(grandchild));
      kill(grandchild, SIGKILL);
    }
  }
}

TEST_F(CgroupTest, CpuTimeOfEveryProcessIsCounted) {
  std::unique_ptr<TrialRunner> runner = NewLocalProcessRunner();
  // Two short-lived children burn CPU and exit between samples; the cgroup counts them.
  absl::StatusOr<std::unique_ptr<RunningTrial>> trial = runner->Start(
      Shell("for i in 1 2; do python3 -c 'sum(range(3000000))'; done; "
            "echo '{\"event\":\"final\",\"metrics\":{\"loss\":1}}'"),
      nullptr);
  ASSERT_TRUE(trial.ok()) << trial.status();
  const TrialOutcome& o = (*trial)->Wait();
  EXPECT_EQ(o.kind, TrialOutcome::Kind::kSucceeded) << o.reason;
  EXPECT_GT(o.cpu_seconds, 0);
  EXPECT_GT(o.peak_memory_bytes, 0);
  EXPECT_EQ(o.oom_kills, 0);
}

}  // namespace
}  // namespace evoscale::trainer_adapter
