#include "load_model/decaying_histogram.h"

#include <cmath>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(HistogramOptionsTest, VpaCpuLayoutMatchesTheVpaFormulas) {
  const HistogramOptions o = HistogramOptions::VpaCpu();
  // ceil(ln(1000 * 0.05 / 0.01 + 1) / ln 1.05) + 1 = ceil(174.57) + 1.
  EXPECT_EQ(o.num_buckets(), 176);
  EXPECT_EQ(o.FindBucket(0.005), 0);
  EXPECT_EQ(o.FindBucket(-1), 0);
  // ln(0.5 * 0.05 / 0.01 + 1) / ln 1.05 = 25.68.
  EXPECT_EQ(o.FindBucket(0.5), 25);
  // 0.01 * (1.05^25 - 1) / 0.05 and 0.01 * (1.05^26 - 1) / 0.05.
  EXPECT_NEAR(o.BucketStart(25), 0.477271, 1e-6);
  EXPECT_NEAR(o.BucketStart(26), 0.511135, 1e-6);
  EXPECT_EQ(o.BucketStart(0), 0.0);
  EXPECT_EQ(o.FindBucket(1e9), o.num_buckets() - 1);
}

TEST(HistogramOptionsTest, RejectsBadParameters) {
  const auto bad = HistogramOptions::Exponential(100, 1, 1.0, 1e-4);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ratio > 1"), std::string::npos);
}

TEST(DecayingHistogramTest, EmptyHistogramHasZeroPercentile) {
  DecayingHistogram h(HistogramOptions::VpaCpu(), absl::Hours(24));
  EXPECT_TRUE(h.IsEmpty());
  EXPECT_EQ(h.Percentile(0.9), 0.0);
}

TEST(DecayingHistogramTest, PercentileIsTheEndOfTheBucketReachingIt) {
  DecayingHistogram h(HistogramOptions::VpaCpu(), absl::InfiniteDuration());
  // 9 samples at 0.1 cores and 1 at 0.5: p50 and p90 fall in 0.1's bucket, p95 in 0.5's.
  for (int i = 0; i < 9; ++i) h.AddSample(0.1, 1.0, kT0);
  h.AddSample(0.5, 1.0, kT0);
  const HistogramOptions& o = h.options();
  const int b01 = o.FindBucket(0.1);
  EXPECT_DOUBLE_EQ(h.Percentile(0.5), o.BucketStart(b01 + 1));
  EXPECT_DOUBLE_EQ(h.Percentile(0.9), o.BucketStart(b01 + 1));
  EXPECT_NEAR(h.Percentile(0.95), 0.511135, 1e-6);
  EXPECT_NEAR(h.Percentile(1.0), 0.511135, 1e-6);
}

TEST(DecayingHistogramTest, OlderSamplesWeighHalfPerHalfLife) {
  DecayingHistogram h(HistogramOptions::VpaCpu(), absl::Hours(24));
  // Two samples of 1.0 a day ago weigh as much as one of 0.1 now: p50 is at the 0.1 bucket
  // only while the new sample's weight reaches half of the total.
  h.AddSample(1.0, 1.0, kT0);
  h.AddSample(1.0, 1.0, kT0);
  h.AddSample(0.1, 1.0, kT0 + absl::Hours(24));
  const HistogramOptions& o = h.options();
  EXPECT_DOUBLE_EQ(h.Percentile(0.5), o.BucketStart(o.FindBucket(0.1) + 1));
  EXPECT_DOUBLE_EQ(h.Percentile(0.51), o.BucketStart(o.FindBucket(1.0) + 1));
}

TEST(DecayingHistogramTest, StaysFiniteOverManyHalfLives) {
  DecayingHistogram h(HistogramOptions::VpaCpu(), absl::Hours(1));
  for (int i = 0; i < 1000; ++i) h.AddSample(0.2, 1.0, kT0 + absl::Hours(i));
  EXPECT_TRUE(std::isfinite(h.total_weight()));
  EXPECT_FALSE(h.IsEmpty());
  EXPECT_DOUBLE_EQ(h.Percentile(0.5), h.options().BucketStart(h.options().FindBucket(0.2) + 1));
}

TEST(DecayingHistogramTest, SubtractRemovesASample) {
  DecayingHistogram h(HistogramOptions::VpaMemory(), absl::Hours(24));
  h.AddSample(1e9, 1.0, kT0);
  h.AddSample(3e9, 1.0, kT0);
  h.SubtractSample(3e9, 1.0, kT0);
  const HistogramOptions& o = h.options();
  EXPECT_DOUBLE_EQ(h.Percentile(1.0), o.BucketStart(o.FindBucket(1e9) + 1));
  h.SubtractSample(1e9, 1.0, kT0);
  EXPECT_TRUE(h.IsEmpty());
}

}  // namespace
}  // namespace evoscale::load_model
