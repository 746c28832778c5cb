// The recommender interfaces: telemetry in, resource requests and replica counts out. One
// instance serves one workload (one container for ResourceRecommender, one deployment for
// ReplicaRecommender); a service keeps one per workload and feeds samples as they arrive.
#ifndef EVOSCALE_LOAD_MODEL_RECOMMENDER_H_
#define EVOSCALE_LOAD_MODEL_RECOMMENDER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace evoscale::load_model {

// The autoscaling policies, by their binding names ("evoscale", "vpa", "hpa").
enum class Policy { kEvoscale, kVpa, kHpa };
absl::StatusOr<Policy> ParsePolicy(std::string_view name);
std::string_view PolicyName(Policy policy);

// One observation of one container. Fields are validated by the caller (service/ rejects
// NaN, negative and out-of-order samples before they get here).
struct UsageSample {
  absl::Time time;
  double cpu_cores = 0;     // Average usage over the sample period.
  double memory_bytes = 0;  // Working set (peak over the period where known).
  // The container's CPU request when the sample was taken, in cores; 0 if unknown. The VPA
  // weights CPU samples by it.
  double cpu_request_cores = 0;
  // Load offered to the container (e.g. QPS); < 0 if unknown.
  double load = -1;
};

// A container's resource, Kubernetes' way: the target is the request (what the scheduler
// reserves; slack is measured on it), the limit the line above which memory is OOM-killed and
// CPU throttled.
struct ResourceEstimate {
  double target = 0;
  double lower_bound = 0;
  double upper_bound = 0;
  // 0: the same as the target (limit = request).
  double limit = 0;
};

// The limit in force for `e`: its limit, never below its target.
inline double LimitOf(const ResourceEstimate& e) {
  return e.limit > e.target ? e.limit : e.target;
}

struct ResourceRecommendation {
  ResourceEstimate cpu_cores;
  ResourceEstimate memory_bytes;
  // Days of evidence behind the numbers (the VPA's definition: min(history span, samples /
  // 1440)); 0 with no samples.
  double confidence = 0;
  std::string explanation;  // One line, for people.
};

// Recommends a container's CPU and memory request from its usage history.
// Not thread-safe: a service serialises calls per workload.
class ResourceRecommender {
 public:
  virtual ~ResourceRecommender() = default;
  // Feeds one sample. Samples must come in time order; older ones may be ignored.
  virtual void AddSample(const UsageSample& sample) = 0;
  // Records that the container was killed at `time` for exceeding its memory limit,
  // `memory_limit_bytes` (the request too when they are equal).
  virtual void RecordOom(absl::Time time, double memory_limit_bytes) = 0;
  // The recommendation in force from `now` on, from the samples fed so far. With no samples
  // every field is 0 except what minimums impose. Recommend may keep state (hysteresis): it
  // decides, as a replay does once per sample, in time order.
  virtual ResourceRecommendation Recommend(absl::Time now) = 0;
  // What Recommend(now) would answer, without deciding: later answers do not depend on how
  // often anyone peeks (a service's reads, metric scrapes and charts call this). The default
  // suits recommenders whose Recommend keeps no state.
  virtual ResourceRecommendation Peek(absl::Time now) { return Recommend(now); }
};

// One observation of a replicated workload, aggregated over its replicas.
struct LoadSample {
  absl::Time time;
  int replicas = 0;          // Replicas serving during the period.
  double utilization = 0;    // Mean utilisation per replica over the period, 0..1 (or more).
  double qps = -1;           // Requests per second offered to the workload; < 0 if unknown.
  double latency_ms = -1;    // Mean request latency; < 0 if unknown.
};

struct ReplicaRecommendation {
  int replicas = 0;
  double confidence = 0;
  std::string explanation;
};

// Recommends a replica count. Not thread-safe.
class ReplicaRecommender {
 public:
  virtual ~ReplicaRecommender() = default;
  virtual void AddSample(const LoadSample& sample) = 0;
  // The replica count to run from `now` on, given `current_replicas`. Recommend may keep
  // state (stabilisation windows, rate limits): call it once per decision, in time order.
  virtual ReplicaRecommendation Recommend(absl::Time now, int current_replicas) = 0;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_RECOMMENDER_H_
