#include "load_model/decaying_histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace evoscale::load_model {
namespace {
// The VPA renormalises before the decay exponent passes 2^100.
constexpr int kMaxDecayExponent = 100;
}  // namespace

absl::StatusOr<HistogramOptions> HistogramOptions::Exponential(double max_value,
                                                               double first_bucket_size,
                                                               double ratio, double epsilon) {
  if (!(max_value > 0) || !(first_bucket_size > 0) || !(ratio > 1) || !(epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "histogram options: need max_value > 0, first_bucket_size > 0, ratio > 1, "
        "epsilon > 0; got %g, %g, %g, %g",
        max_value, first_bucket_size, ratio, epsilon));
  }
  const int num_buckets =
      static_cast<int>(std::ceil(std::log(max_value * (ratio - 1) / first_bucket_size + 1) /
                                 std::log(ratio))) +
      1;
  return HistogramOptions(first_bucket_size, ratio, epsilon, num_buckets);
}

HistogramOptions HistogramOptions::VpaCpu() {
  // epsilon = 0.001 * minSampleWeight (0.1), as in the VPA's aggregations_config.go.
  return *Exponential(1000.0, 0.01, 1.05, 1e-4);
}

HistogramOptions HistogramOptions::VpaMemory() { return *Exponential(1e12, 1e7, 1.05, 1e-4); }

int HistogramOptions::FindBucket(double value) const {
  if (!(value >= first_bucket_size_)) return 0;  // Also catches NaN.
  const int bucket = static_cast<int>(
      std::log(value * (ratio_ - 1) / first_bucket_size_ + 1) / std::log(ratio_));
  return std::min(bucket, num_buckets_ - 1);
}

double HistogramOptions::BucketStart(int bucket) const {
  if (bucket <= 0) return 0.0;
  return first_bucket_size_ * (std::pow(ratio_, bucket) - 1) / (ratio_ - 1);
}

DecayingHistogram::DecayingHistogram(HistogramOptions options, absl::Duration half_life)
    : options_(options),
      half_life_(half_life),
      weights_(options.num_buckets(), 0.0),
      min_bucket_(options.num_buckets() - 1) {}

double DecayingHistogram::DecayFactor(absl::Time time) {
  if (half_life_ == absl::InfiniteDuration()) return 1.0;
  if (time > reference_ + half_life_ * kMaxDecayExponent) ShiftReference(time);
  return std::exp2(absl::FDivDuration(time - reference_, half_life_));
}

void DecayingHistogram::ShiftReference(absl::Time new_reference) {
  // Keep the reference a whole number of half-lives from the epoch so that the rescale is
  // an exact power of two.
  const double halves =
      std::round(absl::FDivDuration(new_reference - absl::UnixEpoch(), half_life_));
  new_reference = absl::UnixEpoch() + half_life_ * halves;
  const double exponent = std::round(absl::FDivDuration(reference_ - new_reference, half_life_));
  const double scale = std::ldexp(1.0, static_cast<int>(exponent));
  for (double& w : weights_) w *= scale;
  total_weight_ *= scale;
  reference_ = new_reference;
  UpdateMinMaxBucket();
}

void DecayingHistogram::AddSample(double value, double weight, absl::Time time) {
  if (!(weight >= 0) || std::isnan(value)) return;
  const double w = weight * DecayFactor(time);
  const int bucket = options_.FindBucket(value);
  weights_[bucket] += w;
  total_weight_ += w;
  if (weights_[bucket] >= options_.epsilon()) {
    min_bucket_ = std::min(min_bucket_, bucket);
    max_bucket_ = std::max(max_bucket_, bucket);
  }
}

void DecayingHistogram::SubtractSample(double value, double weight, absl::Time time) {
  if (!(weight >= 0) || std::isnan(value)) return;
  const double w = weight * DecayFactor(time);
  const int bucket = options_.FindBucket(value);
  const double removed = std::min(w, weights_[bucket]);
  weights_[bucket] -= removed;
  total_weight_ = std::max(0.0, total_weight_ - removed);
  if (weights_[bucket] < options_.epsilon() && (bucket == min_bucket_ || bucket == max_bucket_)) {
    UpdateMinMaxBucket();
  }
}

void DecayingHistogram::UpdateMinMaxBucket() {
  const int last = options_.num_buckets() - 1;
  min_bucket_ = last;
  max_bucket_ = 0;
  for (int b = 0; b <= last; ++b) {
    if (weights_[b] >= options_.epsilon()) {
      min_bucket_ = std::min(min_bucket_, b);
      max_bucket_ = b;
    }
  }
}

bool DecayingHistogram::IsEmpty() const {
  return min_bucket_ > max_bucket_ || weights_[min_bucket_] < options_.epsilon();
}

double DecayingHistogram::Percentile(double percentile) const {
  if (IsEmpty()) return 0.0;
  const double threshold = percentile * total_weight_;
  double partial = 0;
  int bucket = min_bucket_;
  for (; bucket < max_bucket_; ++bucket) {
    partial += weights_[bucket];
    if (partial >= threshold) break;
  }
  if (bucket < options_.num_buckets() - 1) return options_.BucketStart(bucket + 1);
  return options_.BucketStart(bucket);
}

}  // namespace evoscale::load_model
