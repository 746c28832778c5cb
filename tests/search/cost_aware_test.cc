#include "search/internal/cost_aware.h"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/early_stopping.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

using ::testing::ElementsAre;

const MetricConfig kAuc{.name = "auc", .goal = Goal::kMaximize};
const MetricConfig kLoss{.name = "loss", .goal = Goal::kMinimize};

// A trial reporting `values[i]` at step i + 1, `seconds_per_step` x (i + 1) elapsed.
Trial Curve(int64_t id, const std::vector<double>& values, double seconds_per_step = 1,
            const std::string& metric = "auc") {
  Trial trial;
  trial.id = id;
  for (size_t i = 0; i < values.size(); ++i) {
    Measurement m;
    m.step = static_cast<int64_t>(i) + 1;
    m.elapsed_seconds = seconds_per_step * static_cast<double>(i + 1);
    m.metrics[metric] = values[i];
    trial.measurements.push_back(m);
  }
  return trial;
}

// A curve of `steps` points that starts at `start` and approaches `end` (1 - 1/step shape).
std::vector<double> Rising(double start, double end, int steps) {
  std::vector<double> values;
  for (int s = 1; s <= steps; ++s) values.push_back(end - (end - start) / s);
  return values;
}

CostAwareSettings CostAware(int64_t max_step, double budget = 0, double spent = 0) {
  return {.max_step = max_step,
          .min_resource = 1,
          .reduction_factor = 3,
          .min_trials = 3,
          .budget_core_seconds = budget,
          .spent_core_seconds = spent};
}

TEST(CostAwareTest, RungsGrowByTheReductionFactorBelowMaxStep) {
  EXPECT_THAT(Rungs(CostAware(32)), ElementsAre(1, 3, 9, 27));
  EXPECT_THAT(Rungs(CostAware(27)), ElementsAre(1, 3, 9));
  EXPECT_THAT(Rungs(CostAware(1)), ElementsAre());
}

TEST(CostAwareTest, RankCorrelationIsSpearmansWithTiesAtTheirMeanRank) {
  EXPECT_DOUBLE_EQ(RankCorrelation(std::vector<double>{1, 2, 3, 4}, std::vector<double>{10, 20, 30, 40}), 1);
  EXPECT_DOUBLE_EQ(RankCorrelation(std::vector<double>{1, 2, 3, 4}, std::vector<double>{4, 3, 2, 1}), -1);
  // Monotone but not linear: still 1.
  EXPECT_DOUBLE_EQ(RankCorrelation(std::vector<double>{1, 2, 3}, std::vector<double>{1, 100, 101}), 1);
  EXPECT_DOUBLE_EQ(RankCorrelation(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3}), 0);
  // Ties: ranks (1.5, 1.5, 3) against (1, 2, 3).
  EXPECT_NEAR(RankCorrelation(std::vector<double>{5, 5, 7}, std::vector<double>{1, 2, 3}),
              std::sqrt(3.0) / 2, 1e-12);
}

TEST(CostAwareTest, LogExpectedImprovementMatchesTheClosedFormAndStaysFiniteFarBelow) {
  // E[max(0, Y)] for Y ~ N(0, 1) is 1/sqrt(2 pi).
  EXPECT_NEAR(LogExpectedImprovement(0, 1, 0), -0.5 * std::log(2 * std::numbers::pi), 1e-12);
  // Far above the incumbent the improvement is the gap.
  EXPECT_NEAR(std::exp(LogExpectedImprovement(10, 1, 0)), 10, 1e-9);
  // Far below, where phi + z Phi cancels in double, the tail expansion agrees with the exact
  // formula evaluated in long double, on both sides of the switch, and stays finite and
  // ordered by the gap.
  auto exact = [](long double z) {
    const long double phi = std::exp(-0.5L * z * z) / std::sqrt(2 * std::numbers::pi_v<long double>);
    return static_cast<double>(std::log(phi + z * 0.5L * std::erfc(-z / std::sqrt(2.0L))));
  };
  for (double z : {-6.0, -11.9, -12.1, -15.0}) {
    EXPECT_NEAR(LogExpectedImprovement(z, 1, 0), exact(z), 1e-4) << z;
  }
  EXPECT_NEAR(LogExpectedImprovement(-12.1 * 2, 2, 0), std::log(2.0) + exact(-12.1), 2e-3);
  const double c = LogExpectedImprovement(-40, 1, 0);
  EXPECT_TRUE(std::isfinite(c));
  EXPECT_GT(LogExpectedImprovement(-39, 1, 0), c);
}

