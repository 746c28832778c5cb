#include "placement/replay.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::placement {
namespace {

PodSpec Spec(const std::string& name, int64_t cpu, int num_gpus, int milli) {
  PodSpec pod;
  pod.name = name;
  pod.cpu_milli = cpu;
  pod.memory_mib = 1024;
  pod.num_gpus = num_gpus;
  pod.gpu_milli = milli;
  return pod;
}

// 8 nodes, 24 GPUs; a workload of 14.5 GPUs in whole, shared, multi-GPU and CPU pods.
class ReplayTest : public ::testing::Test {
 protected:
  ReplayTest() {
    for (int i = 0; i < 8; ++i) {
      nodes_.push_back({absl::StrCat("node-", i), i < 4 ? 32000 : 16000, 131072, i < 4 ? 4 : 2,
                        i % 2 == 0 ? "T4" : "V100"});
    }
    for (int i = 0; i < 6; ++i) pods_.push_back(Spec(absl::StrCat("whole-", i), 4000, 1, 1000));
    for (int i = 0; i < 9; ++i) pods_.push_back(Spec(absl::StrCat("half-", i), 2000, 1, 500));
    pods_.push_back(Spec("pair", 8000, 2, 1000));
    pods_.push_back(Spec("quad", 8000, 4, 1000));
    pods_.push_back(Spec("cpu-0", 6000, 0, 0));
    pods_.push_back(Spec("cpu-1", 3000, 0, 0));
    PodSpec picky = Spec("picky", 1000, 1, 250);
    picky.gpu_models = {"V100"};
    pods_.push_back(picky);
  }

  int64_t TotalGpuMilli(const std::vector<PodSpec>& pods) const {
    int64_t total = 0;
    for (const PodSpec& pod : pods) total += pod.TotalGpuMilli();
    return total;
  }

