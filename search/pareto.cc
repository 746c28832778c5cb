#include "search/pareto.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

// The objectives: metrics without a safety threshold, or every metric when all of them
// carry one (a study of constraints only still has something to rank by).
std::vector<const MetricConfig*> Objectives(absl::Span<const MetricConfig> metrics) {
  std::vector<const MetricConfig*> objectives;
  for (const MetricConfig& metric : metrics) {
    if (!metric.safety_threshold.has_value()) objectives.push_back(&metric);
  }
  if (objectives.empty()) {
    for (const MetricConfig& metric : metrics) objectives.push_back(&metric);
  }
  return objectives;
}

// The objective values of `trial`, each negated for MINIMIZE so that larger is better.
std::vector<double> Oriented(absl::Span<const MetricConfig* const> objectives, const Trial& trial) {
  std::vector<double> values;
  values.reserve(objectives.size());
  for (const MetricConfig* metric : objectives) {
    const double value = trial.final_measurement.metrics.at(metric->name);
    values.push_back(metric->goal == Goal::kMaximize ? value : -value);
  }
  return values;
}

// True when `a` is at least as good as `b` everywhere and better somewhere.
bool Dominates(const std::vector<double>& a, const std::vector<double>& b) {
  bool better_somewhere = false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] < b[k]) return false;
    if (a[k] > b[k]) better_somewhere = true;
  }
  return better_somewhere;
}

}  // namespace

bool IsFeasible(absl::Span<const MetricConfig> metrics, const Trial& trial) {
  for (const MetricConfig& metric : metrics) {
    const auto it = trial.final_measurement.metrics.find(metric.name);
    // NaN cannot be ranked or checked against a threshold: treat it as missing.
    if (it == trial.final_measurement.metrics.end() || std::isnan(it->second)) return false;
    if (!metric.safety_threshold.has_value()) continue;
    const double threshold = *metric.safety_threshold;
    const bool satisfied =
        metric.goal == Goal::kMaximize ? it->second >= threshold : it->second <= threshold;
    if (!satisfied) return false;
  }
  return true;
}

std::vector<size_t> OptimalTrials(absl::Span<const MetricConfig> metrics,
                                  absl::Span<const Trial> trials) {
  const std::vector<const MetricConfig*> objectives = Objectives(metrics);
  std::vector<size_t> candidates;
  std::vector<std::vector<double>> values;  // parallel to candidates
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].status != TrialStatus::kSucceeded || !IsFeasible(metrics, trials[i])) continue;
    candidates.push_back(i);
    values.push_back(Oriented(objectives, trials[i]));
  }

  std::vector<size_t> optimal;
  if (objectives.size() == 1) {
    // O(n): find the best, then keep everything tied with it.
    double best = 0;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (c == 0 || values[c][0] > best) best = values[c][0];
    }
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (values[c][0] == best) optimal.push_back(candidates[c]);
    }
    return optimal;
  }
  // Lexicographically best first: whatever dominates a candidate sorts before it, and a
  // dominated candidate is dominated by some member of the front (dominance is transitive), so
  // each candidate need only be checked against the front found so far: O(n log n + n f m) for
  // a front of f, where checking against every candidate was O(n^2 m) (10,000 trials of two
  // objectives: the dashboard asks for the front on every refresh).
  std::vector<size_t> order(candidates.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] > values[b]; });
  std::vector<size_t> front;  // into candidates
  for (size_t c : order) {
    bool dominated = false;
    for (size_t f : front) {
      if (Dominates(values[f], values[c])) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(c);
  }
  std::sort(front.begin(), front.end());
  for (size_t f : front) optimal.push_back(candidates[f]);
  return optimal;
}

}  // namespace evoscale::search
