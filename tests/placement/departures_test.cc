#include "placement/departures.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "placement/openb.h"

namespace evoscale::placement {
namespace {

PodSpec Timed(const std::string& name, QosClass qos, int num_gpus, int milli, int64_t creation,
              int64_t deletion) {
  PodSpec pod;
  pod.name = name;
  pod.cpu_milli = 1000;
  pod.memory_mib = 1024;
  pod.num_gpus = num_gpus;
  pod.gpu_milli = milli;
  pod.qos = qos;
  pod.creation_time = creation;
  pod.deletion_time = deletion;
  return pod;
}

constexpr QosClass kLs = QosClass::kLatencySensitive;
constexpr QosClass kBe = QosClass::kBestEffort;

// Nodes of `gpus` GPUs each, plenty of CPU and memory.
std::vector<NodeSpec> Nodes(int count, int gpus) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < count; ++i) nodes.push_back({absl::StrCat("node-", i), 64000, 262144, gpus, "T4"});
  return nodes;
}

DeparturesOptions WithPreemption() {
  DeparturesOptions options;
  options.policy = PolicyKind::kBestFit;
  return options;
}

DeparturesOptions FifoWithoutPreemption() {
  DeparturesOptions options;
  options.policy = PolicyKind::kBestFit;
  options.priorities = false;
  options.preemption = false;
  return options;
}

