#include "placement/cluster.h"

#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/placement/requests.h"

namespace evoscale::placement {
namespace {

using ::evoscale::placement::testing::Pod;

NodeState Node(int64_t cpu, std::vector<int16_t> gpus, int model = 0) {
  NodeState node;
  node.cpu_left = node.cpu_capacity = cpu;
  node.memory_left = 1 << 20;
  node.num_gpus = static_cast<int>(gpus.size());
  node.model = gpus.empty() ? -1 : model;
  for (size_t i = 0; i < gpus.size(); ++i) node.gpu_left[i] = gpus[i];
  return node;
}

TEST(ClusterTest, FitsChecksCpuMemoryModelAndRoomOnEnoughGpus) {
  NodeState node = Node(4000, {1000, 300});
  EXPECT_TRUE(Fits(node, Pod(4000, 1, 1000)));
  EXPECT_FALSE(Fits(node, Pod(4001, 0, 0)));
  EXPECT_FALSE(Fits(node, Pod(1000, 2, 1000)));
  EXPECT_TRUE(Fits(node, Pod(1000, 1, 300)));
  EXPECT_FALSE(Fits(Node(4000, {200, 300}), Pod(1000, 1, 301)));
  PodRequest memory_hungry = Pod(1000, 0, 0);
  memory_hungry.memory_mib = (1 << 20) + 1;
  EXPECT_FALSE(Fits(node, memory_hungry));
  PodRequest other_model = Pod(1000, 1, 1000);
  other_model.any_model = false;
  other_model.model_mask = 0b10;
  EXPECT_FALSE(Fits(node, other_model));
  EXPECT_TRUE(Fits(Node(4000, {1000}, 1), other_model));
  EXPECT_TRUE(Fits(Node(4000, {}), Pod(1000, 0, 0)));
  EXPECT_FALSE(Fits(Node(4000, {}), Pod(1000, 1, 100)));
}

TEST(ClusterTest, GpuChoicesFollowTheSimulator) {
  NodeState node = Node(8000, {600, 1000, 400, 1000});
  EXPECT_EQ(LowestFreeGpus(node, 2), 0b1010);
  EXPECT_EQ(BestFitGpus(node, Pod(0, 1, 350)), 0b0100);  // the least room that fits
  EXPECT_EQ(BestFitGpus(node, Pod(0, 1, 500)), 0b0001);
  EXPECT_EQ(BestFitGpus(node, Pod(0, 2, 1000)), 0b1010);
  EXPECT_EQ(BestFitGpus(node, Pod(0, 0, 0)), 0);
  // Sub packs: ascending free milli, stable; the first that fits takes the pod.
  NodeState packed = PackedWithPod(node, Pod(1000, 1, 500));
  EXPECT_EQ(packed.gpu_left[0], 100);
  EXPECT_EQ(packed.cpu_left, 7000);
  EXPECT_EQ(packed.pods_by_gpu_kind[0], 1);
}

TEST(ClusterTest, BindKeepsTheUsedMilliAndThePodKinds) {
  absl::StatusOr<Cluster> cluster =
      Cluster::Create({{"a", 8000, 1000, 2, "T4"}, {"b", 8000, 1000, 1, "V100"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(cluster->total_gpus(), 3);
  EXPECT_EQ(cluster->models(), (std::vector<std::string>{"T4", "V100"}));
  cluster->Bind(Pod(1000, 2, 1000), {0, 0b11});
  cluster->Bind(Pod(1000, 1, 250), {1, 0b1});
  EXPECT_EQ(cluster->used_gpu_milli(), 2250);
  EXPECT_EQ(cluster->node(0).pods_by_gpu_kind[2], 1);
  EXPECT_EQ(cluster->node(1).pods_by_gpu_kind[0], 1);
  EXPECT_EQ(cluster->node(1).gpu_left[0], 750);
  EXPECT_EQ(cluster->node(0).cpu_left, 7000);
}

TEST(ClusterTest, UnbindGivesBackWhatBindTook) {
  absl::StatusOr<Cluster> cluster = Cluster::Create({{"a", 8000, 1000, 2, "T4"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const NodeState empty = cluster->node(0);
  cluster->Bind(Pod(1000, 1, 250), {0, 0b10});
  cluster->Bind(Pod(2000, 1, 1000), {0, 0b01});
  cluster->Unbind(Pod(1000, 1, 250), {0, 0b10});
  EXPECT_EQ(cluster->used_gpu_milli(), 1000);
  EXPECT_EQ(cluster->node(0).gpu_left[1], 1000);
  EXPECT_EQ(cluster->node(0).pods_by_gpu_kind[0], 0);
  cluster->Unbind(Pod(2000, 1, 1000), {0, 0b01});
  EXPECT_EQ(cluster->used_gpu_milli(), 0);
  EXPECT_EQ(cluster->node(0).cpu_left, empty.cpu_left);
  EXPECT_EQ(cluster->node(0).gpu_left, empty.gpu_left);
  EXPECT_EQ(cluster->node(0).pods_by_gpu_kind, empty.pods_by_gpu_kind);
  EXPECT_EQ(cluster->node_version(0), 4u);
}

TEST(ClusterTest, ResolveTurnsModelNamesIntoTheClustersBits) {
  absl::StatusOr<Cluster> cluster =
      Cluster::Create({{"a", 8000, 1000, 2, "T4"}, {"b", 8000, 1000, 1, "V100"}});
  ASSERT_TRUE(cluster.ok());
  PodSpec spec;
  spec.num_gpus = 1;
  spec.gpu_milli = 1000;
  spec.gpu_models = {"V100", "A100"};
  PodRequest pod = cluster->Resolve(spec);
  EXPECT_FALSE(pod.any_model);
  EXPECT_EQ(pod.model_mask, 0b10u);
  spec.gpu_models = {"A100"};  // a model no node has: the pod fits nowhere
  EXPECT_EQ(cluster->Resolve(spec).model_mask, 0u);
  EXPECT_FALSE(Fits(cluster->node(0), cluster->Resolve(spec)));
}

TEST(ClusterTest, CreateRejectsBadNodesNamingThem) {
  EXPECT_EQ(Cluster::Create({{"big", 8000, 1000, 9, "T4"}}).status(),
            absl::InvalidArgumentError("node \"big\": 9 GPUs: must be 0..8"));
  EXPECT_EQ(Cluster::Create({{"anon", 8000, 1000, 1, ""}}).status(),
            absl::InvalidArgumentError("node \"anon\": GPUs without a model"));
  EXPECT_EQ(Cluster::Create({{"neg", -1, 1000, 1, "T4"}}).status(),
            absl::InvalidArgumentError("node \"neg\": negative cpu or memory"));
}

TEST(ClusterTest, TieRanksMustBeAPermutation) {
  absl::StatusOr<Cluster> cluster =
      Cluster::Create({{"a", 8000, 1000, 1, "T4"}, {"b", 8000, 1000, 1, "T4"}});
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->tie_rank(1), 1);
  EXPECT_EQ(cluster->SetTieRanks({0, 0}),
            absl::InvalidArgumentError("tie ranks: 0 out of range or twice"));
  EXPECT_EQ(cluster->SetTieRanks({0}), absl::InvalidArgumentError("1 tie ranks for 2 nodes"));
  EXPECT_TRUE(cluster->SetTieRanks({1, 0}).ok());
  EXPECT_EQ(cluster->tie_rank(0), 1);
}

TEST(ClusterTest, QosClassesParseByTheirOpenbNames) {
  EXPECT_EQ(*ParseQosClass("LS"), QosClass::kLatencySensitive);
  EXPECT_EQ(*ParseQosClass("BE"), QosClass::kBestEffort);
  EXPECT_EQ(*ParseQosClass(""), QosClass::kUnspecified);
  EXPECT_EQ(QosClassName(QosClass::kGuaranteed), "Guaranteed");
  EXPECT_EQ(ParseQosClass("VIP").status(),
            absl::InvalidArgumentError("qos \"VIP\": must be LS, Guaranteed, Burstable or BE"));
}

}  // namespace
}  // namespace evoscale::placement