TEST(CostAwareTest, ElapsedExponentIsTheMedianPowerOfTimeInSteps) {
  std::vector<LearningCurve> curves;
  for (int id = 1; id <= 3; ++id) {
    Trial t;
    t.id = id;
    for (int s = 1; s <= 16; s *= 2) {
      Measurement m;
      m.step = s;
      m.elapsed_seconds = id * std::sqrt(static_cast<double>(s));  // a quarter of the data: half the time
      m.metrics["auc"] = 0.5;
      t.measurements.push_back(m);
    }
    curves.push_back(LearningCurve::Of(t, kAuc));
  }
  EXPECT_NEAR(ElapsedExponent(curves), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(ElapsedExponent({}), 1.0);
}

TEST(CostAwareTest, LearningCurveOrientsTheMetricAndKeepsTheBestSoFar) {
  const LearningCurve c = LearningCurve::Of(Curve(1, {0.9, 0.5, 0.7}, 1, "loss"), kLoss);
  EXPECT_THAT(c.steps, ElementsAre(1, 2, 3));
  EXPECT_THAT(c.best, ElementsAre(-0.9, -0.5, -0.5));
  EXPECT_EQ(c.BestAt(0), std::nullopt);
  EXPECT_DOUBLE_EQ(*c.BestAt(10), -0.5);
  EXPECT_DOUBLE_EQ(c.ElapsedAt(2), 2);
}

// Ten finished runs of 27 steps whose value at every step keeps their order (the metric ranks
// trials from step 1): final values 0.70 .. 0.79.
std::vector<Trial> RankedFinishedRuns() {
  std::vector<Trial> runs;
  for (int i = 0; i < 10; ++i) {
    runs.push_back(Curve(100 + i, Rising(0.5 + 0.01 * i, 0.70 + 0.01 * i, 27)));
  }
  return runs;
}

TEST(CostAwareTest, StopsAClearlyWorseTrialOnceTheMetricRanksTrials) {
  const std::vector<Trial> others = RankedFinishedRuns();
  EXPECT_TRUE(CostAwareStop(CostAware(27), kAuc, Curve(1, Rising(0.40, 0.60, 3)), others));
  EXPECT_FALSE(CostAwareStop(CostAware(27), kAuc, Curve(1, Rising(0.60, 0.80, 3)), others));
}

TEST(CostAwareTest, NeverStopsWhereTheMetricDoesNotRankTrialsYet) {
  // Early values that say nothing of the final ones: every run reports about 0.50 at steps 1-3
  // in an order unrelated to (here the reverse of) where it ends up.
  std::vector<Trial> others;
  for (int i = 0; i < 10; ++i) {
    std::vector<double> values = Rising(0.5, 0.70 + 0.01 * i, 27);
    for (int s = 0; s < 9; ++s) values[s] = 0.50 + 0.001 * (9 - i);
    others.push_back(Curve(100 + i, values));
  }
  const Trial worst = Curve(1, std::vector<double>(3, 0.40));
  EXPECT_FALSE(CostAwareStop(CostAware(27), kAuc, worst, others));
  // Too few trials that reached the next rung to tell: no decision either.
  const std::vector<Trial> ranked = RankedFinishedRuns();
  const std::vector<Trial> few(ranked.begin(), ranked.begin() + kMinRankPairs - 1);
  EXPECT_FALSE(CostAwareStop(CostAware(27), kAuc, Curve(1, Rising(0.40, 0.60, 3)), few));
}

TEST(CostAwareTest, AWeakRankCorrelationOverFewTrialsIsNotEnough) {
  // Six finished runs whose step-3 order agrees with their final order but for one swap
  // (rho = 0.943, significant at 6 runs) versus two swaps (rho = 0.886: it needs 2/sqrt(5)).
  auto runs = [](const std::vector<int>& early_rank) {
    std::vector<Trial> others;
    for (int i = 0; i < 6; ++i) {
      std::vector<double> values = Rising(0.5, 0.70 + 0.01 * i, 27);
      for (int s = 0; s < 9; ++s) values[s] = 0.50 + 0.01 * early_rank[i];
      others.push_back(Curve(100 + i, values));
    }
    return others;
  };
  const Trial worst = Curve(1, std::vector<double>(3, 0.40));
  EXPECT_TRUE(CostAwareStop(CostAware(27), kAuc, worst, runs({0, 2, 1, 3, 4, 5})));
  EXPECT_FALSE(CostAwareStop(CostAware(27), kAuc, worst, runs({1, 0, 3, 2, 4, 5})));
}

TEST(CostAwareTest, ACheapTrialIsKeptWhereAnEquallyGoodExpensiveOneStops) {
  // Others at rung 3 only (about to be judged), plus the finished runs that fit the model.
  std::vector<Trial> others = RankedFinishedRuns();
  for (int i = 0; i < 8; ++i) {
    others.push_back(Curve(200 + i, Rising(0.62 + 0.002 * i, 0.80, 3), /*seconds_per_step=*/1));
  }
  const std::vector<double> values = Rising(0.615, 0.80, 3);  // just behind those eight
  EXPECT_FALSE(CostAwareStop(CostAware(27), kAuc, Curve(1, values, 0.05), others));
  EXPECT_TRUE(CostAwareStop(CostAware(27), kAuc, Curve(1, values, 20), others));
}

TEST(CostAwareTest, StopsATrialThatCannotFinishWithinTheBudgetLeft) {
  const std::vector<Trial> others = RankedFinishedRuns();
  const Trial best = Curve(1, Rising(0.70, 0.90, 3));  // 3 s to step 3; ~24 s more to 27
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 900), kAuc, best, others));
  EXPECT_TRUE(CostAwareStop(CostAware(27, 1000, 990), kAuc, best, others));
}