  std::vector<NodeSpec> nodes_;
  std::vector<PodSpec> pods_;
};

TEST_F(ReplayTest, TuningResamplesUntilTheGpuRequestReachesTuneTimesTheCluster) {
  Rng rng(42);
  std::vector<PodSpec> workload = TunedWorkload(pods_, 24, 1.3, rng);
  const int64_t total = TotalGpuMilli(workload);
  EXPECT_LE(total, 31200);         // 1.3 x 24 GPUs
  EXPECT_GT(total, 31200 - 4000);  // stopped by a pod of at most 1000 per GPU, 4 GPUs
  // The originals come first, shuffled; then the copies, named after them.
  std::vector<std::string> first;
  for (size_t i = 0; i < pods_.size(); ++i) first.push_back(workload[i].name);
  std::vector<std::string> originals;
  for (const PodSpec& pod : pods_) originals.push_back(pod.name);
  EXPECT_NE(first, originals);
  std::sort(first.begin(), first.end());
  std::sort(originals.begin(), originals.end());
  EXPECT_EQ(first, originals);
  ASSERT_GT(workload.size(), pods_.size());
  EXPECT_THAT(workload[pods_.size()].name, ::testing::HasSubstr("-tuned-0"));
}

TEST_F(ReplayTest, TuningBelowTheWorkloadDropsPods) {
  Rng rng(7);
  std::vector<PodSpec> workload = TunedWorkload(pods_, 24, 0.25, rng);
  EXPECT_LE(TotalGpuMilli(workload), 6000);
  EXPECT_LT(workload.size(), pods_.size());
}

TEST_F(ReplayTest, EveryPolicyKeepsTheAccounts) {
  for (PolicyKind kind :
       {PolicyKind::kEvoscale, PolicyKind::kFgd, PolicyKind::kBestFit, PolicyKind::kPacking,
        PolicyKind::kDotProd, PolicyKind::kClustering, PolicyKind::kRandom}) {
    PlacementReplayOptions options;
    options.policy = kind;
    absl::StatusOr<PlacementReport> report = ReplayPlacement(nodes_, pods_, options);
    ASSERT_TRUE(report.ok()) << report.status();
    SCOPED_TRACE(report->policy);
    EXPECT_EQ(report->policy, PolicyKindName(kind));
    EXPECT_EQ(report->total_gpus, 24);
    EXPECT_EQ(report->placed_pods + report->failed_pods, report->submitted_pods);
    EXPECT_GT(report->failed_pods, 0);  // 130% cannot all fit
    EXPECT_NEAR(report->arrived_percent, 130, 100.0 * 4000 / 24000);
    EXPECT_LE(report->allocated_percent, 100);
    ASSERT_FALSE(report->points.empty());
    int previous = -1;
    int64_t failed = 0;
    for (const ReplayPoint& point : report->points) {
      EXPECT_GT(point.arrived_percent, previous);
      previous = point.arrived_percent;
      EXPECT_DOUBLE_EQ(point.allocated_percent + point.unallocated_percent, 100);
      EXPECT_LE(point.allocated_percent, point.arrived_percent + 1.5);
      EXPECT_GE(point.failed_pods, failed);
      failed = point.failed_pods;
      EXPECT_GE(point.fragmentation_amount, 0);
      EXPECT_GE(point.fragmentation_ratio, 0);
      EXPECT_LE(point.fragmentation_ratio, 100 + 1e-9);
    }
    EXPECT_EQ(report->points.back().arrived_percent,
              static_cast<int>(std::nearbyint(report->arrived_percent)));
  }
}

TEST_F(ReplayTest, ASeedGivesTheSameReplayAndAnotherSeedAnother) {
  PlacementReplayOptions options;
  options.policy = PolicyKind::kFgd;
  options.seed = 3;
  absl::StatusOr<PlacementReport> first = ReplayPlacement(nodes_, pods_, options);
  absl::StatusOr<PlacementReport> again = ReplayPlacement(nodes_, pods_, options);
  ASSERT_TRUE(first.ok() && again.ok());
  ASSERT_EQ(first->points.size(), again->points.size());
  for (size_t i = 0; i < first->points.size(); ++i) {
    EXPECT_EQ(first->points[i].allocated_percent, again->points[i].allocated_percent);
    EXPECT_EQ(first->points[i].fragmentation_amount, again->points[i].fragmentation_amount);
    EXPECT_EQ(first->points[i].failed_pods, again->points[i].failed_pods);
  }
  bool any_differs = false;
  for (uint64_t seed = 4; seed < 12 && !any_differs; ++seed) {
    options.seed = seed;
    absl::StatusOr<PlacementReport> other = ReplayPlacement(nodes_, pods_, options);
    ASSERT_TRUE(other.ok());
    any_differs = other->submitted_gpu_milli != first->submitted_gpu_milli ||
                  other->points.size() != first->points.size() ||
                  other->points[10].allocated_percent != first->points[10].allocated_percent;
  }
  EXPECT_TRUE(any_differs);
}

TEST_F(ReplayTest, PointAtFindsAPercentOfArrival) {
  PlacementReplayOptions options;
  absl::StatusOr<PlacementReport> report = ReplayPlacement(nodes_, pods_, options);
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->PointAt(100).has_value());
  EXPECT_EQ(report->PointAt(100)->arrived_percent, 100);
  EXPECT_FALSE(report->PointAt(1000).has_value());
}

