#include "placement/policy.h"

#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/evoscale_policy.h"
#include "tests/placement/requests.h"

namespace evoscale::placement {
namespace {

using ::evoscale::placement::testing::Pod;
using ::evoscale::placement::testing::Typical;

Cluster MakeCluster(const std::vector<NodeSpec>& nodes) {
  absl::StatusOr<Cluster> cluster = Cluster::Create(nodes);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return *std::move(cluster);
}

// A sharing pod of 500 and a whole-GPU pod, as many of each.
FragmentationModel HalfAndWhole() {
  return FragmentationModel({Typical(1000, 1, 500, 0.5), Typical(1000, 1, 1000, 0.5)});
}

TEST(PolicyTest, KindsParseByTheirBindingNames) {
  for (const char* name :
       {"evoscale", "fgd", "bestfit", "packing", "dotprod", "clustering", "random"}) {
    absl::StatusOr<PolicyKind> kind = ParsePolicyKind(name);
    ASSERT_TRUE(kind.ok()) << name;
    EXPECT_EQ(PolicyKindName(*kind), name);
  }
  EXPECT_EQ(ParsePolicyKind("tetris").status(),
            absl::InvalidArgumentError("policy \"tetris\": must be evoscale, fgd, bestfit, "
                                       "packing, dotprod, clustering or random"));
  FragmentationModel model = HalfAndWhole();
  EXPECT_EQ(MakeBaselinePolicy(PolicyKind::kEvoscale, model, 1), nullptr);
}

TEST(PolicyTest, FgdPicksTheNodeAndGpuWhereFragmentationGrowsLeast) {
  Cluster cluster = MakeCluster({{"x", 8000, 1000, 2, "T4"}, {"y", 8000, 1000, 2, "T4"}});
  cluster.Bind(Pod(1000, 1, 500), {1, 0b10});  // y: [1000, 500]
  FragmentationModel model = HalfAndWhole();
  const PodRequest half = Pod(1000, 1, 500);
  // x: either GPU leaves 500 the whole-GPU pods cannot use: +250 -> sigmoid(-0.25) = 43.8.
  FgdChoice on_x = FgdScore(cluster.node(0), half, model);
  EXPECT_EQ(on_x.score, 43);
  EXPECT_EQ(on_x.gpus, 0b01);  // equal scores: the lowest index
  // y: filling its half GPU takes the 250 away: sigmoid(0.25) = 56.2.
  FgdChoice on_y = FgdScore(cluster.node(1), half, model);
  EXPECT_EQ(on_y.score, 56);
  EXPECT_EQ(on_y.gpus, 0b10);
  std::optional<Placement> placement =
      MakeBaselinePolicy(PolicyKind::kFgd, model, 1)->Place(cluster, half);
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->node, 1);
  EXPECT_EQ(placement->gpus, 0b10);
}

TEST(PolicyTest, EqualScoresGoToTheLowestTieRank) {
  Cluster cluster = MakeCluster({{"x", 8000, 1000, 2, "T4"}, {"y", 8000, 1000, 2, "T4"}});
  cluster.Bind(Pod(1000, 1, 500), {1, 0b10});
  FragmentationModel model = HalfAndWhole();
  const PodRequest whole = Pod(1000, 1, 1000);  // no growth on either node: 50 and 50
  EXPECT_EQ(FgdScore(cluster.node(0), whole, model).score, 50);
  EXPECT_EQ(FgdScore(cluster.node(1), whole, model).score, 50);
  std::unique_ptr<Policy> fgd = MakeBaselinePolicy(PolicyKind::kFgd, model, 1);
  EXPECT_EQ(fgd->Place(cluster, whole)->node, 0);
  ASSERT_TRUE(cluster.SetTieRanks({1, 0}).ok());
  EXPECT_EQ(fgd->Place(cluster, whole)->node, 1);
}

TEST(PolicyTest, FgdAndEvoscaleRescoreANodeOnceAPodBindsThere) {
  Cluster cluster = MakeCluster({{"x", 8000, 1000, 2, "T4"}, {"y", 8000, 1000, 2, "T4"}});
  FragmentationModel model = HalfAndWhole();
  const PodRequest half = Pod(1000, 1, 500);
  std::unique_ptr<Policy> fgd = MakeBaselinePolicy(PolicyKind::kFgd, model, 1);
  std::unique_ptr<Policy> evoscale = MakeEvoscalePolicy(model);
  EXPECT_EQ(fgd->Place(cluster, half)->node, 0);  // 43 and 43: the tie rank
  EXPECT_EQ(evoscale->Place(cluster, half)->node, 0);
  cluster.Bind(half, {1, 0b10});  // y: [1000, 500], now 56 for the next half pod
  std::optional<Placement> placement = fgd->Place(cluster, half);
  EXPECT_EQ(placement->node, 1);
  EXPECT_EQ(placement->gpus, 0b10);
  EXPECT_EQ(evoscale->Place(cluster, half)->node, 1);
  // A copy is another cluster: nothing cached for the original answers for it.
  Cluster copy = cluster;
  copy.Bind(half, {1, 0b10});  // y full on GPU 1 in the copy only: [1000, 0]
  EXPECT_EQ(fgd->Place(copy, half)->node, 0);
  EXPECT_EQ(fgd->Place(cluster, half)->node, 1);
}

TEST(PolicyTest, BestFitPicksTheNodeLeftWithTheLeastCpuAndGpu) {
  Cluster cluster = MakeCluster({{"big", 64000, 1000, 8, "T4"}, {"small", 16000, 1000, 2, "T4"}});
  const PodRequest pod = Pod(1000, 1, 1000);
  EXPECT_EQ(BestFitScore(cluster.node(0), pod), 31);  // 1 - (63/128 + 7/8) / 2
  EXPECT_EQ(BestFitScore(cluster.node(1), pod), 87);  // 1 - (15/128 + 1/8) / 2
  FragmentationModel model = HalfAndWhole();
  std::optional<Placement> placement =
      MakeBaselinePolicy(PolicyKind::kBestFit, model, 1)->Place(cluster, pod);
  EXPECT_EQ(placement->node, 1);
  EXPECT_EQ(placement->gpus, 0b01);
}

TEST(PolicyTest, PackingPrefersSharedGpusThenUsedNodesThenEmptyOnes) {
  Cluster cluster = MakeCluster({{"empty", 8000, 1000, 2, "T4"},
                                 {"shared", 8000, 1000, 2, "T4"},
                                 {"used", 8000, 1000, 2, "T4"}});
  cluster.Bind(Pod(100, 1, 400), {1, 0b10});  // shared: [1000, 600]
  cluster.Bind(Pod(100, 1, 800), {2, 0b10});  // used: [1000, 200]
  const PodRequest pod = Pod(1000, 1, 300);
  EXPECT_EQ(PackingScore(cluster.node(0), pod), 31);  // 100/3 - 2 free GPUs
  EXPECT_EQ(PackingScore(cluster.node(1), pod), 94);  // 100 - 60% free on the GPU it shares / 10
  EXPECT_EQ(PackingScore(cluster.node(2), pod), 49);  // 100/2 - 1 free GPU taken
  EXPECT_EQ(PackingScore(cluster.node(0), Pod(1000, 0, 0)), 0);
  FragmentationModel model = HalfAndWhole();
  std::optional<Placement> placement =
      MakeBaselinePolicy(PolicyKind::kPacking, model, 1)->Place(cluster, pod);
  EXPECT_EQ(placement->node, 1);
  EXPECT_EQ(placement->gpus, 0b10);  // best fit: the GPU with 600 left
}

TEST(PolicyTest, DotProductPrefersTheSmallestProductOfFreeAndRequest) {
  Cluster cluster = MakeCluster({{"big", 128000, 1000, 8, "T4"}, {"small", 32000, 1000, 2, "T4"}});
  const PodRequest pod = Pod(16000, 1, 1000);
  EXPECT_EQ(DotProductScore(cluster.node(0), pod), 87);  // 1 - (1/8 + 1/8) / 2
  EXPECT_EQ(DotProductScore(cluster.node(1), pod), 96);  // 1 - (1/32 + 1/32) / 2
  FragmentationModel model = HalfAndWhole();
  EXPECT_EQ(MakeBaselinePolicy(PolicyKind::kDotProd, model, 1)->Place(cluster, pod)->node, 1);
}

TEST(PolicyTest, ClusteringPrefersNodesRunningTheSameGpuKind) {
  Cluster cluster = MakeCluster({{"empty", 8000, 1000, 8, "T4"},
                                 {"same", 8000, 1000, 8, "T4"},
                                 {"other", 8000, 1000, 8, "T4"}});
  cluster.Bind(Pod(100, 1, 1000), {1, 0b1});
  cluster.Bind(Pod(100, 1, 500), {2, 0b1});
  const PodRequest pod = Pod(1000, 1, 1000);
  EXPECT_EQ(ClusteringScore(cluster.node(0), pod), 25);  // idle node: (25, 50]
  EXPECT_EQ(ClusteringScore(cluster.node(1), pod), 78);  // only its own kind: (75, 100]
  EXPECT_EQ(ClusteringScore(cluster.node(2), pod), 1);   // other kinds only: (0, 25]
  FragmentationModel model = HalfAndWhole();
  EXPECT_EQ(MakeBaselinePolicy(PolicyKind::kClustering, model, 1)->Place(cluster, pod)->node, 1);
}

TEST(PolicyTest, RandomPicksFeasibleNodesOnlyAndRepeatsPerSeed) {
  Cluster cluster = MakeCluster(
      {{"a", 8000, 1000, 2, "T4"}, {"tiny", 500, 1000, 2, "T4"}, {"c", 8000, 1000, 2, "T4"}});
  FragmentationModel model = HalfAndWhole();
  const PodRequest pod = Pod(1000, 1, 500);
  std::set<int> seen;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    std::optional<Placement> first =
        MakeBaselinePolicy(PolicyKind::kRandom, model, seed)->Place(cluster, pod);
    std::optional<Placement> again =
        MakeBaselinePolicy(PolicyKind::kRandom, model, seed)->Place(cluster, pod);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->node, again->node);
    EXPECT_EQ(first->gpus, again->gpus);
    seen.insert(first->node);
  }
  EXPECT_EQ(seen, (std::set<int>{0, 2}));
}

TEST(PolicyTest, EveryPolicySaysNothingFitsWhenNothingDoes) {
  Cluster cluster = MakeCluster({{"a", 8000, 1000, 2, "T4"}});
  FragmentationModel model = HalfAndWhole();
  for (PolicyKind kind : {PolicyKind::kFgd, PolicyKind::kBestFit, PolicyKind::kPacking,
                          PolicyKind::kDotProd, PolicyKind::kClustering, PolicyKind::kRandom}) {
    EXPECT_FALSE(MakeBaselinePolicy(kind, model, 1)->Place(cluster, Pod(1000, 4, 1000)))
        << PolicyKindName(kind);
  }
}

}  // namespace
}  // namespace evoscale::placement
