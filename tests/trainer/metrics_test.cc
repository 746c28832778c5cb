#include "trainer/metrics.h"

#include <cmath>

#include "gtest/gtest.h"

namespace evoscale::trainer {
namespace {

TEST(ExactAucTest, PerfectAndReversedRankings) {
  EXPECT_DOUBLE_EQ(ExactAuc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(ExactAuc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
}

TEST(ExactAucTest, KnownRankingCountsConcordantPairs) {
  // Positives at scores 0.35 and 0.8; negatives 0.1, 0.4, 0.7. Pairs (pos > neg): 0.35 beats
  // 0.1 only; 0.8 beats all three -> 4 of 6.
  EXPECT_NEAR(ExactAuc({0.1f, 0.35f, 0.4f, 0.7f, 0.8f}, {0, 1, 0, 0, 1}), 4.0 / 6.0, 1e-12);
}

TEST(ExactAucTest, TiesCountOneHalf) {
  EXPECT_DOUBLE_EQ(ExactAuc({0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 0, 1}), 0.5);
  // One positive tied with one of two negatives, above the other: (1 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(ExactAuc({0.3f, 0.6f, 0.6f}, {0, 0, 1}), 0.75);
}

TEST(ExactAucTest, OneClassIsUndefined) {
  EXPECT_TRUE(std::isnan(ExactAuc({0.1f, 0.2f}, {1, 1})));
  EXPECT_TRUE(std::isnan(ExactAuc({}, {})));
}

TEST(LogLossTest, MatchesTheDefinition) {
  const float z = 0.7f;
  const double p = 1 / (1 + std::exp(-0.7));
  EXPECT_NEAR(LogLossFromLogits({z, z}, {1, 0}), -(std::log(p) + std::log(1 - p)) / 2, 1e-6);
  // Stable for large logits.
  EXPECT_NEAR(LogLossFromLogits({100.0f}, {1}), 0.0, 1e-12);
  EXPECT_NEAR(LogLossFromLogits({-100.0f}, {1}), 100.0, 1e-6);
}

TEST(BinaryMetricsTest, AccumulatesAndClears) {
  BinaryMetrics m;
  const float logits[] = {-1, 1}, labels[] = {0, 1};
  m.Add(logits, labels, 2);
  EXPECT_EQ(m.count(), 2u);
  EXPECT_DOUBLE_EQ(m.Auc(), 1.0);
  m.Clear();
  EXPECT_EQ(m.count(), 0u);
}

TEST(ProcessMemoryTest, ReportsResidentMemory) {
  EXPECT_GT(CurrentRssBytes(), 0u);
  EXPECT_GE(PeakRssBytes(), CurrentRssBytes() / 2);
}

}  // namespace
}  // namespace evoscale::trainer