TEST_F(ReplayTest, UniformityIsTheSpreadOfTheNodesSharesInUse) {
  // Two one-GPU nodes of 4 CPUs and one CPU node; one pod of a whole GPU and 1 CPU. Tuned to
  // half the cluster's 2 GPUs the workload is that pod alone: arrival ends at 50%.
  const std::vector<NodeSpec> nodes = {
      {"a", 4000, 8192, 1, "T4"}, {"b", 4000, 8192, 1, "T4"}, {"cpu", 2000, 8192, 0, ""}};
  PlacementReplayOptions options;
  options.tune = 0.5;
  absl::StatusOr<PlacementReport> report =
      ReplayPlacement(nodes, {Spec("whole", 1000, 1, 1000)}, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->placed_pods, 1);
  std::optional<ReplayPoint> point = report->PointAt(50);
  ASSERT_TRUE(point.has_value());
  // GPU shares in use 1 and 0 over the GPU nodes: 50 points; CPU shares 0.25, 0, 0 over all.
  EXPECT_DOUBLE_EQ(point->gpu_utilization_stddev, 50);
  EXPECT_NEAR(point->cpu_utilization_stddev, 100 * std::sqrt(2.0) / 12, 1e-9);
  EXPECT_EQ(report->secondary, "cpupods");
}

TEST_F(ReplayTest, SpreadingTiesBalancesTheNodesMoreThanPacking) {
  // Only whole-GPU pods on identical nodes: every placement grows fragmentation alike, so the
  // tie rule alone decides, and spreading must leave the nodes more alike than packing.
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back({absl::StrCat("n", i), 32000, 131072, 4, "T4"});
  std::vector<PodSpec> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(Spec(absl::StrCat("w", i), 1000, 1, 1000));
  PlacementReplayOptions options;
  options.tune = 0.25;  // the 6 pods, 25% of the 24 GPUs
  options.evoscale.fgd_bins = false;
  options.evoscale.secondary = EvoscalePolicyOptions::Secondary::kPack;
  absl::StatusOr<PlacementReport> packed = ReplayPlacement(nodes, pods, options);
  options.evoscale.secondary = EvoscalePolicyOptions::Secondary::kSpread;
  absl::StatusOr<PlacementReport> spread = ReplayPlacement(nodes, pods, options);
  ASSERT_TRUE(packed.ok() && spread.ok());
  ASSERT_EQ(spread->secondary, "spread");
  const std::optional<ReplayPoint> packed_end = packed->PointAt(25);
  const std::optional<ReplayPoint> spread_end = spread->PointAt(25);
  ASSERT_TRUE(packed_end && spread_end);
  EXPECT_LT(spread_end->gpu_utilization_stddev, packed_end->gpu_utilization_stddev);
  // One pod on each of the 6 nodes: every node a quarter used.
  EXPECT_NEAR(spread_end->gpu_utilization_stddev, 0, 1e-6);
}

TEST(SecondaryTest, NamesRoundTripAndABadNameIsNamed) {
  using Secondary = EvoscalePolicyOptions::Secondary;
  for (Secondary secondary : {Secondary::kCpuPodsPack, Secondary::kPack, Secondary::kSpread,
                              Secondary::kUsedFirst, Secondary::kNone}) {
    EXPECT_EQ(ParseSecondary(SecondaryName(secondary)).value(), secondary);
  }
  EXPECT_EQ(ParseSecondary("balance").status(),
            absl::InvalidArgumentError(
                "secondary \"balance\": must be cpupods, pack, spread, usedfirst or none"));
}

TEST_F(ReplayTest, RejectsBadInput) {
  PlacementReplayOptions options;
  options.tune = 0;
  EXPECT_EQ(ReplayPlacement(nodes_, pods_, options).status(),
            absl::InvalidArgumentError("tune 0: must be > 0"));
  options.tune = 1.3;
  EXPECT_EQ(ReplayPlacement(nodes_, {}, options).status(),
            absl::InvalidArgumentError("no pods to replay"));
  EXPECT_EQ(ReplayPlacement({{"cpu", 8000, 1000, 0, ""}}, pods_, options).status(),
            absl::InvalidArgumentError("the cluster has no GPUs"));
  EXPECT_EQ(ReplayPlacement({{"big", 8000, 1000, 16, "T4"}}, pods_, options).status(),
            absl::InvalidArgumentError("node \"big\": 16 GPUs: must be 0..8"));
}

}  // namespace
}  // namespace evoscale::placement
