#include "load_model/vpa.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace evoscale::load_model {

double ConfidenceMultiplied(double estimate, double multiplier, double exponent,
                            double confidence) {
  // Go's math.Pow(1 + m/0, e) is +Inf for e > 0 and 0 for e < 0; std::pow agrees.
  return estimate * std::pow(1.0 + multiplier / confidence, exponent);
}

double OomBumpedMemory(double memory_request, double memory_peak, const VpaOptions& options) {
  const double used = std::max(memory_request, memory_peak);
  return std::max(used + options.oom_min_bump_bytes, used * options.oom_bump_ratio);
}

VpaRecommender::VpaRecommender(VpaOptions options)
    : options_(options),
      cpu_(HistogramOptions::VpaCpu(), options.cpu_half_life),
      memory_(HistogramOptions::VpaMemory(), options.memory_half_life) {}

void VpaRecommender::AddSample(const UsageSample& sample) {
  // The VPA keeps only CPU samples strictly newer than the last one.
  if (total_samples_ > 0 && sample.time <= last_sample_) return;
  if (total_samples_ == 0) first_sample_ = sample.time;
  last_sample_ = sample.time;
  ++total_samples_;
  cpu_.AddSample(sample.cpu_cores,
                 std::max(sample.cpu_request_cores, options_.min_sample_weight), sample.time);
  AddMemoryPeakSample(sample.time, sample.memory_bytes, /*is_oom=*/false);
}

void VpaRecommender::AddMemoryPeakSample(absl::Time time, double bytes, bool is_oom) {
  if (!is_oom && time < last_memory_sample_) return;
  if (!is_oom) last_memory_sample_ = time;
  if (window_end_ == absl::InfinitePast()) window_end_ = time;
  bool add_new_peak = false;
  if (time < window_end_) {
    const double old_peak = std::max(memory_peak_, oom_peak_);
    if (old_peak != 0 && bytes > old_peak) {
      memory_.SubtractSample(old_peak, 1.0, window_end_);
      add_new_peak = true;
    }
  } else {
    // Move to the window holding `time`.
    const absl::Duration interval = options_.memory_aggregation_interval;
    const absl::Duration shift = absl::Trunc(time - window_end_, interval) + interval;
    window_end_ += shift;
    memory_peak_ = 0;
    oom_peak_ = 0;
    add_new_peak = true;
  }
  if (add_new_peak) {
    memory_.AddSample(bytes, 1.0, window_end_);
    if (is_oom) {
      oom_peak_ = bytes;
    } else {
      memory_peak_ = bytes;
    }
  }
}

void VpaRecommender::RecordOom(absl::Time time, double memory_limit_bytes) {
  const double memory_request_bytes =
      memory_limit_bytes / std::max(options_.memory_limit_ratio, 1.0);
  // The VPA discards OOMs older than the current window.
  if (window_end_ != absl::InfinitePast() &&
      time < window_end_ - options_.memory_aggregation_interval) {
    return;
  }
  AddMemoryPeakSample(time, OomBumpedMemory(memory_request_bytes, memory_peak_, options_),
                      /*is_oom=*/true);
}

ResourceRecommendation VpaRecommender::Recommend(absl::Time /*now*/) {
  ResourceRecommendation rec;
  const double lifespan_days =
      total_samples_ == 0 ? 0 : absl::FDivDuration(last_sample_ - first_sample_, absl::Hours(24));
  const double confidence =
      std::min(lifespan_days, static_cast<double>(total_samples_) / options_.samples_per_day);
  rec.confidence = confidence;
  const double margin = 1.0 + options_.safety_margin_fraction;
  auto estimate = [&](const DecayingHistogram& h, double lower_p, double target_p,
                      double upper_p, double minimum) {
    ResourceEstimate e;
    e.target = std::max(h.Percentile(target_p) * margin, minimum);
    // The VPA's upper bound: x (1 + 1/confidence); lower bound: x (1 + 0.001/confidence)^-2.
    e.upper_bound = std::max(ConfidenceMultiplied(h.Percentile(upper_p) * margin, 1.0, 1.0,
                                                  confidence),
                             minimum);
    e.lower_bound = std::max(ConfidenceMultiplied(h.Percentile(lower_p) * margin, 0.001, -2.0,
                                                  confidence),
                             minimum);
    return e;
  };
  rec.cpu_cores = estimate(cpu_, options_.lower_cpu_percentile, options_.target_cpu_percentile,
                           options_.upper_cpu_percentile, options_.min_cpu_cores);
  rec.memory_bytes =
      estimate(memory_, options_.lower_memory_percentile, options_.target_memory_percentile,
               options_.upper_memory_percentile, options_.min_memory_bytes);
  rec.cpu_cores.limit = rec.cpu_cores.target * std::max(options_.cpu_limit_ratio, 1.0);
  rec.memory_bytes.limit = rec.memory_bytes.target * std::max(options_.memory_limit_ratio, 1.0);
  rec.explanation = absl::StrFormat(
      "vpa: cpu p%.0f x %.2f, memory p%.0f of %s peaks x %.2f, confidence %.2f days",
      100 * options_.target_cpu_percentile, margin, 100 * options_.target_memory_percentile,
      absl::FormatDuration(options_.memory_aggregation_interval), margin, confidence);
  return rec;
}

}  // namespace evoscale::load_model
