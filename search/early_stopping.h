// Early stopping of trials from their intermediate measurements.
#ifndef EVOSCALE_SEARCH_EARLY_STOPPING_H_
#define EVOSCALE_SEARCH_EARLY_STOPPING_H_

#include <cstdint>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search {

enum class EarlyStoppingPolicy { kNone, kMedian, kAsha, kCostAware };

struct EarlyStoppingConfig {
  EarlyStoppingPolicy policy = EarlyStoppingPolicy::kNone;
  int64_t min_steps = 0;    // no decision before this step
  int min_trials = 3;       // no decision before this many other trials have data
  int64_t min_resource = 1;       // ASHA: first rung
  double reduction_factor = 3.0;  // ASHA, COST_AWARE: keep the top 1/reduction_factor at each rung
  int64_t max_step = 0;           // the step of a full run (COST_AWARE needs it; 0 = unknown)
};

// What the study has spent of its budget when a decision is asked (COST_AWARE).
struct BudgetView {
  double budget_core_seconds = 0;  // 0 = no budget
  double spent_core_seconds = 0;
};

// Decides whether `trial` should stop, given the other trials of the study (any state).
// The objective is `metric` (its goal decides the direction). kNone always answers false.
// Median rule: stop when the trial's best value up to its latest step is worse than the
// median, over the other trials with a measurement at or before that step, of their best
// values up to that step. Cost: O(total measurements).
// COST_AWARE: see search/internal/cost_aware.h; `budget` is the study's spending.
bool ShouldStop(const EarlyStoppingConfig& config, const MetricConfig& metric,
                const Trial& trial, absl::Span<const Trial> others,
                const BudgetView& budget = {});

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_EARLY_STOPPING_H_
