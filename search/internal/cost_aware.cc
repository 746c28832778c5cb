#include "search/internal/cost_aware.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search::internal {

LearningCurve LearningCurve::Of(const Trial& trial, const MetricConfig& metric) {
  LearningCurve curve;
  curve.id = trial.id;
  curve.cores = trial.cpu_cores > 0 ? trial.cpu_cores : 1;
  std::vector<std::pair<int64_t, const Measurement*>> ordered;
  int64_t latest = 0;
  for (const Measurement& m : trial.measurements) {
    const auto it = m.metrics.find(metric.name);
    if (it == m.metrics.end() || std::isnan(it->second)) continue;
    ordered.emplace_back(m.step, &m);
    latest = std::max(latest, m.step);
  }
  // A finished run's final measurement is its last point (at its own step, or at the latest).
  if (trial.status == TrialStatus::kSucceeded) {
    const auto it = trial.final_measurement.metrics.find(metric.name);
    if (it != trial.final_measurement.metrics.end() && !std::isnan(it->second)) {
      ordered.emplace_back(std::max(latest, trial.final_measurement.step), &trial.final_measurement);
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const double sign = metric.goal == Goal::kMaximize ? 1.0 : -1.0;
  for (const auto& [step, m] : ordered) {
    const double value = sign * m->metrics.at(metric.name);
    const double elapsed = std::max(m->elapsed_seconds, curve.elapsed.empty() ? 0.0 : curve.elapsed.back());
    if (!curve.steps.empty() && curve.steps.back() == step) {  // a repeated step: keep the best
      curve.best.back() = std::max(curve.best.back(), value);
      curve.elapsed.back() = elapsed;
      continue;
    }
    curve.steps.push_back(step);
    curve.best.push_back(curve.best.empty() ? value : std::max(curve.best.back(), value));
    curve.elapsed.push_back(elapsed);
  }
  return curve;
}

namespace {

// Index of the last report at or before `step`, or -1.
std::ptrdiff_t IndexAt(const std::vector<int64_t>& steps, int64_t step) {
  return std::upper_bound(steps.begin(), steps.end(), step) - steps.begin() - 1;
}

}  // namespace

std::optional<double> LearningCurve::BestAt(int64_t step) const {
  const std::ptrdiff_t i = IndexAt(steps, step);
  if (i < 0) return std::nullopt;
  return best[static_cast<size_t>(i)];
}

double LearningCurve::ElapsedAt(int64_t step) const {
  const std::ptrdiff_t i = IndexAt(steps, step);
  return i < 0 ? 0.0 : elapsed[static_cast<size_t>(i)];
}

std::vector<int64_t> Rungs(const CostAwareSettings& config) {
  std::vector<int64_t> rungs;
  const double eta = config.reduction_factor > 1 ? config.reduction_factor : 3.0;
  double rung = static_cast<double>(std::max<int64_t>(config.min_resource, 1));
  while (rung < static_cast<double>(config.max_step)) {
    const auto step = static_cast<int64_t>(std::llround(rung));
    if (rungs.empty() || step > rungs.back()) rungs.push_back(step);
    rung *= eta;
  }
  return rungs;
}

namespace {

// Ranks 1..n, ties sharing their mean rank.
std::vector<double> Ranks(absl::Span<const double> x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i + j) / 2) + 1;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

double RankCorrelation(absl::Span<const double> x, absl::Span<const double> y) {
  if (x.size() != y.size() || x.size() < 2) return 0;
  const std::vector<double> rx = Ranks(x);
  const std::vector<double> ry = Ranks(y);
  const double mean = (static_cast<double>(x.size()) + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

double LogExpectedImprovement(double mean, double sd, double incumbent) {
  const double z = (mean - incumbent) / sd;
  // E[max(0, Y - incumbent)] = sd * h(z), h(z) = phi(z) + z Phi(z).
  constexpr double kLogSqrt2Pi = 0.9189385332046727;
  double log_h;
  if (z > -12) {  // phi + z Phi loses at most ~z^2 of double's 1e-16 relative precision here
    const double phi = std::exp(-0.5 * z * z - kLogSqrt2Pi);
    const double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
    log_h = std::log(std::max(phi + z * cdf, std::numeric_limits<double>::min()));
  } else {
    // Far in the lower tail: h(z) = phi(z) / z^2 (1 - 3/z^2 + 15/z^4 - 105/z^6 + 945/z^8 ...).
    const double w = 1 / (z * z);
    const double series = w * (-3 + w * (15 + w * (-105 + w * 945)));
    log_h = -0.5 * z * z - kLogSqrt2Pi - 2 * std::log(-z) + std::log1p(series);
  }
  return std::log(sd) + log_h;
}

double ElapsedExponentBetween(int64_t step0, double elapsed0, int64_t step1, double elapsed1) {
  return std::log(elapsed1 / elapsed0) /
         std::log(static_cast<double>(step1) / static_cast<double>(step0));
}

namespace {

// The k-th smallest element of `x` (k < x.size()).
double NthSmallest(std::vector<double> x, size_t k) {
  std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(k), x.end());
  return x[k];
}

// The lower quartile of a non-empty sample (the lower element where it falls between two).
double LowerQuartile(std::vector<double> x) {
  const size_t q = (x.size() - 1) / 4;
  return NthSmallest(std::move(x), q);
}

}  // namespace

double UpperMedian(std::vector<double> x) {
  const size_t mid = x.size() / 2;
  return NthSmallest(std::move(x), mid);
}

double MedianElapsedExponent(std::vector<double> exponents) {
  if (exponents.empty()) return 1.0;
  return std::clamp(UpperMedian(std::move(exponents)), 0.05, 2.0);
}

std::vector<double> ElapsedExponents(absl::Span<const LearningCurve> curves) {
  std::vector<double> exponents;
  for (const LearningCurve& c : curves) {
    size_t first = 0;
    while (first < c.steps.size() && !(c.elapsed[first] > 0 && c.steps[first] > 0)) ++first;
    const size_t last = c.steps.size() - 1;
    if (c.steps.empty() || first >= last || !(c.elapsed[last] > c.elapsed[first])) continue;
    exponents.push_back(
        ElapsedExponentBetween(c.steps[first], c.elapsed[first], c.steps[last], c.elapsed[last]));
  }
  return exponents;
}

double ElapsedExponent(absl::Span<const LearningCurve> curves) {
  return MedianElapsedExponent(ElapsedExponents(curves));
}

namespace {

// The values at `from` and `to` of the curves that reached `to`.
std::pair<std::vector<double>, std::vector<double>> Pairs(absl::Span<const LearningCurve> curves,
                                                          int64_t from, int64_t to) {
  std::pair<std::vector<double>, std::vector<double>> pairs;
  for (const LearningCurve& c : curves) {
    if (c.latest() < to) continue;
    const std::optional<double> a = c.BestAt(from);
    if (!a.has_value()) continue;
    pairs.first.push_back(*a);
    pairs.second.push_back(*c.BestAt(to));
  }
  return pairs;
}

// Whether the metric ranks trials at `rung`: over the trials that reached the furthest later
// step (a rung or max_step) that at least kMinRankPairs of them reached, the rank correlation
// of their values there with their values at the rung is at least kMinRankCorrelation, and
// significant (one-sided, about 2%: rho sqrt(n - 1) >= 2, strict because the test is repeated
// at every check). Unknown (false) until enough trials went past the rung.
bool MetricRanksAt(absl::Span<const LearningCurve> curves, const std::vector<int64_t>& rungs,
                   int64_t rung, int64_t max_step) {
  std::vector<int64_t> targets(std::upper_bound(rungs.begin(), rungs.end(), rung), rungs.end());
  targets.push_back(max_step);
  for (auto it = targets.rbegin(); it != targets.rend(); ++it) {
    const auto [at, target] = Pairs(curves, rung, *it);
    if (static_cast<int>(at.size()) < kMinRankPairs) continue;
    const double needed = std::max(kMinRankCorrelation,
                                   2.0 / std::sqrt(static_cast<double>(at.size()) - 1));
    return RankCorrelation(at, target) >= needed;
  }
  return false;
}

// target ~ intercept + slope x value, with the residual spread, fitted on the trials that
// reached the target step.
struct CurveModel {
  double intercept = 0;
  double slope = 1;
  double sd = 0;
  double Predict(double value) const { return intercept + slope * value; }
};

CurveModel FitCurveModel(const std::vector<double>& at, const std::vector<double>& target) {
  CurveModel model;
  const auto n = static_cast<double>(at.size());
  const double mx = std::accumulate(at.begin(), at.end(), 0.0) / n;
  const double my = std::accumulate(target.begin(), target.end(), 0.0) / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    sxx += (at[i] - mx) * (at[i] - mx);
    sxy += (at[i] - mx) * (target[i] - my);
    syy += (target[i] - my) * (target[i] - my);
  }
  model.slope = sxx > 0 ? std::max(0.0, sxy / sxx) : 1.0;
  model.intercept = my - model.slope * mx;
  double rss = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    const double r = target[i] - model.Predict(at[i]);
    rss += r * r;
  }
  const double resid = at.size() > 2 ? std::sqrt(rss / (n - 2)) : std::sqrt(syy / n);
  // A floor: a line through a handful of points is never as sure as its residuals say.
  model.sd = std::max({resid, 0.1 * std::sqrt(syy / n), 1e-9});
  return model;
}

// The model from `rung` to the furthest later step (a rung or max_step) that at least
// `min_pairs` of `curves` reached; the identity at `rung` when none did.
CurveModel ModelFrom(absl::Span<const LearningCurve> curves, const std::vector<int64_t>& rungs,
                     int64_t rung, int64_t max_step, int min_pairs) {
  std::vector<int64_t> targets(std::upper_bound(rungs.begin(), rungs.end(), rung), rungs.end());
  targets.push_back(max_step);
  for (auto it = targets.rbegin(); it != targets.rend(); ++it) {
    auto [at, target] = Pairs(curves, rung, *it);
    if (static_cast<int>(at.size()) >= min_pairs) return FitCurveModel(at, target);
  }
  const auto [at, unused] = Pairs(curves, rung, rung);
  CurveModel identity = FitCurveModel(at, at);
  return identity;
}

// Core-seconds `c` has left from its latest step to max_step at the optimistic end of what is
// known, or -1 while that is unknown: its elapsed time so far times what the finished runs
// took past the same step (the lower quartile of their ratios of elapsed time at max_step to
// theirs at the step) once kMinCostRuns have finished, or the power law's growth at the lower
// quartile of the exponents once kMinCostRuns trials have shown one.
double PredictedRemaining(const LearningCurve& c, absl::Span<const LearningCurve* const> finished,
                          absl::Span<const double> exponents, int64_t max_step) {
  const int64_t step = c.latest();
  const double own = c.ElapsedAt(step);
  if (own <= 0 || step < 1) return -1;
  std::vector<double> ratios;
  for (const LearningCurve* f : finished) {
    const double at = f->ElapsedAt(step);
    if (at > 0) ratios.push_back(f->ElapsedAt(max_step) / at);
  }
  double factor;
  if (static_cast<int>(ratios.size()) >= kMinCostRuns) {
    factor = std::max(0.0, LowerQuartile(std::move(ratios)) - 1);
  } else if (static_cast<int>(exponents.size()) >= kMinCostRuns) {
    const double low = std::clamp(LowerQuartile({exponents.begin(), exponents.end()}), 0.05, 2.0);
    factor = std::pow(static_cast<double>(max_step) / static_cast<double>(step), low) - 1;
  } else {
    return -1;
  }
  return c.cores * own * factor;
}

}  // namespace

bool CostAwareStop(const CostAwareSettings& config, const MetricConfig& metric,
                   const Trial& trial, absl::Span<const Trial> others) {
  const int64_t max_step = config.max_step;
  const LearningCurve self = LearningCurve::Of(trial, metric);
  if (max_step < 1 || self.empty() || self.latest() >= max_step) return false;
  const std::vector<int64_t> rungs = Rungs(config);
  const auto above = std::upper_bound(rungs.begin(), rungs.end(), self.latest());
  if (above == rungs.begin()) return false;  // below the first rung
  const int64_t rung = *std::prev(above);

  std::vector<LearningCurve> curves;
  double cores_running = self.cores;  // of the trials still short of max_step, itself included
  curves.reserve(others.size());
  for (const Trial& other : others) {
    if (other.id == trial.id) continue;
    LearningCurve c = LearningCurve::Of(other, metric);
    if (other.status == TrialStatus::kPending && c.latest() < max_step) cores_running += c.cores;
    if (!c.empty()) curves.push_back(std::move(c));
  }
  const std::vector<double> exponents = ElapsedExponents(curves);
  const double exponent = MedianElapsedExponent(exponents);
  const double growth = std::pow(static_cast<double>(max_step) / static_cast<double>(rung),
                                 exponent) - 1;
  // Core-seconds from the rung to max_step; steps stand in for seconds when none are reported.
  auto remaining_cost = [&](const LearningCurve& c) {
    const double elapsed = c.ElapsedAt(rung);
    return elapsed > 0 ? c.cores * elapsed * growth
                       : static_cast<double>(max_step - rung) * c.cores;
  };
  // The budget: a trial that cannot reach max_step before the budget runs out would spend
  // its share on a run that never counts. The budget runs out once the cores now running
  // have spent what is left (a stopped trial's cores go to a new one), so a trial has
  // left / (their cores) seconds; its remaining time is the optimistic end of what is known
  // (PredictedRemaining). Such a late trial is stopped where the metric ranks trials, and
  // also where it does not yet when a whole run of another trial would fit in that time: its
  // place is better spent on one like that (where no run fits, stopping it would only start
  // another that cannot finish either).
  bool late = false;
  if (config.budget_core_seconds > 0) {
    std::vector<const LearningCurve*> finished;
    for (const LearningCurve& c : curves) {
      if (c.latest() >= max_step) finished.push_back(&c);
    }
    const double own = PredictedRemaining(self, finished, exponents, max_step);
    const double left = config.budget_core_seconds - config.spent_core_seconds;
    const double lasts = left / cores_running;  // seconds until the budget runs out
    late = own >= 0 && own / self.cores > lasts;
    if (late && std::any_of(finished.begin(), finished.end(), [&](const LearningCurve* f) {
          return f->ElapsedAt(max_step) <= lasts;
        })) {
      return true;
    }
  }
  // No decision by value (nor by the pace of the budget) where the metric does not rank
  // trials yet.
  if (!MetricRanksAt(curves, rungs, rung, max_step)) return false;
  if (late) return true;

  std::vector<const LearningCurve*> at_rung;  // the others that reached the rung
  for (const LearningCurve& c : curves) {
    if (c.latest() >= rung && c.BestAt(rung).has_value()) at_rung.push_back(&c);
  }
  if (at_rung.empty() || static_cast<int>(at_rung.size()) < config.min_trials) return false;

  const CurveModel model = ModelFrom(curves, rungs, rung, max_step, config.min_trials);
  double incumbent = -std::numeric_limits<double>::infinity();
  for (const LearningCurve* c : at_rung) incumbent = std::max(incumbent, model.Predict(*c->BestAt(rung)));
  auto score = [&](const LearningCurve& c) {
    return LogExpectedImprovement(model.Predict(*c.BestAt(rung)), model.sd, incumbent) -
           std::log(std::max(remaining_cost(c), 1e-12));
  };
  const double own = score(self);
  int strictly_better = 0;
  for (const LearningCurve* c : at_rung) strictly_better += score(*c) > own ? 1 : 0;
  const double eta = config.reduction_factor > 1 ? config.reduction_factor : 3.0;
  const auto kept = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(at_rung.size() + 1) / eta)));
  return strictly_better >= kept;
}

}  // namespace evoscale::search::internal