TEST(CostAwareTest, NoBudgetStopBeforeTheMetricRanksTrialsWhereNoWholeRunFits) {
  const std::vector<Trial> ranked = RankedFinishedRuns();
  const std::vector<Trial> few(ranked.begin(), ranked.begin() + kMinRankPairs - 1);
  const Trial best = Curve(1, Rising(0.70, 0.90, 3));
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 999), kAuc, best, few));
}

TEST(CostAwareTest, ABudgetStopNeedsTheCostOfStepsToBeKnown) {
  // Ten runs stopped at step 9 rank trials at step 3 and show elapsed time linear in steps:
  // before any run finished, the power law says the best trial has 3 x (27/3 - 1) = 24 s to go.
  std::vector<Trial> partial;
  for (int i = 0; i < 10; ++i) {
    std::vector<double> values = Rising(0.5 + 0.01 * i, 0.70 + 0.01 * i, 27);
    values.resize(9);
    partial.push_back(Curve(100 + i, values));
    partial.back().status = TrialStatus::kStopped;
  }
  const Trial best = Curve(1, Rising(0.70, 0.90, 3));
  EXPECT_TRUE(CostAwareStop(CostAware(27, 1000, 980), kAuc, best, partial));
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 970), kAuc, best, partial));
  // Where the others report no elapsed time, nothing is known of what steps cost.
  for (Trial& t : partial) {
    for (Measurement& m : t.measurements) m.elapsed_seconds = 0;
  }
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 999), kAuc, best, partial));
}

TEST(CostAwareTest, RunningTrialsShareTheTimeTheBudgetLasts) {
  // 40 core-seconds left and two trials running on a core each: the budget lasts 20 s. Trial 1
  // at step 3 (3 s) has 24 s to go and stops; trial 2, running at step 9 (9 s), has 18 s to go
  // and continues.
  std::vector<Trial> others = RankedFinishedRuns();
  const Trial self = Curve(1, Rising(0.70, 0.90, 3));
  const Trial nearer = Curve(2, Rising(0.70, 0.90, 9));
  others.push_back(nearer);
  EXPECT_TRUE(CostAwareStop(CostAware(27, 1000, 960), kAuc, self, others));
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 900), kAuc, self, others));  // lasts 50 s
  std::vector<Trial> with_self = RankedFinishedRuns();
  with_self.push_back(self);
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 960), kAuc, nearer, with_self));
  // A trial that no longer runs holds no core: alone, trial 1 has 40 s.
  others.back().status = TrialStatus::kStopped;
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 960), kAuc, self, others));
  // A running trial holds its core before its first report: 45 s left, two cores, 22.5 s.
  Trial silent;
  silent.id = 3;
  others.push_back(silent);
  EXPECT_TRUE(CostAwareStop(CostAware(27, 1000, 955), kAuc, self, others));
  others.pop_back();
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 955), kAuc, self, others));
}

