// Optimal trials: the best for one objective, the Pareto front for several.
#ifndef EVOSCALE_SEARCH_PARETO_H_
#define EVOSCALE_SEARCH_PARETO_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search {

// Returns the indices (into `trials`) of the optimal succeeded trials. Metrics with a
// safety_threshold are constraints: a trial that violates one, or lacks a metric, is not
// feasible. With one objective: every feasible trial tied for the best value. With several:
// the non-dominated feasible trials. Non-succeeded trials are ignored. O(n log n + n f m)
// for m objectives and a front of f; O(n) for one.
std::vector<size_t> OptimalTrials(absl::Span<const MetricConfig> metrics,
                                  absl::Span<const Trial> trials);

// True when `trial` satisfies every safety threshold of `metrics` (and has each metric).
bool IsFeasible(absl::Span<const MetricConfig> metrics, const Trial& trial);

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_PARETO_H_
