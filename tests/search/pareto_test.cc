#include "search/pareto.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Trial Finished(std::map<std::string, double> metrics,
               TrialStatus status = TrialStatus::kSucceeded) {
  static int64_t next_id = 1;
  Trial trial;
  trial.id = next_id++;
  trial.status = status;
  trial.final_measurement.metrics = std::move(metrics);
  return trial;
}

MetricConfig Maximize(std::string name) { return {.name = std::move(name)}; }
MetricConfig Minimize(std::string name) {
  return {.name = std::move(name), .goal = Goal::kMinimize};
}
MetricConfig Constraint(std::string name, Goal goal, double threshold) {
  return {.name = std::move(name), .goal = goal, .safety_threshold = threshold};
}

TEST(OptimalTrialsTest, SingleObjectiveReturnsEveryTrialTiedForBest) {
  const std::vector<MetricConfig> metrics = {Maximize("auc")};
  const std::vector<Trial> trials = {Finished({{"auc", 0.9}}), Finished({{"auc", 0.95}}),
                                     Finished({{"auc", 0.95}}), Finished({{"auc", 0.5}})};
  EXPECT_THAT(OptimalTrials(metrics, trials), ElementsAre(1, 2));
}

TEST(OptimalTrialsTest, SingleMinimizedObjectiveReturnsTheLowest) {
  const std::vector<MetricConfig> metrics = {Minimize("loss")};
  const std::vector<Trial> trials = {Finished({{"loss", 0.3}}), Finished({{"loss", 0.2}}),
                                     Finished({{"loss", 0.25}})};
  EXPECT_THAT(OptimalTrials(metrics, trials), ElementsAre(1));
}

TEST(OptimalTrialsTest, SeveralObjectivesReturnTheNonDominatedSet) {
  // Maximize a, minimize b.
  const std::vector<MetricConfig> metrics = {Maximize("a"), Minimize("b")};
  const std::vector<Trial> trials = {
      Finished({{"a", 3}, {"b", 3}}),                             // 0: front (best a)
      Finished({{"a", 2}, {"b", 2}}),                             // 1: front
      Finished({{"a", 1}, {"b", 1}}),                             // 2: front (best b)
      Finished({{"a", 2}, {"b", 3}}),                             // 3: dominated by 0 and 1
      Finished({{"a", 1}, {"b", 1}}),                             // 4: equal to 2, so not dominated
      Finished({{"a", 0.5}, {"b", 2.5}}),                         // 5: dominated
      Finished({{"a", 10}, {"b", 0}}, TrialStatus::kPending),     // 6: not finished
      Finished({{"a", 10}, {"b", 0}}, TrialStatus::kFailed),      // 7: failed
      Finished({{"a", 10}, {"b", 0}}, TrialStatus::kInfeasible),  // 8: infeasible
      Finished({{"a", 10}}),                                      // 9: lacks b
  };
  EXPECT_THAT(OptimalTrials(metrics, trials), ElementsAre(0, 1, 2, 4));
}

TEST(OptimalTrialsTest, ConstraintsExcludeViolatingTrialsAndAreNotObjectives) {
  const std::vector<MetricConfig> metrics = {Maximize("auc"),
                                             Constraint("latency_ms", Goal::kMinimize, 100),
                                             Constraint("recall", Goal::kMaximize, 0.5)};
  const std::vector<Trial> trials = {
      Finished({{"auc", 0.99}, {"latency_ms", 150}, {"recall", 0.9}}),  // too slow
      Finished({{"auc", 0.98}, {"latency_ms", 50}, {"recall", 0.4}}),   // recall too low
      Finished({{"auc", 0.9}, {"latency_ms", 100}, {"recall", 0.5}}),   // on both limits
      Finished({{"auc", 0.8}, {"latency_ms", 10}, {"recall", 0.99}}),   // feasible, worse
  };
  // auc is the only objective, so a single best is returned despite trial 3's better
  // latency and recall.
  EXPECT_THAT(OptimalTrials(metrics, trials), ElementsAre(2));
}

