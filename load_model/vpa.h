// The Kubernetes VerticalPodAutoscaler recommender's algorithm (kubernetes/autoscaler,
// vertical-pod-autoscaler/pkg/recommender/{logic,model,util}), for one container, so users
// can compare evoscale with what they run today and migrate.
#ifndef EVOSCALE_LOAD_MODEL_VPA_H_
#define EVOSCALE_LOAD_MODEL_VPA_H_

#include "absl/time/time.h"
#include "load_model/decaying_histogram.h"
#include "load_model/recommender.h"

namespace evoscale::load_model {

// Defaults are the VPA's.
struct VpaOptions {
  double target_cpu_percentile = 0.9;
  double lower_cpu_percentile = 0.5;
  double upper_cpu_percentile = 0.95;
  double target_memory_percentile = 0.9;  // Of per-interval memory peaks.
  double lower_memory_percentile = 0.5;
  double upper_memory_percentile = 0.95;
  double safety_margin_fraction = 0.15;
  absl::Duration cpu_half_life = absl::Hours(24);
  absl::Duration memory_half_life = absl::Hours(24);
  absl::Duration memory_aggregation_interval = absl::Hours(24);
  double min_cpu_cores = 0.025;                       // 25 millicores.
  double min_memory_bytes = 250.0 * 1024 * 1024;      // 250 MiB (the VPA's "250 MB").
  double oom_min_bump_bytes = 100.0 * 1024 * 1024;    // 100 MiB.
  double oom_bump_ratio = 1.2;
  double min_sample_weight = 0.1;  // CPU samples weigh max(request cores, this).
  // Confidence counts samples as days of one-per-minute samples.
  double samples_per_day = 60 * 24;
  // Limits: the VPA with controlledValues RequestsAndLimits keeps the pod's limit/request
  // ratio; these are that ratio (1: limit = request, as in a Guaranteed pod).
  double cpu_limit_ratio = 1;
  double memory_limit_ratio = 1;
};

// Pure formulas, exposed for tests and for explanations.
// estimate * (1 + multiplier / confidence)^exponent (the VPA's confidence multiplier).
double ConfidenceMultiplied(double estimate, double multiplier, double exponent,
                            double confidence);
// max(used + min_bump, used * ratio) with used = max(request, peak).
double OomBumpedMemory(double memory_request, double memory_peak, const VpaOptions& options);

// Not thread-safe.
class VpaRecommender : public ResourceRecommender {
 public:
  explicit VpaRecommender(VpaOptions options = {});

  void AddSample(const UsageSample& sample) override;
  // Bumps from the request in force (the limit over memory_limit_ratio), as the VPA does.
  void RecordOom(absl::Time time, double memory_limit_bytes) override;
  ResourceRecommendation Recommend(absl::Time now) override;

  const DecayingHistogram& cpu_histogram() const { return cpu_; }
  const DecayingHistogram& memory_histogram() const { return memory_; }

 private:
  // The VPA's ContainerState.addMemorySample: one peak per aggregation window.
  void AddMemoryPeakSample(absl::Time time, double bytes, bool is_oom);

  const VpaOptions options_;
  DecayingHistogram cpu_;
  DecayingHistogram memory_;  // One (replaced) sample per window: its peak.
  absl::Time window_end_ = absl::InfinitePast();  // End of the current memory window.
  absl::Time last_memory_sample_ = absl::InfinitePast();
  double memory_peak_ = 0;  // Usage peak in the current window.
  double oom_peak_ = 0;     // OOM-bumped peak in the current window.
  absl::Time first_sample_ = absl::InfinitePast();
  absl::Time last_sample_ = absl::InfinitePast();
  int64_t total_samples_ = 0;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_VPA_H_
