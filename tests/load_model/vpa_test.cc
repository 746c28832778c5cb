#include "load_model/vpa.h"

#include <cmath>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
constexpr double kMiB = 1024.0 * 1024.0;

UsageSample Sample(absl::Time t, double cpu, double memory) {
  UsageSample s;
  s.time = t;
  s.cpu_cores = cpu;
  s.memory_bytes = memory;
  return s;
}

TEST(VpaFormulasTest, ConfidenceMultipliers) {
  // Upper bound: x (1 + 1/confidence)^1; lower bound: x (1 + 0.001/confidence)^-2.
  EXPECT_DOUBLE_EQ(ConfidenceMultiplied(1.0, 1.0, 1.0, 2.0), 1.5);
  EXPECT_DOUBLE_EQ(ConfidenceMultiplied(2.0, 1.0, 1.0, 0.5), 6.0);
  EXPECT_NEAR(ConfidenceMultiplied(1.0, 0.001, -2.0, 2.0), 1.0 / (1.0005 * 1.0005), 1e-15);
  EXPECT_TRUE(std::isinf(ConfidenceMultiplied(1.0, 1.0, 1.0, 0.0)));
  EXPECT_EQ(ConfidenceMultiplied(1.0, 0.001, -2.0, 0.0), 0.0);
}

TEST(VpaFormulasTest, OomBumpIsTheLargerOf100MiBAnd20Percent) {
  const VpaOptions o;
  // Small: +100 MiB wins (200 + 100 > 240).
  EXPECT_DOUBLE_EQ(OomBumpedMemory(200 * kMiB, 0, o), 300 * kMiB);
  // Large: x1.2 wins (1228.8 > 1124).
  EXPECT_DOUBLE_EQ(OomBumpedMemory(1024 * kMiB, 0, o), 1.2 * 1024 * kMiB);
  // The recent peak counts when it is above the request.
  EXPECT_DOUBLE_EQ(OomBumpedMemory(200 * kMiB, 600 * kMiB, o), 720 * kMiB);
}

TEST(VpaRecommenderTest, CpuTargetIsP90BucketEndWithMargin) {
  VpaRecommender vpa;
  // A minute apart for two days, 0.5 cores: every percentile is the end of 0.5's bucket,
  // 0.01 * (1.05^26 - 1) / 0.05 = 0.511135 cores; target = 0.511135 * 1.15.
  const int n = 2 * 1440;
  for (int i = 0; i < n; ++i) vpa.AddSample(Sample(kT0 + absl::Minutes(i), 0.5, 1e9));
  const ResourceRecommendation r = vpa.Recommend(kT0 + absl::Minutes(n));
  EXPECT_NEAR(r.cpu_cores.target, 0.511135 * 1.15, 1e-6);
  // Confidence = min(lifespan (n-1 minutes) in days, n / 1440 samples-days).
  const double confidence = (n - 1) / 1440.0;
  EXPECT_NEAR(r.confidence, confidence, 1e-12);
  EXPECT_NEAR(r.cpu_cores.upper_bound, 0.511135 * 1.15 * (1 + 1 / confidence), 1e-6);
  EXPECT_NEAR(r.cpu_cores.lower_bound,
              0.511135 * 1.15 * std::pow(1 + 0.001 / confidence, -2.0), 1e-6);
}

TEST(VpaRecommenderTest, CpuBoundsUseP50AndP95) {
  VpaRecommender vpa;
  // Samples weigh the same (no request, so the 0.1 minimum weight): 60% at 0.2 cores, 35%
  // at 0.4, 5% at 1.0. p50 -> 0.2's bucket, p90 -> 0.4's, p95 -> 0.4's (cumulative 0.95).
  int i = 0;
  for (int k = 0; k < 60; ++k) vpa.AddSample(Sample(kT0 + absl::Minutes(i++), 0.2, 1e9));
  for (int k = 0; k < 35; ++k) vpa.AddSample(Sample(kT0 + absl::Minutes(i++), 0.4, 1e9));
  for (int k = 0; k < 5; ++k) vpa.AddSample(Sample(kT0 + absl::Minutes(i++), 1.0, 1e9));
  const ResourceRecommendation r = vpa.Recommend(kT0 + absl::Minutes(i));
  const HistogramOptions o = HistogramOptions::VpaCpu();
  auto end_of = [&](double v) { return o.BucketStart(o.FindBucket(v) + 1); };
  // Decay over 100 minutes shifts weights by < 5%: later samples weigh slightly more,
  // which does not move these percentiles across buckets.
  EXPECT_NEAR(r.cpu_cores.target, end_of(0.4) * 1.15, 1e-9);
  const double c = r.confidence;
  EXPECT_NEAR(r.cpu_cores.lower_bound,
              std::max(0.025, end_of(0.2) * 1.15 * std::pow(1 + 0.001 / c, -2.0)), 1e-9);
  EXPECT_NEAR(r.cpu_cores.upper_bound, end_of(1.0) * 1.15 * (1 + 1 / c), 1e-6);
}

