// Placement: which waiting managed trials start now, and which running ones are preempted to
// make room, given what the running trials hold and what the machine lends. A pure function:
// no clock, no lock, no process; the scheduler snapshots its state into these types, calls
// Place, and applies the answer.
//
// The rule (what a reader of scheduler.h's header comment expects):
//  - waiting trials are taken by priority (higher first), then the oldest study, then the study's
//    name, then the oldest trial;
//  - within the highest priority still waiting, the trial whose request fits best starts: the
//    largest memory request that fits beside the running ones (least memory left over), the
//    first in the order above on a tie; then the next, with what it holds counted;
//  - a request fits when the running trials (those being preempted included, until they end)
//    plus it stay within the CPU and memory capacity, fewer than max_running trials run, and
//    enough GPUs are free; a trial larger than the whole capacity still runs when nothing else
//    does, rather than never;
//  - when none of the highest priority fits, lower priorities wait too (no backfill), and
//    running trials of lower priority are preempted if stopping them frees enough for the first
//    waiting trial: the lowest priority first, the most recently started first among equals
//    (trials already being preempted count as gone). If even all of them would not free enough,
//    none is preempted.
#ifndef EVOSCALE_SERVICE_SCHEDULER_PLACEMENT_H_
#define EVOSCALE_SERVICE_SCHEDULER_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace evoscale::service {

struct Resources {
  double cpu_cores = 0;
  int64_t memory_bytes = 0;
  int gpus = 0;
};

struct WaitingTrial {
  int id = 0;  // the caller's handle, returned in Placement
  int priority = 0;
  absl::Time study_created;
  std::string study;
  int64_t trial_id = 0;
  Resources request;
};

struct PlacedTrial {
  int id = 0;  // the caller's handle, returned in Placement
  int priority = 0;
  absl::Time started;
  Resources request;
  bool preempting = false;  // already asked to stop to make room
};

struct Capacity {
  double cpu_cores = 0;
  int64_t memory_bytes = 0;
  int free_gpus = 0;    // GPUs no running trial holds
  int max_running = 1;  // trials that may run at once (>= 1)
};

struct Placement {
  std::vector<int> start;    // WaitingTrial ids, in the order to start them
  std::vector<int> preempt;  // PlacedTrial ids to stop (lowest priority first)
  std::vector<int> waiting;  // WaitingTrial ids left waiting, in the order of the rule
};

Placement Place(std::vector<WaitingTrial> waiting, const std::vector<PlacedTrial>& running,
                const Capacity& capacity);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_SCHEDULER_PLACEMENT_H_
