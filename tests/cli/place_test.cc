// Tests of `evoscale place` (service/cli/place_commands.cc): its flags, its JSON and table, and
// its usage errors, through Run() in process (the command calls no server).

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/cli/cli.h"

namespace evoscale::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct RunResult {
  int code;
  std::string out;
  std::string err;
};

RunResult RunCli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = Run(args, {}, out, err);
  return {code, out.str(), err.str()};
}

// A file of this test's own: ctest runs the suite's tests as processes side by side, and a
// shared name let one truncate a file another was reading.
std::string WriteFile(const std::string& name, const std::string& contents) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = absl::StrCat(::testing::TempDir(), "/", test->name(), ".", name);
  std::ofstream(path) << contents;
  return path;
}

class PlaceCommandTest : public ::testing::Test {
 protected:
  PlaceCommandTest() {
    std::string nodes = "sn,cpu_milli,memory_mib,gpu,model\n";
    for (int i = 0; i < 50; ++i) absl::StrAppend(&nodes, "n", i, ",32000,131072,2,T4\n");
    nodes_ = WriteFile("place_nodes.csv", nodes);
    pods_ = WriteFile("place_pods.csv",
                      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                      "a,4000,1024,1,1000\nb,2000,1024,1,500\nc,2000,1024,1,300\n"
                      "d,8000,1024,2,1000\ne,6000,1024,0,0\nf,1000,1024,1,700\n");
  }
  std::vector<std::string> Place(std::vector<std::string> more) const {
    std::vector<std::string> args = {"place", "--pods", pods_, "--nodes", nodes_};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
  std::string nodes_;
  std::string pods_;
};

TEST_F(PlaceCommandTest, ParsesItsFlags) {
  absl::StatusOr<CommandLine> line =
      ParseCommandLine(Place({"--policy", "fgd", "--seed", "7", "--tune", "1.1"}), {});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->command, "place");
  EXPECT_EQ(line->arguments.place.pods, pods_);
  EXPECT_EQ(line->arguments.place.nodes, nodes_);
  EXPECT_EQ(line->arguments.place.options.policy, placement::PolicyKind::kFgd);
  EXPECT_EQ(line->arguments.place.options.seed, 7u);
  EXPECT_EQ(line->arguments.place.options.tune, 1.1);
  line = ParseCommandLine(Place({}), {});
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->arguments.place.options.policy, placement::PolicyKind::kEvoscale);
  EXPECT_EQ(line->arguments.place.options.seed, 42u);
  EXPECT_EQ(line->arguments.place.options.tune, 1.3);
}

TEST_F(PlaceCommandTest, JsonHoldsAPointPerPercentOfArrivalUnderTheBindingNames) {
  RunResult result = RunCli(Place({"--policy", "bestfit", "--seed", "3", "--json"}));
  ASSERT_EQ(result.code, 0) << result.err;
  nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["policy"], "bestfit");
  EXPECT_EQ(json["seed"], 3);
  EXPECT_EQ(json["total_gpus"], 100);
  EXPECT_EQ(json["original_pods"], 6);
  EXPECT_EQ(json["placed_pods"].get<int64_t>() + json["failed_pods"].get<int64_t>(),
            json["submitted_pods"].get<int64_t>());
  const nlohmann::json& points = json["points"];
  ASSERT_FALSE(points.empty());
  int previous = -1;
  for (const nlohmann::json& point : points) {
    for (const char* key : {"arrived_percent", "allocated_percent", "unallocated_percent",
                            "fragmentation_amount", "fragmentation_ratio", "failed_pods",
                            "gpu_utilization_stddev", "cpu_utilization_stddev"}) {
      EXPECT_TRUE(point.contains(key)) << key;
    }
    EXPECT_GT(point["arrived_percent"].get<int>(), previous);
    previous = point["arrived_percent"].get<int>();
    EXPECT_DOUBLE_EQ(
        point["allocated_percent"].get<double>() + point["unallocated_percent"].get<double>(), 100);
  }
  EXPECT_TRUE(json["unallocated_percent_at_100"].is_number());
  EXPECT_TRUE(json["gpu_utilization_stddev_at_100"].is_number());
  EXPECT_TRUE(json["secondary"].is_null());  // not evoscale
}

TEST_F(PlaceCommandTest, SecondaryPicksEvoscalesTieRuleAndOnlyEvoscales) {
  RunResult result = RunCli(Place({"--secondary", "spread", "--json"}));
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(nlohmann::json::parse(result.out)["secondary"], "spread");
  result = RunCli(Place({"--json"}));
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(nlohmann::json::parse(result.out)["secondary"], "cpupods");
  result = RunCli(Place({"--policy", "fgd", "--secondary", "pack"}));
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("--secondary applies only with --policy evoscale"));
  result = RunCli(Place({"--secondary", "balance"}));
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("--secondary: secondary \"balance\": must be cpupods, pack, "
                                    "spread, usedfirst or none"));
}

