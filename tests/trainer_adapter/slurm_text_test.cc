// Slurm's job text (scontrol --oneliner, jobcomp/filetxt lines), and the command runner the
// Slurm runner calls its clients with.
#include "trainer_adapter/internal/slurm_text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"
#include "trainer_adapter/internal/command.h"

namespace evoscale::trainer_adapter::internal {
namespace {

using ::evoscale::testing::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;

// Lines as Slurm 22.05 printed them on a single-node test cluster.
constexpr char kScontrolLine[] =
    "JobId=35471000 JobName=studies/1/trials/7 UserId=root(0) GroupId=root(0) "
    "JobState=OUT_OF_MEMORY Reason=OutOfMemory Dependency=(null) ExitCode=0:125 "
    "TRES=cpu=1,mem=100M,node=1,billing=1 MinMemoryNode=100M CPUs/Task=1 "
    "Command=/tmp/x/a b.sbatch WorkDir=/tmp/x";

TEST(ParseSlurmRecordTest, SplitsKeysAndKeepsValuesWithSpacesAndEqualsSigns) {
  const auto record = ParseSlurmRecord(kScontrolLine);
  EXPECT_THAT(record, Contains(Pair("JobId", "35471000")));
  EXPECT_THAT(record, Contains(Pair("JobName", "studies/1/trials/7")));
  EXPECT_THAT(record, Contains(Pair("JobState", "OUT_OF_MEMORY")));
  EXPECT_THAT(record, Contains(Pair("ExitCode", "0:125")));
  EXPECT_THAT(record, Contains(Pair("TRES", "cpu=1,mem=100M,node=1,billing=1")));
  EXPECT_THAT(record, Contains(Pair("CPUs/Task", "1")));
  EXPECT_THAT(record, Contains(Pair("Command", "/tmp/x/a b.sbatch")));
  EXPECT_THAT(record, Contains(Pair("WorkDir", "/tmp/x")));
}

TEST(ParseSlurmRecordTest, EmptyLineIsAnEmptyRecord) {
  EXPECT_THAT(ParseSlurmRecord(""), IsEmpty());
  EXPECT_THAT(ParseSlurmRecord("no keys here"), IsEmpty());
}

TEST(JobCompRecordsTest, FindsEveryEndOfTheJobAndNoOtherJob) {
  const std::string log =
      "JobId=12 UserId=root(0) Name=a JobState=COMPLETED ExitCode=0:0\n"
      "JobId=123 UserId=root(0) Name=b JobState=FAILED ExitCode=1:0\n"
      "JobId=12 UserId=root(0) Name=a JobState=OUT_OF_MEMORY ExitCode=0:125\n";
  const auto records = JobCompRecords(log, "12");
  ASSERT_THAT(records, SizeIs(2));
  EXPECT_THAT(records.back(), Contains(Pair("JobState", "OUT_OF_MEMORY")));
  EXPECT_THAT(JobCompRecords(log, "1"), IsEmpty());
}

TEST(ParseSlurmMemoryTest, ReadsSlurmsUnits) {
  EXPECT_EQ(*ParseSlurmMemory("100M"), 100 << 20);
  EXPECT_EQ(*ParseSlurmMemory("2G"), int64_t{2} << 30);
  EXPECT_EQ(*ParseSlurmMemory("512K"), 512 << 10);
  EXPECT_EQ(*ParseSlurmMemory("64"), 64 << 20);
  EXPECT_THAT(ParseSlurmMemory("12Q").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "memory \"12Q\": unknown unit"));
  EXPECT_THAT(ParseSlurmMemory("M").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "memory \"M\": not a size"));
}

TEST(RunCommandTest, CapturesOutputErrorAndExitCodeWithTheAddedEnvironment) {
  absl::StatusOr<CommandResult> r =
      RunCommand({"/bin/sh", "-c", "echo \"out $WHO\"; echo err >&2; exit 4"}, {{"WHO", "me"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "out me\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(DescribeFailure({"sh", "x"}, *r), "sh x (exit 4): err");
}

TEST(RunCommandTest, CommandPastItsTimeoutIsKilledAndADeadlineExceeded) {
  EXPECT_THAT(RunCommand({"/bin/sleep", "30"}, {}, absl::Milliseconds(200)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("/bin/sleep 30")));
}

TEST(RunCommandTest, MissingProgramIsNotFound) {
  EXPECT_THAT(RunCommand({"evoscale-no-such-program"}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("evoscale-no-such-program")));
  EXPECT_THAT(RunCommand({}).status(), StatusIs(absl::StatusCode::kInvalidArgument, "argv: empty"));
}

}  // namespace
}  // namespace evoscale::trainer_adapter::internal
