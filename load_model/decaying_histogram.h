// Histograms with exponentially growing buckets and exponential time decay, as the
// Kubernetes VerticalPodAutoscaler recommender keeps them (pkg/recommender/util).
#ifndef EVOSCALE_LOAD_MODEL_DECAYING_HISTOGRAM_H_
#define EVOSCALE_LOAD_MODEL_DECAYING_HISTOGRAM_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace evoscale::load_model {

// Bucket layout: bucket 0 is [0, first_bucket_size); bucket i >= 1 starts at
// first_bucket_size * (ratio^i - 1) / (ratio - 1), so each bucket is `ratio` times wider than
// the one before. The last bucket is open-ended. Immutable and cheap to copy.
class HistogramOptions {
 public:
  // INVALID_ARGUMENT unless max_value > 0, first_bucket_size > 0, ratio > 1, epsilon > 0.
  static absl::StatusOr<HistogramOptions> Exponential(double max_value,
                                                      double first_bucket_size, double ratio,
                                                      double epsilon);
  // The VPA's CPU layout: 0.01 cores first bucket, 1000 cores max, ratio 1.05.
  static HistogramOptions VpaCpu();
  // The VPA's memory layout: 1e7 bytes first bucket, 1e12 bytes max, ratio 1.05.
  static HistogramOptions VpaMemory();

  int num_buckets() const { return num_buckets_; }
  double epsilon() const { return epsilon_; }
  // Index of the bucket holding `value` (values below 0 go to bucket 0, values beyond the
  // last bucket's start go to the last bucket).
  int FindBucket(double value) const;
  // Start (inclusive lower end) of `bucket`; 0 for bucket 0.
  double BucketStart(int bucket) const;

 private:
  HistogramOptions(double first_bucket_size, double ratio, double epsilon, int num_buckets)
      : first_bucket_size_(first_bucket_size),
        ratio_(ratio),
        epsilon_(epsilon),
        num_buckets_(num_buckets) {}

  double first_bucket_size_;
  double ratio_;
  double epsilon_;  // Weights below this count as empty.
  int num_buckets_;
};

// A weighted histogram whose sample weights grow by 2^((t - reference) / half_life), which is
// the same as decaying older samples by half every `half_life`. The reference time moves
// forward (rescaling all weights by a power of two) before the exponent exceeds 100, so
// weights stay finite over any time span. With an infinite half-life it is a plain weighted
// histogram. Not thread-safe; O(num_buckets) memory (about 600 doubles for the VPA layouts).
class DecayingHistogram {
 public:
  DecayingHistogram(HistogramOptions options, absl::Duration half_life);

  // Adds `value` with `weight` (>= 0; negative weights are ignored) observed at `time`.
  void AddSample(double value, double weight, absl::Time time);
  // Removes a sample added earlier with the same value, weight and time (bucket weights
  // never drop below zero).
  void SubtractSample(double value, double weight, absl::Time time);
  // The end of the bucket where the running weight first reaches `percentile` (0..1) of the
  // total, as the VPA computes it: an upper estimate within one bucket width. For the last
  // (open) bucket, its start. 0 when the histogram is empty.
  double Percentile(double percentile) const;
  bool IsEmpty() const;
  // Total weight, in units of a sample added at the reference time.
  double total_weight() const { return total_weight_; }
  const HistogramOptions& options() const { return options_; }

 private:
  double DecayFactor(absl::Time time);
  void ShiftReference(absl::Time new_reference);
  void UpdateMinMaxBucket();

  // Constant after construction.
  const HistogramOptions options_;
  const absl::Duration half_life_;  // absl::InfiniteDuration() for no decay.

  std::vector<double> weights_;  // One per bucket.
  double total_weight_ = 0;
  int min_bucket_;  // Range of buckets that may be non-empty.
  int max_bucket_ = 0;
  absl::Time reference_ = absl::UnixEpoch();
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_DECAYING_HISTOGRAM_H_