TEST(VpaRecommenderTest, MinimumsApply) {
  VpaRecommender vpa;
  vpa.AddSample(Sample(kT0, 0.001, 1e6));
  const ResourceRecommendation r = vpa.Recommend(kT0);
  EXPECT_DOUBLE_EQ(r.cpu_cores.target, 0.025);
  EXPECT_DOUBLE_EQ(r.memory_bytes.target, 250 * kMiB);
}

TEST(VpaRecommenderTest, MemoryUsesOnePeakPerDay) {
  VpaRecommender vpa;
  const HistogramOptions o = HistogramOptions::VpaMemory();
  // Day 1: 1 GB then 2 GB: only the 2 GB peak counts.
  vpa.AddSample(Sample(kT0, 0.1, 1e9));
  vpa.AddSample(Sample(kT0 + absl::Hours(1), 0.1, 2e9));
  vpa.AddSample(Sample(kT0 + absl::Hours(2), 0.1, 1.5e9));
  // One peak in the histogram: even its median is the 2 GB bucket.
  EXPECT_NEAR(vpa.memory_histogram().Percentile(0.01), o.BucketStart(o.FindBucket(2e9) + 1),
              1);
  ResourceRecommendation r = vpa.Recommend(kT0 + absl::Hours(3));
  EXPECT_NEAR(r.memory_bytes.target, o.BucketStart(o.FindBucket(2e9) + 1) * 1.15, 1);
  // Day 2 at 1 GB adds a second peak; p90 of {2 GB, 1 GB (newer, heavier)} is still 2 GB's
  // bucket, p50 is 1 GB's.
  vpa.AddSample(Sample(kT0 + absl::Hours(25), 0.1, 1e9));
  r = vpa.Recommend(kT0 + absl::Hours(26));
  EXPECT_NEAR(r.memory_bytes.target, o.BucketStart(o.FindBucket(2e9) + 1) * 1.15, 1);
}

TEST(VpaRecommenderTest, OomRaisesMemoryByTheBump) {
  VpaRecommender vpa;
  const HistogramOptions o = HistogramOptions::VpaMemory();
  vpa.AddSample(Sample(kT0, 0.1, 0.3e9));
  // Killed at a 1e9-byte request: the window's peak becomes max(1e9 + 100 MiB, 1.2e9).
  vpa.RecordOom(kT0 + absl::Minutes(5), 1e9);
  const ResourceRecommendation r = vpa.Recommend(kT0 + absl::Minutes(6));
  EXPECT_NEAR(r.memory_bytes.target, o.BucketStart(o.FindBucket(1.2e9) + 1) * 1.15, 1);
}

TEST(VpaRecommenderTest, LimitsKeepTheRatioAndAnOomBumpsFromTheRequest) {
  VpaOptions options;
  options.cpu_limit_ratio = 2;
  options.memory_limit_ratio = 1.5;
  VpaRecommender vpa(options), plain;
  vpa.AddSample(Sample(kT0, 0.5, 0.3e9));
  plain.AddSample(Sample(kT0, 0.5, 0.3e9));
  const ResourceRecommendation r = vpa.Recommend(kT0 + absl::Minutes(1));
  const ResourceRecommendation p = plain.Recommend(kT0 + absl::Minutes(1));
  EXPECT_DOUBLE_EQ(r.cpu_cores.target, p.cpu_cores.target);
  EXPECT_DOUBLE_EQ(LimitOf(r.cpu_cores), 2 * r.cpu_cores.target);
  EXPECT_DOUBLE_EQ(LimitOf(r.memory_bytes), 1.5 * r.memory_bytes.target);
  EXPECT_DOUBLE_EQ(LimitOf(p.memory_bytes), p.memory_bytes.target);
  // Killed at a 1.5e9-byte limit, that is a 1e9-byte request: the same bump as OomRaises...
  vpa.RecordOom(kT0 + absl::Minutes(5), 1.5e9);
  const HistogramOptions o = HistogramOptions::VpaMemory();
  EXPECT_NEAR(vpa.Recommend(kT0 + absl::Minutes(6)).memory_bytes.target,
              o.BucketStart(o.FindBucket(1.2e9) + 1) * 1.15, 1);
}

}  // namespace
}  // namespace evoscale::load_model
