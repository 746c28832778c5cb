#include "placement/evoscale_policy.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/placement/requests.h"

namespace evoscale::placement {
namespace {

using ::evoscale::placement::testing::Pod;
using ::evoscale::placement::testing::Typical;

TEST(EvoscalePolicyTest, ASharingPodTakesTheTightestOfTheGpusThatTie) {
  absl::StatusOr<Cluster> cluster = Cluster::Create({{"n", 8000, 1000, 3, "T4"}});
  ASSERT_TRUE(cluster.ok());
  cluster->Bind(Pod(100, 1, 600), {0, 0b010});
  cluster->Bind(Pod(100, 1, 700), {0, 0b100});  // [1000, 400, 300]
  FragmentationModel model({Typical(1000, 1, 1000, 1.0)});
  const PodRequest pod = Pod(100, 1, 100);
  // GPU 1 or 2: the whole-GPU pods lose 100 less either way (-100); FGD takes the lower index,
  // we the GPU with less room, keeping the larger gap.
  EXPECT_EQ(FgdScore(cluster->node(0), pod, model).gpus, 0b010);
  std::optional<Placement> placement = MakeEvoscalePolicy(model)->Place(*cluster, pod);
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->gpus, 0b100);
}

TEST(EvoscalePolicyTest, APodWithoutGpusGoesWhereTheLeastGpuIsFreeAmongFgdTies) {
  absl::StatusOr<Cluster> cluster =
      Cluster::Create({{"free", 16000, 1000, 2, "T4"}, {"busy", 16000, 1000, 2, "T4"}});
  ASSERT_TRUE(cluster.ok());
  cluster->Bind(Pod(1000, 1, 1000), {1, 0b10});
  FragmentationModel model({Typical(1000, 1, 500, 0.5), Typical(1000, 1, 1000, 0.5)});
  const PodRequest cpu_pod = Pod(2000, 0, 0);
  // No fragmentation grows on either (FGD scores 50 and 50, and takes the first by tie rank).
  EXPECT_EQ(MakeBaselinePolicy(PolicyKind::kFgd, model, 1)->Place(*cluster, cpu_pod)->node, 0);
  EXPECT_EQ(MakeEvoscalePolicy(model)->Place(*cluster, cpu_pod)->node, 1);
  EvoscalePolicyOptions none;
  none.secondary = EvoscalePolicyOptions::Secondary::kNone;
  EXPECT_EQ(MakeEvoscalePolicy(model, none)->Place(*cluster, cpu_pod)->node, 0);
  EvoscalePolicyOptions spread;
  spread.secondary = EvoscalePolicyOptions::Secondary::kSpread;
  EXPECT_EQ(MakeEvoscalePolicy(model, spread)->Place(*cluster, cpu_pod)->node, 0);
}

TEST(EvoscalePolicyTest, TiesOnTheExactGrowthGoToTheSecondObjectiveThenTheTieRank) {
  absl::StatusOr<Cluster> cluster =
      Cluster::Create({{"a", 8000, 1000, 2, "T4"}, {"b", 8000, 1000, 2, "T4"}});
  ASSERT_TRUE(cluster.ok());
  cluster->Bind(Pod(100, 1, 990), {0, 0b01});      // a: [10, 1000]
  cluster->Bind(Pod(100, 1, 980), {1, 0b01});      // b: [20, 1000]
  ASSERT_TRUE(cluster->SetTieRanks({1, 0}).ok());  // b comes first
  FragmentationModel model({Typical(1000, 1, 1000, 1.0)});
  const PodRequest pod = Pod(100, 1, 5);
  // Into the small gaps: -5 on either node (the other GPU would cost +995), a tie. Nothing
  // else: the tie rank (b); packing: the node left with less free GPU (a).
  EvoscalePolicyOptions exact;
  exact.fgd_bins = false;
  exact.secondary = EvoscalePolicyOptions::Secondary::kNone;
  std::optional<Placement> placement = MakeEvoscalePolicy(model, exact)->Place(*cluster, pod);
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->node, 1);
  EXPECT_EQ(placement->gpus, 0b01);
  exact.secondary = EvoscalePolicyOptions::Secondary::kPack;
  placement = MakeEvoscalePolicy(model, exact)->Place(*cluster, pod);
  EXPECT_EQ(placement->node, 0);
  EXPECT_EQ(placement->gpus, 0b01);
}

TEST(EvoscalePolicyTest, SaysNothingFitsWhenNothingDoes) {
  absl::StatusOr<Cluster> cluster = Cluster::Create({{"a", 8000, 1000, 2, "T4"}});
  FragmentationModel model({Typical(1000, 1, 1000, 1.0)});
  EXPECT_FALSE(MakeEvoscalePolicy(model)->Place(*cluster, Pod(9000, 0, 0)).has_value());
}

}  // namespace
}  // namespace evoscale::placement
