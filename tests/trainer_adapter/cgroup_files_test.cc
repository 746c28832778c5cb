// The cgroup files' text formats, v1 and v2, as the kernel writes them (documented in
// Documentation/admin-guide/cgroup-v2.rst and cgroup-v1/): strings here, because these
// machines mount cgroup v1 only and the v2 path cannot run on them.
#include "trainer_adapter/internal/cgroup_files.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace evoscale::trainer_adapter::internal {
namespace {

using ::evoscale::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kV1Cgroup[] =
    "12:memory:/process_api/42\n"
    "11:cpu,cpuacct:/process_api/42\n"
    "1:name=systemd:/init.scope\n";
constexpr char kV1Mounts[] =
    "30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "31 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n";
// A container whose v2 mount's root is its own group: /proc/self/cgroup names the path from
// the host's root.
constexpr char kV2Cgroup[] = "0::/system.slice/evoscaled.service\n";
constexpr char kV2Mounts[] =
    "25 1 0:22 / /proc rw - proc proc rw\n"
    "26 1 0:23 /system.slice /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate\n";

TEST(CgroupFilesTest, FindsTheV1GroupOfEachController) {
  EXPECT_EQ(*V1GroupFolder("memory", kV1Cgroup, kV1Mounts),
            "/sys/fs/cgroup/memory/process_api/42");
  EXPECT_EQ(*V1GroupFolder("cpuacct", kV1Cgroup, kV1Mounts),
            "/sys/fs/cgroup/cpu,cpuacct/process_api/42");
  EXPECT_THAT(V1GroupFolder("memory", kV2Cgroup, kV2Mounts).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("\"memory\"")));
}

TEST(CgroupFilesTest, FindsTheV2GroupBelowItsMountsRoot) {
  EXPECT_EQ(*V2GroupFolder(kV2Cgroup, kV2Mounts), "/sys/fs/cgroup/evoscaled.service");
  EXPECT_EQ(*V2GroupFolder("0::/\n", "9 1 0:5 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            "/sys/fs/cgroup");
  EXPECT_THAT(V2GroupFolder(kV1Cgroup, kV1Mounts).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("0::/path")));
  EXPECT_THAT(V2GroupFolder(kV2Cgroup, kV1Mounts).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cgroup2")));
}

TEST(CgroupFilesTest, ReadsKeyedNumberAndCpuMaxFiles) {
  // v2 memory.events, cpu.stat; v1 memory.oom_control.
  EXPECT_EQ(KeyedValue("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
                       "oom_kill"),
            2);
  EXPECT_EQ(KeyedValue("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
                       "usage_usec"),
            1500000);
  EXPECT_EQ(KeyedValue("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", "oom_kill"), 1);
  EXPECT_EQ(KeyedValue("oom 1\n", "oom_kill"), -1);
  EXPECT_EQ(NumberOrMax("268435456\n"), 268435456);
  EXPECT_EQ(NumberOrMax("max\n"), -1);
  EXPECT_EQ(CpuMaxQuota("150000 100000\n"), 150000);
  EXPECT_EQ(CpuMaxQuota("max 100000\n"), -1);
  EXPECT_TRUE(HasController("cpuset cpu io memory pids\n", "memory"));
  EXPECT_FALSE(HasController("cpuset io pids\n", "cpu"));
  EXPECT_FALSE(HasController("cpuset\n", "cpu"));
}

}  // namespace
}  // namespace evoscale::trainer_adapter::internal