TEST(CostAwareTest, BeforeTheMetricRanksTrialsALateOneStopsOnlyWhereAWholeRunFits) {
  // Five finished runs of 27 s each (too few to rank trials). Trial 1 spends 5 s a step: at
  // step 3 (15 s) it has 8 x 15 = 120 s to go.
  const std::vector<Trial> ranked = RankedFinishedRuns();
  const std::vector<Trial> few(ranked.begin(), ranked.begin() + kMinRankPairs - 1);
  const Trial slow = Curve(1, Rising(0.70, 0.90, 3), /*seconds_per_step=*/5);
  // 50 s left: it cannot finish, and a run like the finished ones (27 s) would.
  EXPECT_TRUE(CostAwareStop(CostAware(27, 1000, 950), kAuc, slow, few));
  // 20 s left: no run fits either; stopping it would only start another that cannot finish.
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 980), kAuc, slow, few));
  // 200 s left: it can finish.
  EXPECT_FALSE(CostAwareStop(CostAware(27, 1000, 800), kAuc, slow, few));
}

TEST(CostAwareTest, MinimizedMetricsAreJudgedTheOtherWayUp) {
  std::vector<Trial> others;
  for (int i = 0; i < 10; ++i) {
    std::vector<double> values = Rising(0.5 + 0.01 * i, 0.70 + 0.01 * i, 27);
    for (double& v : values) v = 1 - v;  // a loss: lower is better
    others.push_back(Curve(100 + i, values, 1, "loss"));
  }
  std::vector<double> bad = Rising(0.40, 0.60, 3), good = Rising(0.60, 0.80, 3);
  for (double& v : bad) v = 1 - v;
  for (double& v : good) v = 1 - v;
  EXPECT_TRUE(CostAwareStop(CostAware(27), kLoss, Curve(1, bad, 1, "loss"), others));
  EXPECT_FALSE(CostAwareStop(CostAware(27), kLoss, Curve(1, good, 1, "loss"), others));
}

TEST(CostAwareTest, NoDecisionBelowTheFirstRungOrAtTheFullRun) {
  const std::vector<Trial> others = RankedFinishedRuns();
  CostAwareSettings config = CostAware(27);
  config.min_resource = 3;
  EXPECT_FALSE(CostAwareStop(config, kAuc, Curve(1, Rising(0.1, 0.2, 2)), others));
  EXPECT_FALSE(CostAwareStop(CostAware(27), kAuc, Curve(1, Rising(0.1, 0.2, 27)), others));
  EXPECT_FALSE(CostAwareStop(CostAware(0), kAuc, Curve(1, Rising(0.1, 0.2, 3)), others));
}

TEST(CostAwareTest, ShouldStopDispatchesToTheCostAwarePolicyWithTheBudget) {
  const std::vector<Trial> others = RankedFinishedRuns();
  EarlyStoppingConfig config;
  config.policy = EarlyStoppingPolicy::kCostAware;
  config.max_step = 27;
  EXPECT_TRUE(ShouldStop(config, kAuc, Curve(1, Rising(0.40, 0.60, 3)), others));
  const Trial best = Curve(1, Rising(0.70, 0.90, 3));
  EXPECT_FALSE(ShouldStop(config, kAuc, best, others, {.budget_core_seconds = 1000, .spent_core_seconds = 900}));
  EXPECT_TRUE(ShouldStop(config, kAuc, best, others, {.budget_core_seconds = 1000, .spent_core_seconds = 990}));
}

}  // namespace
}  // namespace evoscale::search::internal
