// Replays an openb trace through a placement policy as the FGD simulator's experiments do
// (`evoscale place`):
//  1. the pods, sorted by name, are shuffled with the seed;
//  2. the workload is tuned to `tune` x the cluster's GPUs: pods drawn uniformly with
//     replacement from the original list are appended while the next one's milli-GPU per GPU
//     still fits under the target (the simulator's tuneUpPods, its stopping rule included), or
//     random pods are dropped while the total is over it (tuneDownPods);
//  3. each pod is submitted once, in that order: placed by the policy or counted as failed,
//     never retried; nothing departs.
// After each pod it records arrived% (the GPU requests submitted so far over the cluster's GPU
// capacity), allocated% (milli-GPU in use over GPUs x 1000), the cluster's fragmentation amount
// (fragmentation.h, against the original workload's typical pods) and ratio (over the free
// milli-GPU), and the failed pods so far. Points are per 1% of arrival, as the simulator's
// analysis merges them: the mean over the pods whose arrived% rounds to that percent (or, when
// none does, to within one of it).
//
// The random numbers are our own (rng.h), not Go's: a seed gives the same replay here every
// time, but not the simulator's exact pod order; medians over seeds are what compare.

#ifndef EVOSCALE_PLACEMENT_REPLAY_H_
#define EVOSCALE_PLACEMENT_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/cluster.h"
#include "placement/evoscale_policy.h"
#include "placement/fragmentation.h"
#include "placement/policy.h"
#include "placement/rng.h"

namespace evoscale::placement {

struct PlacementReplayOptions {
  PolicyKind policy = PolicyKind::kEvoscale;
  uint64_t seed = 42;
  double tune = 1.3;  // > 0
  TypicalPodsOptions typical;
  EvoscalePolicyOptions evoscale;
};

struct ReplayPoint {
  int arrived_percent = 0;
  double allocated_percent = 0;
  double unallocated_percent = 0;   // 100 - allocated_percent
  double fragmentation_amount = 0;  // milli-GPU
  double fragmentation_ratio = 0;   // percent of the free milli-GPU
  int64_t failed_pods = 0;          // so far
  double gpu_utilization_stddev = 0;  // percentage points, over the nodes with GPUs
  double cpu_utilization_stddev = 0;  // percentage points, over all nodes
};

struct PlacementReport {
  std::string policy;
  std::string secondary;  // evoscale's tie rule (SecondaryName); empty for other policies
  uint64_t seed = 0;
  double tune = 0;
  int64_t nodes = 0;
  int64_t total_gpus = 0;
  int64_t original_pods = 0;
  int64_t submitted_pods = 0;
  int64_t placed_pods = 0;
  int64_t failed_pods = 0;
  int64_t submitted_gpu_milli = 0;
  double arrived_percent = 0;    // at the end
  double allocated_percent = 0;  // at the end
  std::vector<ReplayPoint> points;

  // The point at `arrived_percent`, if the replay reached it.
  std::optional<ReplayPoint> PointAt(int arrived_percent) const;
};

// The workload of steps 1 and 2, for a cluster of `total_gpus` GPUs.
std::vector<PodSpec> TunedWorkload(std::vector<PodSpec> pods, int64_t total_gpus, double tune,
                                   Rng& rng);

// INVALID_ARGUMENT for a bad cluster (Cluster::Create), no pods, or tune <= 0.
absl::StatusOr<PlacementReport> ReplayPlacement(const std::vector<NodeSpec>& nodes,
                                                const std::vector<PodSpec>& pods,
                                                const PlacementReplayOptions& options);

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_REPLAY_H_
