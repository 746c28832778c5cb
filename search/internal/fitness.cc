#include "search/internal/fitness.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

// The violation charged for a constraint metric that is missing or NaN: worse than any
// measured violation of a sane metric, still ordered below a failed trial.
constexpr double kMissingViolation = 1e300;

}  // namespace

FitnessFunction::FitnessFunction(absl::Span<const MetricConfig> metrics, bool single_objective) {
  for (const MetricConfig& metric : metrics) {
    if (metric.safety_threshold.has_value()) {
      constraints_.push_back(metric);
    } else {
      objectives_.push_back(metric);
    }
  }
  if (objectives_.empty()) objectives_.assign(metrics.begin(), metrics.end());
  if (single_objective && objectives_.size() > 1) objectives_.resize(1);
}

Fitness FitnessFunction::Evaluate(const Trial& trial) const {
  Fitness fitness;
  if (trial.status != TrialStatus::kSucceeded && trial.status != TrialStatus::kStopped) {
    return fitness;
  }
  if (trial.status == TrialStatus::kStopped) {
    fitness.stopped_at = std::max<int64_t>(1, trial.final_measurement.step);
    for (const Measurement& m : trial.measurements) {
      fitness.stopped_at = std::max(fitness.stopped_at, m.step);
    }
  }
  const auto& metrics = trial.final_measurement.metrics;
  fitness.losses.reserve(objectives_.size());
  for (const MetricConfig& objective : objectives_) {
    const auto it = metrics.find(objective.name);
    if (it == metrics.end() || std::isnan(it->second)) return Fitness{};
    fitness.losses.push_back(objective.goal == Goal::kMinimize ? it->second : -it->second);
  }
  for (const MetricConfig& constraint : constraints_) {
    const auto it = metrics.find(constraint.name);
    if (it == metrics.end() || std::isnan(it->second)) {
      fitness.violation += kMissingViolation;
      continue;
    }
    const double threshold = *constraint.safety_threshold;
    const double excess =
        constraint.goal == Goal::kMaximize ? threshold - it->second : it->second - threshold;
    // Relative to the threshold's magnitude, so constraints of different units add up.
    if (excess > 0) fitness.violation += excess / std::max(1.0, std::abs(threshold));
  }
  fitness.failed = false;
  return fitness;
}

namespace {

// True when `a` went further than `b` (a full run is furthest).
bool Further(const Fitness& a, const Fitness& b) {
  if (a.stopped_at == b.stopped_at) return false;
  if (a.stopped_at == 0 || b.stopped_at == 0) return a.stopped_at == 0;
  return a.stopped_at > b.stopped_at;
}

}  // namespace

bool Better(const Fitness& a, const Fitness& b) {
  if (a.failed || b.failed) return !a.failed && b.failed;
  if (a.violation != b.violation) return a.violation < b.violation;
  if (a.stopped_at != b.stopped_at) return Further(a, b);
  return !a.losses.empty() && !b.losses.empty() && a.losses[0] < b.losses[0];
}

bool Dominates(const Fitness& a, const Fitness& b) {
  if (a.failed || b.failed) return !a.failed && b.failed;
  if (a.violation != b.violation) return a.violation < b.violation;
  if (a.stopped_at != b.stopped_at) return Further(a, b);
  bool better_somewhere = false;
  for (size_t k = 0; k < a.losses.size() && k < b.losses.size(); ++k) {
    if (a.losses[k] > b.losses[k]) return false;
    if (a.losses[k] < b.losses[k]) better_somewhere = true;
  }
  return better_somewhere;
}

}  // namespace evoscale::search::internal
