#include "service/autoscaler/internal/usage_history.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <tuple>

namespace evoscale::service::internal {

namespace {

// Buckets before the newest that still fit in the window.
constexpr double kWindowSeconds = (kHistoryBuckets - 1) * kHistoryBucketSeconds;
// How often (of sample time) silent instances are looked for.
constexpr double kSweepSeconds = 3600;

}  // namespace

std::vector<PodSample> InstanceSeries::Points(int max_points) const {
  std::vector<PodSample> all = kept_;
  // The newest pod sample, even when the stride skipped it: the series reaches the present.
  const PodSample* newest = nullptr;
  for (int i = 0; i < recent_size_; ++i) {
    if (newest == nullptr || recent_[i].time > newest->time) newest = &recent_[i];
  }
  if (newest != nullptr && (all.empty() || newest->time > all.back().time)) {
    all.push_back(*newest);
  }
  const size_t limit = static_cast<size_t>(max_points > 0 ? std::min(max_points, kMaxInstancePoints)
                                                          : kMaxInstancePoints);
  if (all.size() <= limit) return all;
  std::vector<PodSample> out;
  out.reserve(limit);
  if (limit == 1) {
    out.push_back(all.back());
    return out;
  }
  // Indices floor(i (n - 1) / (limit - 1)): strictly increasing (n > limit), first to last.
  for (size_t i = 0; i < limit; ++i) out.push_back(all[i * (all.size() - 1) / (limit - 1)]);
  return out;
}

PodSample* InstanceSeries::Recent(double time) {
  for (int i = 0; i < recent_size_; ++i) {
    if (recent_[i].time == time) return &recent_[i];
  }
  return nullptr;
}

PodSample* InstanceSeries::StartPodSample(double time) {
  int slot = recent_size_;
  if (recent_size_ < kRecent) {
    ++recent_size_;
  } else {
    slot = 0;
    for (int i = 1; i < kRecent; ++i) {
      if (recent_[i].time < recent_[slot].time) slot = i;
    }
    if (recent_[slot].time > time) return nullptr;
  }
  recent_[slot] = PodSample{.time = time};
  if (pod_samples_ % stride_ == 0) {
    if (kept_.size() == static_cast<size_t>(kMaxInstancePoints)) {
      // Full: keep every other point, and from now on every other sample of those kept so far.
      for (size_t i = 0; i < kept_.size() / 2; ++i) kept_[i] = kept_[2 * i];
      kept_.resize(kept_.size() / 2);
      stride_ *= 2;
    }
    if (pod_samples_ % stride_ == 0) {
      // Containers reporting out of step may start a pod sample older than the newest kept.
      auto pos = kept_.end();
      while (pos != kept_.begin() && std::prev(pos)->time > time) --pos;
      kept_.insert(pos, PodSample{.time = time});
    }
  }
  ++pod_samples_;
  return &recent_[slot];
}

void InstanceSeries::AddToKept(double time, double cpu_cores, double memory_bytes) {
  // A recent pod sample, if kept, is among the last few kept points.
  for (size_t i = kept_.size(), seen = 0; i > 0 && seen <= kRecent; --i, ++seen) {
    PodSample& p = kept_[i - 1];
    if (p.time < time) return;
    if (p.time == time) {
      p.cpu_cores += cpu_cores;
      p.memory_bytes += memory_bytes;
      return;
    }
  }
}

bool InstanceSeries::FirstInBucket(int64_t index) {
  if (!has_bucket_ || index > newest_bucket_) {
    const int64_t shift = has_bucket_ ? index - newest_bucket_ : 64;
    bucket_bits_ = (shift >= 64 ? 0 : bucket_bits_ << shift) | 1;
    newest_bucket_ = index;
    has_bucket_ = true;
    return true;
  }
  const int64_t behind = newest_bucket_ - index;
  if (behind >= 64) return false;
  const uint64_t bit = uint64_t{1} << behind;
  if ((bucket_bits_ & bit) != 0) return false;
  bucket_bits_ |= bit;
  return true;
}

void UsageHistory::Add(absl::string_view instance, double time, double cpu_cores,
                       double memory_bytes, double qps, double latency_seconds,
                       Snapshot snapshot) {
  // The bucket first: opening one may sweep instances, and closing one must not see this sample.
  UsageBucket* bucket = BucketFor(time, snapshot);
  InstanceSeries& series = InstanceNamed(instance);
  series.last_time_ = std::max(series.last_time_, time);
  PodSample* pod = series.Recent(time);
  const bool started = pod == nullptr;
  if (started) pod = series.StartPodSample(time);
  if (pod != nullptr) {
    pod->cpu_cores += cpu_cores;
    pod->memory_bytes += memory_bytes;
    series.AddToKept(time, cpu_cores, memory_bytes);
  }
  if (bucket == nullptr) return;
  bucket->cpu_sum += cpu_cores;
  bucket->qps_sum += qps;
  if (latency_seconds > 0) {
    bucket->latency_sum += latency_seconds;
    ++bucket->latency_samples;
  }
  // A container too far behind its siblings (pod == nullptr) adds to the sums, not the counts;
  // its own usage is all that is known of its pod's.
  bucket->cpu_max = std::max(bucket->cpu_max, pod != nullptr ? pod->cpu_cores : cpu_cores);
  bucket->memory_max =
      std::max(bucket->memory_max, pod != nullptr ? pod->memory_bytes : memory_bytes);
  if (started && pod != nullptr) {
    ++bucket->pod_samples;
    if (series.FirstInBucket(std::llround(bucket->start / kHistoryBucketSeconds))) {
      ++bucket->instances;
    }
  }
}

void UsageHistory::SetVersions(absl::string_view instance, double time,
                               std::vector<std::pair<std::string, int64_t>> versions) {
  auto it = instances_.find(instance);
  if (it == instances_.end() || time < it->second.versions_time_) return;
  it->second.versions_ = std::move(versions);
  it->second.versions_time_ = time;
}

std::vector<std::pair<const std::string*, const InstanceSeries*>> UsageHistory::NewestInstances(
    double within_seconds, size_t limit) const {
  double newest = -std::numeric_limits<double>::infinity();
  for (const auto& [name, series] : instances_) newest = std::max(newest, series.last_time_);
  std::vector<std::pair<const std::string*, const InstanceSeries*>> out;
  for (const auto& [name, series] : instances_) {
    if (series.last_time_ >= newest - within_seconds) out.emplace_back(&name, &series);
  }
  const auto newer = [](const auto& a, const auto& b) {
    return std::tie(b.second->last_time_, *a.first) < std::tie(a.second->last_time_, *b.first);
  };
  const size_t kept = std::min(limit, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(kept), out.end(),
                    newer);
  out.resize(kept);
  return out;
}

const InstanceSeries* UsageHistory::instance(absl::string_view name) const {
  auto it = instances_.find(name);
  return it == instances_.end() ? nullptr : &it->second;
}

UsageBucket* UsageHistory::BucketFor(double time, Snapshot snapshot) {
  const double start = std::floor(time / kHistoryBucketSeconds) * kHistoryBucketSeconds;
  if (buckets_.empty() || start > buckets_.back().start) {
    if (!buckets_.empty()) buckets_.back().recommendation = snapshot();
    buckets_.push_back(UsageBucket{.start = start});
    while (buckets_.front().start < start - kWindowSeconds) buckets_.pop_front();
    MaybeSweep(time);
    return &buckets_.back();
  }
  if (start == buckets_.back().start) return &buckets_.back();
  if (start < buckets_.back().start - kWindowSeconds) return nullptr;
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), start,
                             [](const UsageBucket& b, double s) { return b.start < s; });
  if (it->start == start) return &*it;  // `it` is not end(): start < the newest's
  // A minute that had no samples until now. It closed (a later one is open) with the
  // recommendation the bucket before it closed with; none when it is the oldest.
  UsageBucket gap{.start = start};
  if (it != buckets_.begin()) gap.recommendation = std::prev(it)->recommendation;
  return &*buckets_.insert(it, gap);
}

