// COST_AWARE early stopping: asynchronous promotion by expected gain per predicted remaining
// core-second. Decisions are taken at rungs (min_resource x eta^k steps, below max_step), as
// ASHA's, but trials are ranked at a rung by what continuing them buys per core-second rather
// than by their raw value:
//   - a learning-curve model shared across the study's trials maps a trial's best value at the
//     rung to its value at the furthest later rung (or max_step) that enough trials reached:
//     a least-squares line over those trials, with its residual spread;
//   - gain = the expected improvement of that prediction over the best value the other trials
//     have shown (or are predicted to show) there;
//   - remaining cost = the trial's cores x its elapsed seconds at the rung x ((max_step/rung)^g
//     - 1), g the study's median exponent of elapsed time in steps (steps cost non-linearly);
//   - the trial continues when its gain per remaining core-second is in the top 1/eta of the
//     trials at the rung (itself included; ties go its way).
// No trial is stopped by its value at a step where the metric does not yet rank trials: over
// the trials that went furthest past the rung (at least kMinRankPairs of them), the rank
// correlation of their values at the rung with their values there must be at least
// kMinRankCorrelation and significant. Under a budget, a trial that cannot finish before the
// budget runs out is stopped too. The budget runs out once the cores now running (the trials
// short of max_step) have spent what is left, so a trial has left / (their cores) seconds; what
// it needs is its elapsed time times what the finished runs took past its step (the lower
// quartile of their ratios; the power law's growth at the lower quartile of the exponents
// before kMinCostRuns have finished): the optimistic end, since stopping wastes what it spent.
// Such a late trial is stopped where the metric ranks trials, and where it does not yet only
// when a whole run of a finished trial would fit in the time left (else stopping it would just
// start another that cannot finish either).
#ifndef EVOSCALE_SEARCH_INTERNAL_COST_AWARE_H_
#define EVOSCALE_SEARCH_INTERNAL_COST_AWARE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search::internal {

// The rank correlation (Spearman) a rung must show with a later step before its decisions stop
// trials, and the trials that must have reached both for it to count.
inline constexpr double kMinRankCorrelation = 0.5;
inline constexpr int kMinRankPairs = 6;
// The trials whose elapsed times must be known (finished runs, or curves with an exponent)
// before the budget rule predicts what a trial has left to spend.
inline constexpr int kMinCostRuns = 2;

// One trial's learning curve for one metric, oriented so that higher is better: the best
// value so far and the cumulative elapsed seconds (never decreasing) at each reported step.
struct LearningCurve {
  int64_t id = 0;
  std::vector<int64_t> steps;  // ascending, unique
  std::vector<double> best;    // best oriented value at or before steps[k]
  std::vector<double> elapsed;  // cumulative elapsed seconds at steps[k]
  double cores = 1;

  static LearningCurve Of(const Trial& trial, const MetricConfig& metric);
  bool empty() const { return steps.empty(); }
  int64_t latest() const { return steps.empty() ? 0 : steps.back(); }
  // The best value at or before `step`, nullopt before the first report.
  std::optional<double> BestAt(int64_t step) const;
  // The elapsed seconds at the last report at or before `step` (0 before the first).
  double ElapsedAt(int64_t step) const;
};

// The policy's settings (EarlyStoppingConfig's) and the study's spending when it decides.
struct CostAwareSettings {
  int64_t max_step = 0;           // the step of a full run; no decision without one
  int64_t min_resource = 1;       // the first rung
  double reduction_factor = 3;    // eta: rungs grow by it, the top 1/eta continue
  int min_trials = 3;             // other trials at a rung before it decides
  double budget_core_seconds = 0;  // 0 = no budget
  double spent_core_seconds = 0;
};

// Rung steps below `max_step`: min_resource x eta^k, k = 0, 1, ...
std::vector<int64_t> Rungs(const CostAwareSettings& settings);

// Spearman's rank correlation of two equally long samples (ties get their mean rank); 0 when
// either is constant or there are fewer than 2 pairs.
double RankCorrelation(absl::Span<const double> x, absl::Span<const double> y);

// log E[max(0, Y - incumbent)] for Y ~ Normal(mean, sd), sd > 0; finite even far below the
// incumbent, so that trials far behind still rank by how far.
double LogExpectedImprovement(double mean, double sd, double incumbent);

// The exponent g of elapsed ~ step^g between two reports (steps > 0, elapsed > 0).
double ElapsedExponentBetween(int64_t step0, double elapsed0, int64_t step1, double elapsed1);
// The upper median of a non-empty sample (the upper element where it falls between two).
double UpperMedian(std::vector<double> x);
// The median of per-trial exponents, clamped to [0.05, 2]; 1 when there are none.
double MedianElapsedExponent(std::vector<double> exponents);
// The median over `curves` of each one's exponent of elapsed time in steps (between its first
// and latest report with elapsed time); 1 when none has two.
double ElapsedExponent(absl::Span<const LearningCurve> curves);

// Whether `trial` (the latest step it reported) should stop, against `others` (may include
// it). Cost: O(measurements of the study x rungs).
bool CostAwareStop(const CostAwareSettings& settings, const MetricConfig& metric,
                   const Trial& trial, absl::Span<const Trial> others);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_COST_AWARE_H_