TEST_F(PlaceCommandTest, TheTableShowsArrivalsInTensFromFifty) {
  RunResult result = RunCli(Place({"--policy", "evoscale"}));
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("policy evoscale, seed 42: "));
  EXPECT_THAT(result.out,
              HasSubstr("ARRIVED%  ALLOCATED%  UNALLOCATED%  FRAG_RATIO%  FAILED_PODS  GPU_UTIL_SD"));
  EXPECT_THAT(result.out, HasSubstr("\n100 "));
}

TEST_F(PlaceCommandTest, DeparturesOnATraceWithoutTimesExitTwoNamingTheColumn) {
  RunResult result = RunCli(Place({"--departures"}));
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat("--pods: ", pods_,
                                                 ":1: missing column \"creation_time\"")));
  EXPECT_TRUE(result.out.empty());
}

TEST_F(PlaceCommandTest, DeparturesReportDelaysPreemptionsAndEvictedGpuHours) {
  // 50 nodes of 2 GPUs; 100 BE pods fill them until t=7200, an LS pod at 3600 evicts one.
  std::string pods =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time\n";
  for (int i = 0; i < 100; ++i) absl::StrAppend(&pods, "be", i, ",1000,1024,1,1000,BE,0,7200\n");
  absl::StrAppend(&pods, "ls,1000,1024,1,1000,LS,3600,5400\n");
  const std::string timed = WriteFile("place_timed_pods.csv", pods);
  RunResult result = RunCli({"place", "--pods", timed, "--nodes", nodes_, "--departures",
                             "--policy", "bestfit", "--json"});
  ASSERT_EQ(result.code, 0) << result.err;
  nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["policy"], "bestfit");
  EXPECT_EQ(json["preemption"], true);
  EXPECT_EQ(json["preemptions"], 1);
  EXPECT_EQ(json["evicted_pods"], 1);
  EXPECT_DOUBLE_EQ(json["evicted_gpu_hours"].get<double>(), 1.0);
  EXPECT_EQ(json["ls_delay_median_seconds"], 0);
  EXPECT_EQ(json["never_placed_pods"], 0);

  result = RunCli({"place", "--pods", timed, "--nodes", nodes_, "--departures", "--policy",
                   "bestfit", "--no-preemption", "--fifo", "--json"});
  ASSERT_EQ(result.code, 0) << result.err;
  json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["preemption"], false);
  EXPECT_EQ(json["priorities"], false);
  EXPECT_EQ(json["preemptions"], 0);
  EXPECT_EQ(json["evicted_gpu_hours"], 0);
  EXPECT_EQ(json["ls_placed_pods"], 0);
  EXPECT_EQ(json["never_placed_pods"], 1);

  result = RunCli({"place", "--pods", timed, "--nodes", nodes_, "--departures"});
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("policy evoscale, departures, priorities, preemption: "));
  EXPECT_THAT(result.out, HasSubstr("LS_DELAY_P50_S"));
}

TEST_F(PlaceCommandTest, DeparturesRefuseADeletionBeforeTheCreationNamingLineAndField) {
  const std::string timed = WriteFile(
      "place_backwards_pods.csv",
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time\n"
      "a,1000,1024,1,1000,LS,0,10\nb,1000,1024,1,1000,BE,50,40\n");
  RunResult result = RunCli({"place", "--pods", timed, "--nodes", nodes_, "--departures"});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat(
                              "--pods: ", timed,
                              ":3: field \"deletion_time\": 40 is before creation_time 50")));
}

TEST_F(PlaceCommandTest, PreemptionFlagsNeedDepartures) {
  RunResult result = RunCli(Place({"--no-preemption"}));
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("--no-preemption and --fifo apply only with --departures"));
}

TEST_F(PlaceCommandTest, BadFlagsAndFilesExitTwoNamingThem) {
  RunResult result = RunCli(Place({"--policy", "tetris"}));
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("--policy: policy \"tetris\": must be evoscale, fgd, "));
  result = RunCli(Place({"--tune", "-1"}));
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("--tune: \"-1\" is not a number in (0, 100]"));
  result = RunCli({"place", "--nodes", nodes_});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr("--pods is required"));
  std::string bad = WriteFile("place_bad_pods.csv",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,4000,1024,x,1000\n");
  result = RunCli({"place", "--pods", bad, "--nodes", nodes_});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat("--pods: ", bad,
                                                 ":2: field \"num_gpu\": \"x\" is not an "
                                                 "integer")));
  result = RunCli({"place", "--pods", pods_, "--nodes", pods_});
  EXPECT_EQ(result.code, 2);
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat("--nodes: ", pods_, ":1: missing column \"sn\"")));
}

}  // namespace
}  // namespace evoscale::cli
