// How the evolutionary designers rank completed trials: objectives oriented as losses (lower
// is better), constraints from safety thresholds ranked feasibility-first, and every trial
// that cannot be ranked (failed, infeasible, a missing or NaN objective) ranked worst.
#ifndef EVOSCALE_SEARCH_INTERNAL_FITNESS_H_
#define EVOSCALE_SEARCH_INTERNAL_FITNESS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search::internal {

// Lower is better, compared lexicographically: first the total constraint violation (0 when
// feasible), then how far the run went (a full run before any stopped one, and a run stopped
// later before one stopped earlier: it was promoted further), then the losses. A trial that
// cannot be ranked has `failed` set and compares worse than every other.
struct Fitness {
  bool failed = true;
  double violation = 0;         // sum of threshold violations, each relative to the threshold
  int64_t stopped_at = 0;       // 0: a full run; else the last step of a run stopped early
  std::vector<double> losses;   // one per objective: the value, negated for MAXIMIZE
};

// The objectives and constraints of a study.
class FitnessFunction {
 public:
  // Objectives are the metrics without a safety threshold (every metric when all carry one,
  // as in pareto.h). `single_objective` keeps only the first of them.
  FitnessFunction(absl::Span<const MetricConfig> metrics, bool single_objective);

  int num_objectives() const { return static_cast<int>(objectives_.size()); }

  // Never fails: a trial that is neither kSucceeded nor kStopped, or lacks an objective, comes
  // back failed; a missing or NaN constraint metric counts as a large violation. A kStopped
  // trial is ranked by its final measurement (its last value) at the step it stopped at.
  Fitness Evaluate(const Trial& trial) const;

 private:
  // Constant after construction.
  std::vector<MetricConfig> objectives_;
  std::vector<MetricConfig> constraints_;
};

// Single-objective order: true when `a` ranks strictly before `b` (failed last, then less
// violation, then the further run, then a lower first loss).
bool Better(const Fitness& a, const Fitness& b);

// Constrained Pareto dominance (Deb's feasibility-first rule): a non-failed trial dominates a
// failed one; less violation dominates more; a further run dominates a shorter one; between
// equally feasible runs as long, ordinary dominance of the losses.
bool Dominates(const Fitness& a, const Fitness& b);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_FITNESS_H_