DeparturesReport Replay(const std::vector<NodeSpec>& nodes, const std::vector<PodSpec>& pods,
                        const DeparturesOptions& options) {
  absl::StatusOr<DeparturesReport> report = ReplayDepartures(nodes, pods, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : DeparturesReport{};
}

TEST(DeparturesTest, APodThatDoesNotFitWaitsUntilADepartureFreesRoom) {
  // One GPU: p1 waits 90 s for p0; p2 arrives as p1 leaves and takes its GPU at once.
  const DeparturesReport report = Replay(
      Nodes(1, 1),
      {Timed("p0", kLs, 1, 1000, 0, 100), Timed("p1", kLs, 1, 1000, 10, 200),
       Timed("p2", kLs, 1, 1000, 200, 300)},
      WithPreemption());
  EXPECT_EQ(report.placed_pods, 3);
  EXPECT_EQ(report.never_placed_pods, 0);
  EXPECT_EQ(report.ls_pods, 3);
  EXPECT_EQ(report.delayed_pods, 1);
  EXPECT_EQ(report.ls_delay_median_seconds, 0);
  EXPECT_EQ(report.ls_delay_p99_seconds, 90);
  EXPECT_EQ(report.preemptions, 0);
  EXPECT_EQ(report.end_time, 300);
}

TEST(DeparturesTest, AnLsPodEvictsABestEffortPodWhichRunsAgainLater) {
  // p1 (LS, 3600..5400) evicts p0 (BE, 0..7200) with 3600 s left: 1 GPU-hour; p0 runs again at
  // 5400.
  const std::vector<PodSpec> pods = {Timed("p0", kBe, 1, 1000, 0, 7200),
                                     Timed("p1", kLs, 1, 1000, 3600, 5400)};
  const DeparturesReport report = Replay(Nodes(1, 1), pods, WithPreemption());
  EXPECT_EQ(report.preemptions, 1);
  EXPECT_EQ(report.evicted_pods, 1);
  EXPECT_DOUBLE_EQ(report.evicted_gpu_hours, 1.0);
  EXPECT_EQ(report.ls_delay_median_seconds, 0);
  EXPECT_EQ(report.placed_pods, 2);
  EXPECT_EQ(report.never_placed_pods, 0);
  EXPECT_TRUE(report.preemption);

  // FIFO without preemption: p1 waits for p0, which leaves after p1's deletion_time.
  const DeparturesReport fifo = Replay(Nodes(1, 1), pods, FifoWithoutPreemption());
  EXPECT_EQ(fifo.preemptions, 0);
  EXPECT_EQ(fifo.evicted_gpu_hours, 0);
  EXPECT_EQ(fifo.ls_placed_pods, 0);
  EXPECT_EQ(fifo.never_placed_pods, 1);
  EXPECT_FALSE(fifo.preemption);
}

TEST(DeparturesTest, PreemptionEvictsTheFewestPodsBeforeTheCheapest) {
  // node-0: two BE halves with 500 s left (cost 0.14 GPU-h); node-1: one BE whole with 8000 s
  // left (2.22 GPU-h). One victim beats two.
  const DeparturesReport report = Replay(
      Nodes(2, 1),
      {Timed("a", kBe, 1, 500, 0, 1500), Timed("b", kBe, 1, 500, 0, 1500),
       Timed("c", kBe, 1, 1000, 0, 9000), Timed("ls", kLs, 1, 1000, 1000, 2000)},
      WithPreemption());
  EXPECT_EQ(report.preemptions, 1);
  EXPECT_EQ(report.evicted_pods, 1);
  EXPECT_DOUBLE_EQ(report.evicted_gpu_hours, 8000.0 / 3600);
}

TEST(DeparturesTest, PreemptionTakesTheCheapestOfEquallyFewVictims) {
  const DeparturesReport report = Replay(
      Nodes(2, 1),
      {Timed("long", kBe, 1, 1000, 0, 10000), Timed("short", kBe, 1, 1000, 0, 2000),
       Timed("ls", kLs, 1, 1000, 1000, 3000)},
      WithPreemption());
  EXPECT_EQ(report.evicted_pods, 1);
  EXPECT_DOUBLE_EQ(report.evicted_gpu_hours, 1000.0 / 3600);
}

TEST(DeparturesTest, PreemptionEvictsSeveralPodsOfOneNodeWhenOneIsNotEnough) {
  // Four BE pods fill a 4-GPU node; a 2-GPU LS pod at t=1000 evicts two of them.
  const DeparturesReport report = Replay(
      Nodes(1, 4),
      {Timed("b0", kBe, 1, 1000, 0, 2000), Timed("b1", kBe, 1, 1000, 0, 3000),
       Timed("b2", kBe, 1, 1000, 0, 4000), Timed("b3", kBe, 1, 1000, 0, 5000),
       Timed("ls", kLs, 2, 1000, 1000, 6000)},
      WithPreemption());
  EXPECT_EQ(report.preemptions, 1);
  EXPECT_EQ(report.evicted_pods, 2);
  EXPECT_DOUBLE_EQ(report.evicted_gpu_hours, (1000.0 + 2000.0) / 3600);
}

TEST(DeparturesTest, NeverEvictsPodsOfTheSameOrAHigherClass) {
  const DeparturesReport report = Replay(
      Nodes(1, 1), {Timed("be", kBe, 1, 1000, 0, 100), Timed("be2", kBe, 1, 1000, 10, 50)},
      WithPreemption());
  EXPECT_EQ(report.preemptions, 0);
  EXPECT_EQ(report.never_placed_pods, 1);
}

TEST(DeparturesTest, ThePendingQueueGoesByPriorityThenArrivalUnlessFifo) {
  // When p0 leaves at 100, the LS pod (arrived 20) goes before the BE pod (arrived 10); FIFO
  // takes the BE pod and the LS pod is still waiting at its deletion_time.
  const std::vector<PodSpec> pods = {Timed("p0", kLs, 1, 1000, 0, 100),
                                     Timed("be", kBe, 1, 1000, 10, 1000),
                                     Timed("ls", kLs, 1, 1000, 20, 1000)};
  DeparturesOptions priorities = WithPreemption();
  priorities.preemption = false;
  const DeparturesReport by_priority = Replay(Nodes(1, 1), pods, priorities);
  EXPECT_EQ(by_priority.ls_placed_pods, 2);
  EXPECT_EQ(by_priority.ls_delay_p99_seconds, 80);
  EXPECT_EQ(by_priority.never_placed_pods, 1);
  const DeparturesReport fifo = Replay(Nodes(1, 1), pods, FifoWithoutPreemption());
  EXPECT_EQ(fifo.ls_placed_pods, 1);
  EXPECT_EQ(fifo.ls_delay_p99_seconds, 0);
  EXPECT_EQ(fifo.never_placed_pods, 1);
}

TEST(DeparturesTest, PriorityRanksAreLsGuaranteedBurstableThenBestEffort) {
  EXPECT_EQ(PriorityRank(QosClass::kLatencySensitive), 0);
  EXPECT_EQ(PriorityRank(QosClass::kGuaranteed), 1);
  EXPECT_EQ(PriorityRank(QosClass::kBurstable), 2);
  EXPECT_EQ(PriorityRank(QosClass::kBestEffort), 3);
  EXPECT_EQ(PriorityRank(QosClass::kUnspecified), 3);
}

TEST(DeparturesTest, APodWithoutTimesIsRefusedByName) {
  PodSpec pod = Timed("p0", kLs, 1, 1000, 0, 10);
  pod.creation_time = -1;
  EXPECT_EQ(ReplayDepartures(Nodes(1, 1), {pod}, {}).status(),
            absl::InvalidArgumentError("pod \"p0\": no creation_time"));
}

TEST(DeparturesTest, ADeletionBeforeTheCreationIsRefusedByName) {
  EXPECT_EQ(ReplayDepartures(Nodes(1, 1), {Timed("p0", kLs, 1, 1000, 9, 5)}, {}).status(),
            absl::InvalidArgumentError("pod \"p0\": deletion_time 5 < creation_time 9"));
}

TEST(DeparturesTest, NoPodsIsRefused) {
  EXPECT_EQ(ReplayDepartures(Nodes(1, 1), {}, {}).status(),
            absl::InvalidArgumentError("no pods to replay"));
}

TEST(OpenbTimesTest, ATraceWithoutTimeColumnsNamesTheMissingColumn) {
  EXPECT_EQ(ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,0,0\n",
                           "pods.csv", /*require_times=*/true)
                .status(),
            absl::InvalidArgumentError("pods.csv:1: missing column \"creation_time\""));
}

constexpr char kTimedHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time\n";

TEST(OpenbTimesTest, ADeletionBeforeTheCreationNamesTheLineAndField) {
  EXPECT_EQ(ParseOpenbPods(std::string(kTimedHeader) + "p0,1,1,0,0,LS,0,1\np1,1,1,0,0,BE,9,5\n",
                           "pods.csv", /*require_times=*/true)
                .status(),
            absl::InvalidArgumentError(
                "pods.csv:3: field \"deletion_time\": 5 is before creation_time 9"));
}

TEST(OpenbTimesTest, AnEmptyTimeNamesTheLineAndField) {
  EXPECT_EQ(ParseOpenbPods(std::string(kTimedHeader) + "p0,1,1,0,0,LS,,1\n", "pods.csv",
                           /*require_times=*/true)
                .status(),
            absl::InvalidArgumentError("pods.csv:2: field \"creation_time\": empty"));
  // Without require_times an empty time is "none", as before.
  EXPECT_TRUE(ParseOpenbPods(std::string(kTimedHeader) + "p0,1,1,0,0,LS,,1\n", "pods.csv").ok());
}

}  // namespace
}  // namespace evoscale::placement
