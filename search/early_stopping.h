// Early stopping of trials from their intermediate measurements.
#ifndef EVOSCALE_SEARCH_EARLY_STOPPING_H_
#define EVOSCALE_SEARCH_EARLY_STOPPING_H_

#include <cstdint>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search {

enum class EarlyStoppingPolicy { kNone, kMedian, kAsha };

struct EarlyStoppingConfig {
  EarlyStoppingPolicy policy = EarlyStoppingPolicy::kNone;
  int64_t min_steps = 0;    // no decision before this step
  int min_trials = 3;       // no decision before this many other trials have data
  int64_t min_resource = 1;       // ASHA: first rung
  double reduction_factor = 3.0;  // ASHA: keep the top 1/reduction_factor at each rung
};

// Decides whether `trial` should stop, given the other trials of the study (any state).
// The objective is `metric` (its goal decides the direction). kNone always answers false.
// Median rule: stop when the trial's best value up to its latest step is worse than the
// median, over the other trials with a measurement at or before that step, of their best
// values up to that step. Cost: O(total measurements).
bool ShouldStop(const EarlyStoppingConfig& config, const MetricConfig& metric,
                const Trial& trial, absl::Span<const Trial> others);

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_EARLY_STOPPING_H_