TEST(OptimalTrialsTest, ConstraintsOnlyRankOnEveryMetric) {
  const std::vector<MetricConfig> metrics = {Constraint("a", Goal::kMaximize, 0),
                                             Constraint("b", Goal::kMinimize, 10)};
  const std::vector<Trial> trials = {
      Finished({{"a", 5}, {"b", 5}}),   // front
      Finished({{"a", 4}, {"b", 6}}),   // dominated by 0
      Finished({{"a", 1}, {"b", 1}}),   // front
      Finished({{"a", 9}, {"b", 11}}),  // infeasible: b > 10
  };
  EXPECT_THAT(OptimalTrials(metrics, trials), ElementsAre(0, 2));
}

TEST(OptimalTrialsTest, NoFeasibleTrialsGiveNothing) {
  const std::vector<MetricConfig> metrics = {Maximize("a"), Minimize("b")};
  EXPECT_THAT(OptimalTrials(metrics, {}), IsEmpty());
  const std::vector<Trial> trials = {Finished({{"a", 1}}),
                                     Finished({{"a", 1}, {"b", 1}}, TrialStatus::kFailed)};
  EXPECT_THAT(OptimalTrials(metrics, trials), IsEmpty());
}

TEST(OptimalTrialsTest, NanValuesAreNotRanked) {
  const std::vector<MetricConfig> metrics = {Maximize("auc")};
  const std::vector<Trial> trials = {Finished({{"auc", std::numeric_limits<double>::quiet_NaN()}}),
                                     Finished({{"auc", 0.7}})};
  EXPECT_THAT(OptimalTrials(metrics, trials), ElementsAre(1));
}

// The front found against the front so far equals the definition checked pair by pair, on
// random three-objective clouds with many exact ties (values on a coarse grid).
TEST(OptimalTrialsTest, MatchesThePairwiseDefinitionOnRandomClouds) {
  const std::vector<MetricConfig> metrics = {Maximize("a"), Minimize("b"), Maximize("c")};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> grid(0, 6);
  for (int round = 0; round < 50; ++round) {
    std::vector<Trial> trials;
    for (int i = 0; i < 60; ++i) {
      trials.push_back(Finished({{"a", grid(rng)}, {"b", grid(rng)}, {"c", grid(rng)}}));
    }
    auto oriented = [&](size_t i, const std::string& m) {
      const double v = trials[i].final_measurement.metrics.at(m);
      return m == "b" ? -v : v;
    };
    std::vector<size_t> expected;
    for (size_t i = 0; i < trials.size(); ++i) {
      bool dominated = false;
      for (size_t j = 0; j < trials.size() && !dominated; ++j) {
        bool all_ge = true, some_gt = false;
        for (const std::string m : {"a", "b", "c"}) {
          all_ge = all_ge && oriented(j, m) >= oriented(i, m);
          some_gt = some_gt || oriented(j, m) > oriented(i, m);
        }
        dominated = all_ge && some_gt;
      }
      if (!dominated) expected.push_back(i);
    }
    ASSERT_EQ(OptimalTrials(metrics, trials), expected) << "round " << round;
  }
}

TEST(IsFeasibleTest, ChecksPresenceAndThresholds) {
  const std::vector<MetricConfig> metrics = {Maximize("auc"),
                                             Constraint("latency_ms", Goal::kMinimize, 100)};
  EXPECT_TRUE(IsFeasible(metrics, Finished({{"auc", 0.5}, {"latency_ms", 100}})));
  EXPECT_FALSE(IsFeasible(metrics, Finished({{"auc", 0.5}, {"latency_ms", 101}})));
  EXPECT_FALSE(IsFeasible(metrics, Finished({{"auc", 0.5}})));
  EXPECT_FALSE(IsFeasible(metrics, Finished({{"latency_ms", 1}})));
  EXPECT_TRUE(
      IsFeasible({Constraint("recall", Goal::kMaximize, 0.5)}, Finished({{"recall", 0.5}})));
  EXPECT_FALSE(
      IsFeasible({Constraint("recall", Goal::kMaximize, 0.5)}, Finished({{"recall", 0.49}})));
}

}  // namespace
}  // namespace evoscale::search
