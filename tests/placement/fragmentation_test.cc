#include "placement/fragmentation.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/placement/requests.h"

namespace evoscale::placement {
namespace {

using ::evoscale::placement::testing::Typical;

PodSpec Spec(int64_t cpu, int num_gpus, int milli, std::vector<std::string> models = {}) {
  PodSpec pod;
  pod.name = "p";
  pod.cpu_milli = cpu;
  pod.num_gpus = num_gpus;
  pod.gpu_milli = milli;
  pod.gpu_models = std::move(models);
  return pod;
}

NodeState Node(int64_t cpu, std::vector<int16_t> gpus) {
  NodeState node;
  node.cpu_left = node.cpu_capacity = cpu;
  node.num_gpus = static_cast<int>(gpus.size());
  node.model = 0;
  for (size_t i = 0; i < gpus.size(); ++i) node.gpu_left[i] = gpus[i];
  return node;
}

class TypicalPodsTest : public ::testing::Test {
 protected:
  TypicalPodsTest() : cluster_(*Cluster::Create({{"n", 8000, 1000, 2, "T4"}})) {
    for (int i = 0; i < 3; ++i) pods_.push_back(Spec(1000, 1, 500));
    for (int i = 0; i < 2; ++i) pods_.push_back(Spec(1000, 1, 1000));
    pods_.push_back(Spec(2000, 0, 0));
  }
  Cluster cluster_;
  std::vector<PodSpec> pods_;
};

TEST_F(TypicalPodsTest, TakesTheMostFrequentShapesUntilTheThresholdAndRenormalises) {
  std::vector<TypicalPod> all = TypicalPods(pods_, cluster_);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].request.gpu_milli, 500);
  EXPECT_DOUBLE_EQ(all[0].frequency, 0.5);
  EXPECT_DOUBLE_EQ(all[1].frequency, 2.0 / 6);
  EXPECT_EQ(all[2].request.num_gpus, 0);

  TypicalPodsOptions options;
  options.popularity_threshold = 0.8;  // 3 + 2 of 6 pods cover it
  std::vector<TypicalPod> top = TypicalPods(pods_, cluster_, options);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_DOUBLE_EQ(top[0].frequency, 0.6);
  EXPECT_DOUBLE_EQ(top[1].frequency, 0.4);
}

TEST_F(TypicalPodsTest, EqualCountsPutTheLargerShapeFirstAndGpuWeightCountsWholeGpus) {
  std::vector<PodSpec> pods = {Spec(1000, 1, 1000), Spec(4000, 1, 1000)};
  std::vector<TypicalPod> typical = TypicalPods(pods, cluster_);
  ASSERT_EQ(typical.size(), 2u);
  EXPECT_EQ(typical[0].request.cpu_milli, 4000);

  TypicalPodsOptions weighted;
  weighted.gpu_weight = 1;  // an 8-GPU pod counts as 9
  std::vector<TypicalPod> by_gpus = TypicalPods(
      {Spec(1000, 1, 500), Spec(1000, 1, 500), Spec(1000, 8, 1000)}, cluster_, weighted);
  EXPECT_EQ(by_gpus[0].request.num_gpus, 8);
  EXPECT_DOUBLE_EQ(by_gpus[0].frequency, 9.0 / 11);
}

TEST(FragmentationModelTest, CountsTheMilliEachTypicalPodCannotUse) {
  FragmentationModel model({Typical(1000, 1, 500, 0.5), Typical(1000, 1, 1000, 0.5)});
  EXPECT_DOUBLE_EQ(model.Amount(Node(8000, {1000, 1000})), 0);
  // 300 is too small for both.
  EXPECT_DOUBLE_EQ(model.Amount(Node(8000, {1000, 300})), 300);
  // No GPU can take either: all free milli, for both.
  EXPECT_DOUBLE_EQ(model.Amount(Node(8000, {300, 200})), 500);
  // Too little CPU for either.
  EXPECT_DOUBLE_EQ(model.Amount(Node(500, {1000, 1000})), 2000);
  // The memo answers the same for the same multiset of free milli.
  EXPECT_DOUBLE_EQ(model.Amount(Node(8000, {300, 1000})), 300);
}

TEST(FragmentationModelTest, PodsWithoutGpusOrOfOtherModelsMakeAllFreeMilliFragment) {
  FragmentationModel cpu_only({Typical(1000, 0, 0, 1.0)});
  EXPECT_DOUBLE_EQ(cpu_only.Amount(Node(8000, {1000, 300})), 1300);
  TypicalPod elsewhere = Typical(1000, 1, 100, 1.0);
  elsewhere.request.any_model = false;
  elsewhere.request.model_mask = 0b10;  // the node is model 0
  EXPECT_DOUBLE_EQ(FragmentationModel({elsewhere}).Amount(Node(8000, {1000, 300})), 1300);
  EXPECT_DOUBLE_EQ(cpu_only.Amount(Node(8000, {})), 0);
}

}  // namespace
}  // namespace evoscale::placement
