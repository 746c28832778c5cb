#include "search/importance.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace evoscale::search {
namespace {

constexpr int kMinTrials = 4;
constexpr size_t kMaxGroups = 10;

// Every parameter of `space`, conditional children after their parents.
void Collect(const std::vector<ParameterConfig>& parameters,
             std::vector<const ParameterConfig*>* out) {
  for (const ParameterConfig& p : parameters) {
    out->push_back(&p);
    for (const ConditionalChild& child : p.children) Collect(child.parameters, out);
  }
}

// A value as a number for ordering (categories order by their index: only grouping matters).
double Ordinal(const ParameterConfig& p, const ParameterValue& value) {
  if (const double* d = std::get_if<double>(&value)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  const std::string& s = std::get<std::string>(value);
  return static_cast<double>(std::find(p.categories.begin(), p.categories.end(), s) -
                             p.categories.begin());
}

// Group ids of `xs` (sorted by value with their objective values): by value when there are at
// most kMaxGroups distinct values, else into quantile bins that never split equal values.
std::vector<int> Groups(const std::vector<std::pair<double, double>>& sorted) {
  const size_t n = sorted.size();
  std::vector<int> group(n, 0);
  size_t distinct = 1;
  for (size_t i = 1; i < n; ++i) distinct += sorted[i].first != sorted[i - 1].first ? 1 : 0;
  if (distinct <= kMaxGroups) {
    for (size_t i = 1; i < n; ++i) {
      group[i] = group[i - 1] + (sorted[i].first != sorted[i - 1].first ? 1 : 0);
    }
    return group;
  }
  const size_t bins = std::clamp<size_t>(static_cast<size_t>(std::sqrt(static_cast<double>(n))),
                                         2, kMaxGroups);
  for (size_t i = 1; i < n; ++i) {
    const int by_rank = static_cast<int>(i * bins / n);
    // Equal values stay in one bin; a bin only starts at a new value (ids stay contiguous).
    const bool starts = sorted[i].first != sorted[i - 1].first && by_rank > group[i - 1];
    group[i] = group[i - 1] + (starts ? 1 : 0);
  }
  return group;
}

// Epsilon squared of the one-way grouping: (SSB - (k-1) MSW) / (SST + MSW), at least 0.
double EpsilonSquared(const std::vector<std::pair<double, double>>& sorted,
                      const std::vector<int>& group) {
  const size_t n = sorted.size();
  const int k = group.back() + 1;
  if (k < 2 || static_cast<int>(n) <= k) return 0;
  double mean = 0;
  for (const auto& [x, y] : sorted) mean += y;
  mean /= static_cast<double>(n);
  std::vector<double> sum(k, 0.0);
  std::vector<int> count(k, 0);
  for (size_t i = 0; i < n; ++i) {
    sum[group[i]] += sorted[i].second;
    ++count[group[i]];
  }
  double sst = 0, ssw = 0;
  for (size_t i = 0; i < n; ++i) {
    const double y = sorted[i].second;
    sst += (y - mean) * (y - mean);
    const double group_mean = sum[group[i]] / count[group[i]];
    ssw += (y - group_mean) * (y - group_mean);
  }
  if (sst <= 0) return 0;
  const double ssb = sst - ssw;
  const double msw = ssw / static_cast<double>(static_cast<int>(n) - k);
  return std::max(0.0, (ssb - (k - 1) * msw) / (sst + msw));
}

}  // namespace

std::vector<ParameterImportance> MainEffectImportance(const SearchSpace& space,
                                                      absl::Span<const Trial> trials,
                                                      const std::string& metric) {
  std::vector<const ParameterConfig*> parameters;
  Collect(space.parameters, &parameters);
  std::vector<ParameterImportance> out;
  double total = 0;
  for (const ParameterConfig* p : parameters) {
    std::vector<std::pair<double, double>> points;  // (parameter value, objective)
    for (const Trial& t : trials) {
      if (t.status != TrialStatus::kSucceeded) continue;
      const auto value = t.final_measurement.metrics.find(metric);
      const auto param = t.parameters.find(p->name);
      if (value == t.final_measurement.metrics.end() || !std::isfinite(value->second) ||
          param == t.parameters.end()) {
        continue;
      }
      points.emplace_back(Ordinal(*p, param->second), value->second);
    }
    ParameterImportance imp{.name = p->name, .trials = static_cast<int>(points.size())};
    if (imp.trials >= kMinTrials) {
      std::sort(points.begin(), points.end());
      imp.explained_variance = EpsilonSquared(points, Groups(points));
    }
    total += imp.explained_variance;
    out.push_back(std::move(imp));
  }
  for (ParameterImportance& imp : out) {
    imp.importance = total > 0 ? imp.explained_variance / total : 0;
  }
  std::sort(out.begin(), out.end(), [](const ParameterImportance& a, const ParameterImportance& b) {
    if (a.importance != b.importance) return a.importance > b.importance;
    return a.name < b.name;
  });
  return out;
}

}  // namespace evoscale::search
