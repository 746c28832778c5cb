// Replays an openb trace with its own clock (`evoscale place --departures`): unlike replay.h's
// experiment, there is no shuffle and no tune inflation. Each pod of the trace, once:
//  - arrives at its creation_time, in time order (ties: the trace's order), and is placed by the
//    policy at once if it fits;
//  - leaves at its deletion_time, freeing what it held. Departures are fixed to the trace's
//    clock: a pod delayed in the queue runs for less time, not later; a pod still waiting at its
//    deletion_time is dropped and counted as never placed. At equal times departures go first.
//  - a pod that does not fit waits in the pending queue; whenever resources are freed (after the
//    departures of one instant) the queue is retried in priority-class order, then arrival order,
//    each pod in turn (a pod that still does not fit does not block those behind it).
// Priority classes come from openb's `qos`, highest first: LS, Guaranteed, Burstable, BE (a pod
// without a qos ranks with BE). With `priorities` off every pod is one class (FIFO).
//
// Preemption (`preemption` on, needs `priorities`): a pod that does not fit evicts pods of
// strictly lower classes from one node. The node and victims: the fewest victims that make the
// pod fit; ties broken by the least evicted GPU-milli x remaining time (deletion_time - now),
// then the node's tie rank. One victim is searched exactly over every node; when none suffices,
// each node's lower-class pods are taken largest request first until the pod fits, the
// unneeded ones put back, and the node with the fewest (then cheapest) wins. The preemptor
// takes the node's best-fit GPUs. Evicted pods go back to the pending queue (keeping their
// arrival order) and may run again, until their deletion_time.
//
// Reported: the LS pods' scheduling delay (seconds from creation_time to first placement; median
// and p99 by nearest rank, over the LS pods that were placed), preemptions (pods placed by
// evicting), evicted pods, evicted GPU-hours (for each eviction, the pod's GPUs (milli / 1000) x
// the time it had left, deletion_time - eviction time, in hours: the GPU time the eviction took
// from it), and pods never placed.
//
// Pure and deterministic: no clock, no randomness but the policy's (`seed`, for `random`). Cost:
// a policy decision per arrival and per pending pod per retry (pods of a request shape that
// already failed in a retry are skipped), plus O(running pods) per preemption attempt.

#ifndef EVOSCALE_PLACEMENT_DEPARTURES_H_
#define EVOSCALE_PLACEMENT_DEPARTURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/cluster.h"
#include "placement/evoscale_policy.h"
#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace evoscale::placement {

struct DeparturesOptions {
  PolicyKind policy = PolicyKind::kEvoscale;
  uint64_t seed = 42;
  bool priorities = true;  // false: one class, FIFO
  bool preemption = true;  // ignored without priorities
  TypicalPodsOptions typical;
  EvoscalePolicyOptions evoscale;
};

struct DeparturesReport {
  std::string policy;
  bool priorities = false;
  bool preemption = false;
  int64_t nodes = 0;
  int64_t total_gpus = 0;
  int64_t pods = 0;
  int64_t placed_pods = 0;        // placed at least once
  int64_t never_placed_pods = 0;  // dropped at deletion_time or still waiting at the end
  int64_t ls_pods = 0;
  int64_t ls_placed_pods = 0;
  double ls_delay_median_seconds = 0;  // 0 when no LS pod was placed
  double ls_delay_p99_seconds = 0;
  int64_t delayed_pods = 0;  // placed later than their creation_time
  int64_t preemptions = 0;
  int64_t evicted_pods = 0;
  double evicted_gpu_hours = 0;
  int64_t end_time = 0;  // the last event's time
};

// The rank of a class in the pending queue: 0 highest (LS) .. 3 (BE and unspecified).
int PriorityRank(QosClass qos);

// INVALID_ARGUMENT for a bad cluster (Cluster::Create), no pods, or a pod without times or with
// deletion_time < creation_time (naming the pod: `pod "p1": deletion_time 5 < creation_time 9`).
absl::StatusOr<DeparturesReport> ReplayDepartures(const std::vector<NodeSpec>& nodes,
                                                  const std::vector<PodSpec>& pods,
                                                  const DeparturesOptions& options);

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_DEPARTURES_H_