InstanceSeries& UsageHistory::InstanceNamed(absl::string_view name) {
  if (auto it = instances_.find(name); it != instances_.end()) return it->second;
  if (instances_.size() >= kMaxHistoryInstances) DropLeastRecent();
  return instances_.try_emplace(std::string(name)).first->second;
}

void UsageHistory::MaybeSweep(double now) {
  if (now < next_sweep_) return;
  next_sweep_ = now + kSweepSeconds;
  absl::erase_if(instances_, [now](const auto& entry) {
    return entry.second.last_time_ < now - kInstanceHistorySeconds;
  });
}

void UsageHistory::DropLeastRecent() {
  // A tenth at a time: O(instances) once per kMaxHistoryInstances / 10 new ones.
  std::vector<double> times;
  times.reserve(instances_.size());
  for (const auto& [name, series] : instances_) times.push_back(series.last_time_);
  const size_t drop = std::max<size_t>(1, times.size() / 10);
  std::nth_element(times.begin(), times.begin() + (drop - 1), times.end());
  const double cutoff = times[drop - 1];
  size_t dropped = 0;
  for (auto it = instances_.begin(); it != instances_.end() && dropped < drop;) {
    if (it->second.last_time_ <= cutoff) {
      instances_.erase(it++);
      ++dropped;
    } else {
      ++it;
    }
  }
}

}  // namespace evoscale::service::internal
