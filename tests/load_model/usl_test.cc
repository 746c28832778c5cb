#include "load_model/usl.h"

#include <cmath>

#include <vector>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

TEST(UslTest, RecoversParametersFromSyntheticData) {
  const UslModel truth{100.0, 0.05, 0.001, 0};
  std::vector<ThroughputPoint> points;
  for (int n = 1; n <= 32; n *= 2) {
    for (int rep = 0; rep < 3; ++rep) {
      // Deterministic +-1% "noise".
      const double noise = 1.0 + 0.01 * (rep - 1);
      points.push_back({static_cast<double>(n), truth.Throughput(n) * noise});
    }
  }
  const absl::StatusOr<UslModel> fit = FitUsl(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->lambda, 100.0, 2.0);
  EXPECT_NEAR(fit->sigma, 0.05, 0.01);
  EXPECT_NEAR(fit->kappa, 0.001, 0.0003);
  EXPECT_NEAR(fit->PeakWorkers(), std::sqrt(0.95 / 0.001), 3.0);
}

TEST(UslTest, LinearScalingHasNoPeak) {
  std::vector<ThroughputPoint> points = {{1, 10}, {2, 20}, {4, 40}, {8, 80}};
  const absl::StatusOr<UslModel> fit = FitUsl(points);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->lambda, 10, 1e-3);
  EXPECT_NEAR(fit->sigma, 0, 1e-4);
  EXPECT_NEAR(fit->kappa, 0, 1e-5);
  EXPECT_EQ(RecommendParallelism(*fit, 16).workers, 16);
}

TEST(UslTest, RecommendsStoppingBeforeThePeak) {
  const UslModel m{100.0, 0.05, 0.001, 0};
  const ParallelismRecommendation rec = RecommendParallelism(m, 64, 0.1);
  // The 10%-marginal-gain point comes well before the peak at ~31 workers.
  EXPECT_GT(rec.workers, 4);
  EXPECT_LT(rec.workers, 31);
  EXPECT_GE(m.Throughput(rec.workers) - m.Throughput(rec.workers - 1), 10.0);
  EXPECT_LT(m.Throughput(rec.workers + 1) - m.Throughput(rec.workers), 10.0);
  EXPECT_NE(rec.explanation.find("usl"), std::string::npos);
}

TEST(UslTest, RejectsBadInput) {
  std::vector<ThroughputPoint> two = {{1, 10}, {2, 20}};
  EXPECT_EQ(FitUsl(two).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<ThroughputPoint> same = {{2, 10}, {2, 11}, {2, 12}};
  EXPECT_EQ(FitUsl(same).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<ThroughputPoint> negative = {{1, 10}, {2, -1}, {4, 30}};
  const auto st = FitUsl(negative).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("point 1"), std::string::npos);
}

}  // namespace
}  // namespace evoscale::load_model
