// UsageHistory: one workload's recent usage, in memory, for the dashboard's charts. Two views:
//  - buckets: a minute of sample time each (aligned to multiples of 60 s of unix time), the
//    newest 1,440 (a day) kept; each holds sums over the pods that reported in it and the
//    workload's recommendation as it stood when the bucket closed;
//  - per instance: its pod samples (containers summed per time), at most 512 points; when
//    full, every other point goes and from then on only every 2nd (then 4th, ...) pod sample
//    is kept, so a long-running instance keeps its whole span at a coarser resolution.
// A pod sample is one instance's report at one time: the samples of its containers with that
// time, summed. They may arrive in any order, within a few reports of each other.
//
// Bounded: an instance's series is dropped once the workload has seen nothing from it for a
// day of sample time (checked hourly), and beyond kMaxHistoryInstances instances the least
// recently updated tenth go; one heard from again starts a new series.
// Add() is O(1) amortised (the hourly sweep and the drop of a tenth are O(instances); a late
// sample opening a past minute's bucket is O(buckets)) and allocates only for a new instance,
// a new bucket (now and then) and while a series first grows. Not thread-safe: the workload's
// owner serialises calls.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_USAGE_HISTORY_H_
#define EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_USAGE_HISTORY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace evoscale::service::internal {

inline constexpr double kHistoryBucketSeconds = 60;
inline constexpr int kHistoryBuckets = 1440;
inline constexpr int kMaxInstancePoints = 512;
inline constexpr size_t kMaxHistoryInstances = 10000;
// An instance silent for this long (of the workload's sample time) loses its series.
inline constexpr double kInstanceHistorySeconds = 86400;

// One instance's usage at one time, its containers summed.
struct PodSample {
  double time = 0;  // unix seconds
  double cpu_cores = 0;
  double memory_bytes = 0;
};

// What the workload's recommendation said for one pod, and the replicas, when a bucket closed.
struct RecommendationSnapshot {
  double cpu_target = 0, cpu_lower = 0, cpu_upper = 0, cpu_limit = 0;
  double memory_target = 0, memory_lower = 0, memory_upper = 0, memory_limit = 0;
  int replicas = 0;
};

// One minute of a workload's usage, as sums (the reader divides).
struct UsageBucket {
  double start = 0;         // unix seconds, a multiple of kHistoryBucketSeconds
  int instances = 0;        // distinct instances with a pod sample in it
  int64_t pod_samples = 0;  // (instance, time) pairs
  double cpu_sum = 0;       // of the pod samples' CPU cores
  double cpu_max = 0;       // of any pod sample
  double memory_max = 0;    // of any pod sample
  double qps_sum = 0;       // of the pod samples' QPS
  double latency_sum = 0;   // of the reported mean latencies, in seconds
  int64_t latency_samples = 0;  // samples that reported a latency
  // Set as the bucket closed (a later one opened) when the workload had a recommendation
  // then; never for the newest bucket, whose recommendation is the current one.
  std::optional<RecommendationSnapshot> recommendation;
};

// One instance's history.
class InstanceSeries {
 public:
  // Its series, oldest first: the kept points and the newest pod sample, evenly thinned to
  // `max_points` when that is > 0 (the first and the newest are always there).
  std::vector<PodSample> Points(int max_points) const;
  // Sample time of its newest sample.
  double last_time() const { return last_time_; }
  // The versions its newest report of them named (TelemetrySample.versions), sorted by name,
  // and that report's time; empty, 0 when none did.
  const std::vector<std::pair<std::string, int64_t>>& versions() const { return versions_; }
  double versions_time() const { return versions_time_; }

 private:
  friend class UsageHistory;
  static constexpr int kRecent = 4;

  // The pod sample at `time` among the newest few, or nullptr.
  PodSample* Recent(double time);
  // Starts the pod sample at `time`; nullptr when it is older than every recent one (a
  // container reporting too far behind its siblings: it is not added to the series).
  PodSample* StartPodSample(double time);
  // Adds one container's usage to the kept point at `time`, if that pod sample was kept.
  void AddToKept(double time, double cpu_cores, double memory_bytes);
  // Whether this is the instance's first pod sample in bucket `index` (those more than 63
  // buckets behind its newest are not counted).
  bool FirstInBucket(int64_t index);

  std::array<PodSample, kRecent> recent_;  // the newest pod samples, any order
  int recent_size_ = 0;
  std::vector<PodSample> kept_;  // every stride_-th pod sample, oldest first
  int64_t stride_ = 1;
  int64_t pod_samples_ = 0;  // started so far
  double last_time_ = 0;     // of its newest sample
  bool has_bucket_ = false;
  int64_t newest_bucket_ = 0;
  uint64_t bucket_bits_ = 0;  // bit d: counted in bucket newest_bucket_ - d
  std::vector<std::pair<std::string, int64_t>> versions_;
  double versions_time_ = 0;
};

class UsageHistory {
 public:
  using Snapshot = absl::FunctionRef<std::optional<RecommendationSnapshot>()>;

  // Adds one container's sample of `instance`. When it opens a bucket newer than every other,
  // the newest one closes first with `snapshot()`'s answer (so call this before the sample
  // reaches the load models). A sample older than the day before the newest bucket only goes
  // into the instance's series; one into a past minute that had no bucket makes one, with the
  // recommendation of the bucket before it.
  void Add(absl::string_view instance, double time, double cpu_cores, double memory_bytes,
           double qps, double latency_seconds, Snapshot snapshot);
  // Records what `instance` served at `time` (kept when no later report of versions was).
  void SetVersions(absl::string_view instance, double time,
                   std::vector<std::pair<std::string, int64_t>> versions);
  // The instances heard from within `within_seconds` of the newest one, newest report first
  // (ties by name), at most `limit`. O(instances + limit log limit), nothing copied but
  // pointers.
  std::vector<std::pair<const std::string*, const InstanceSeries*>> NewestInstances(
      double within_seconds, size_t limit) const;

  // Oldest first, at most kHistoryBuckets, only minutes that had samples.
  const std::deque<UsageBucket>& buckets() const { return buckets_; }
  // nullptr when `instance` never reported or was dropped.
  const InstanceSeries* instance(absl::string_view name) const;

 private:
  // The bucket for `time`, opening or inserting one; nullptr when it is older than the window.
  UsageBucket* BucketFor(double time, Snapshot snapshot);
  InstanceSeries& InstanceNamed(absl::string_view name);
  // Drops the instances silent for kInstanceHistorySeconds before `now`, once an hour.
  void MaybeSweep(double now);
  void DropLeastRecent();

  std::deque<UsageBucket> buckets_;
  absl::flat_hash_map<std::string, InstanceSeries> instances_;
  double next_sweep_ = 0;  // sample time of the next MaybeSweep that sweeps
};

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_USAGE_HISTORY_H_
