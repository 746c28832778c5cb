#include "search/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "search/internal/cost_aware.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

// True when `a` is strictly better than `b` for `goal`.
bool Better(Goal goal, double a, double b) { return goal == Goal::kMaximize ? a > b : a < b; }

// The latest step at which `trial` reported `metric`, or nullopt when it never did.
std::optional<int64_t> LatestStep(const Trial& trial, const MetricConfig& metric) {
  std::optional<int64_t> latest;
  for (const Measurement& m : trial.measurements) {
    if (!m.metrics.contains(metric.name)) continue;
    if (!latest.has_value() || m.step > *latest) latest = m.step;
  }
  return latest;
}

// The best value of `metric` over the measurements of `trial` at or before `step` (NaN
// values ignored), or nullopt when there is none.
std::optional<double> BestUpTo(const Trial& trial, const MetricConfig& metric, double step) {
  std::optional<double> best;
  for (const Measurement& m : trial.measurements) {
    if (static_cast<double>(m.step) > step) continue;
    const auto it = m.metrics.find(metric.name);
    if (it == m.metrics.end() || std::isnan(it->second)) continue;
    if (!best.has_value() || Better(metric.goal, it->second, *best)) best = it->second;
  }
  return best;
}

// `others` may hold `trial` itself (callers often pass the whole study); it is not an
// "other" trial, so skip it by id, which is unique within a study.
bool IsSelf(const Trial& trial, const Trial& other) { return other.id == trial.id; }

bool MedianStop(const EarlyStoppingConfig& config, const MetricConfig& metric, const Trial& trial,
                absl::Span<const Trial> others, int64_t step) {
  const std::optional<double> own = BestUpTo(trial, metric, static_cast<double>(step));
  if (!own.has_value()) return false;
  std::vector<double> values;
  for (const Trial& other : others) {
    if (IsSelf(trial, other)) continue;
    if (std::optional<double> best = BestUpTo(other, metric, static_cast<double>(step))) {
      values.push_back(*best);
    }
  }
  if (values.empty() || static_cast<int64_t>(values.size()) < config.min_trials) return false;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double median = values[mid];
  if (values.size() % 2 == 0) {
    // The lower middle is the largest of the lower half.
    median = (median + *std::max_element(values.begin(), values.begin() + mid)) / 2;
  }
  return Better(metric.goal, median, *own);
}

// Asynchronous successive halving, stopping variant: rungs sit at min_resource * eta^k
// steps. At the highest rung the trial has reached, it continues only when its best value up
// to that rung is in the top 1/eta of the trials that reached the rung (itself included).
bool AshaStop(const EarlyStoppingConfig& config, const MetricConfig& metric, const Trial& trial,
              absl::Span<const Trial> others, int64_t step) {
  const double eta = config.reduction_factor;
  if (!(eta > 1)) return false;  // no halving without a factor above 1
  double rung = static_cast<double>(std::max<int64_t>(config.min_resource, 1));
  if (static_cast<double>(step) < rung) return false;  // below the first rung
  while (rung * eta <= static_cast<double>(step)) rung *= eta;

  const std::optional<double> own = BestUpTo(trial, metric, rung);
  if (!own.has_value()) return false;
  int reached = 0;          // other trials at or past the rung
  int strictly_better = 0;  // of those, the ones ahead of `trial`
  for (const Trial& other : others) {
    if (IsSelf(trial, other)) continue;
    const std::optional<int64_t> latest = LatestStep(other, metric);
    if (!latest.has_value() || static_cast<double>(*latest) < rung) continue;
    const std::optional<double> value = BestUpTo(other, metric, rung);
    if (!value.has_value()) continue;
    ++reached;
    if (Better(metric.goal, *value, *own)) ++strictly_better;
  }
  if (reached == 0 || reached < config.min_trials) return false;
  // Ties go the trial's way: it keeps its place when as good as the cut-off.
  const auto kept = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(reached + 1) / eta)));
  return strictly_better >= kept;
}

}  // namespace

bool ShouldStop(const EarlyStoppingConfig& config, const MetricConfig& metric, const Trial& trial,
                absl::Span<const Trial> others, const BudgetView& budget) {
  if (config.policy == EarlyStoppingPolicy::kNone) return false;
  const std::optional<int64_t> step = LatestStep(trial, metric);
  if (!step.has_value() || *step < config.min_steps) return false;
  switch (config.policy) {
    case EarlyStoppingPolicy::kNone:
      return false;
    case EarlyStoppingPolicy::kMedian:
      return MedianStop(config, metric, trial, others, *step);
    case EarlyStoppingPolicy::kAsha:
      return AshaStop(config, metric, trial, others, *step);
    case EarlyStoppingPolicy::kCostAware:
      return internal::CostAwareStop(
          {.max_step = config.max_step,
           .min_resource = config.min_resource,
           .reduction_factor = config.reduction_factor,
           .min_trials = config.min_trials,
           .budget_core_seconds = budget.budget_core_seconds,
           .spent_core_seconds = budget.spent_core_seconds},
          metric, trial, others);
  }
  return false;
}

}  // namespace evoscale::search
