#include "search/early_stopping.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

const MetricConfig kAccuracy{.name = "acc", .goal = Goal::kMaximize};
const MetricConfig kLoss{.name = "loss", .goal = Goal::kMinimize};

// A trial whose learning curve reports `metric` = curve[i] at step i + 1.
Trial Curve(int64_t id, const std::vector<double>& curve, const std::string& metric = "acc") {
  Trial trial;
  trial.id = id;
  trial.status = TrialStatus::kPending;
  for (size_t i = 0; i < curve.size(); ++i) {
    Measurement m;
    m.step = static_cast<int64_t>(i) + 1;
    m.metrics[metric] = curve[i];
    trial.measurements.push_back(std::move(m));
  }
  return trial;
}

// A curve of `steps` points rising linearly from `start` to `end`.
std::vector<double> Rising(double start, double end, int steps) {
  std::vector<double> curve;
  for (int i = 0; i < steps; ++i) curve.push_back(start + (end - start) * i / (steps - 1));
  return curve;
}

EarlyStoppingConfig Median() {
  EarlyStoppingConfig config;
  config.policy = EarlyStoppingPolicy::kMedian;
  config.min_trials = 3;
  return config;
}

EarlyStoppingConfig Asha() {
  EarlyStoppingConfig config;
  config.policy = EarlyStoppingPolicy::kAsha;
  config.min_trials = 3;
  config.min_resource = 1;
  config.reduction_factor = 3;
  return config;
}

// Four healthy curves, 10 steps each, ending between 0.7 and 0.85.
std::vector<Trial> HealthyStudy() {
  return {Curve(1, Rising(0.5, 0.7, 10)), Curve(2, Rising(0.5, 0.75, 10)),
          Curve(3, Rising(0.55, 0.8, 10)), Curve(4, Rising(0.6, 0.85, 10))};
}

TEST(ShouldStopTest, NonePolicyNeverStops) {
  EXPECT_FALSE(ShouldStop(EarlyStoppingConfig{}, kAccuracy, Curve(9, {0.01, 0.01, 0.01, 0.01}),
                          HealthyStudy()));
}

TEST(MedianStoppingTest, StopsACurveBelowTheMedian) {
  EXPECT_TRUE(
      ShouldStop(Median(), kAccuracy, Curve(9, {0.1, 0.1, 0.12, 0.1, 0.11}), HealthyStudy()));
}

TEST(MedianStoppingTest, KeepsACurveAboveTheMedian) {
  EXPECT_FALSE(
      ShouldStop(Median(), kAccuracy, Curve(9, {0.6, 0.7, 0.8, 0.85, 0.9}), HealthyStudy()));
}

TEST(MedianStoppingTest, ComparesBestValueSoFarNotTheLatest) {
  // Best so far 0.9 beats every other trial, though the latest value is poor.
  EXPECT_FALSE(
      ShouldStop(Median(), kAccuracy, Curve(9, {0.9, 0.2, 0.2, 0.2, 0.2}), HealthyStudy()));
}

TEST(MedianStoppingTest, OnlyCountsOtherTrialsUpToTheTrialsStep) {
  // The others are poor for 5 steps and only then improve: at step 5 the trial (0.3) beats
  // their median (0.1), whatever they reached later.
  std::vector<Trial> others;
  for (int64_t id = 1; id <= 4; ++id) {
    others.push_back(Curve(id, {0.1, 0.1, 0.1, 0.1, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9}));
  }
  EXPECT_FALSE(ShouldStop(Median(), kAccuracy, Curve(9, {0.3, 0.3, 0.3, 0.3, 0.3}), others));
  // At step 6 the others' best is 0.9: now the trial stops.
  EXPECT_TRUE(ShouldStop(Median(), kAccuracy, Curve(9, {0.3, 0.3, 0.3, 0.3, 0.3, 0.3}), others));
}

TEST(MedianStoppingTest, MinimizeStopsAHighLoss) {
  std::vector<Trial> others = {Curve(1, Rising(1.0, 0.3, 10), "loss"),
                               Curve(2, Rising(1.0, 0.35, 10), "loss"),
                               Curve(3, Rising(0.9, 0.3, 10), "loss")};
  EXPECT_TRUE(ShouldStop(Median(), kLoss, Curve(9, {2.0, 1.9, 1.9, 1.8}, "loss"), others));
  EXPECT_FALSE(ShouldStop(Median(), kLoss, Curve(9, {0.5, 0.4, 0.3, 0.2}, "loss"), others));
}

TEST(MedianStoppingTest, NoDecisionWithTooFewOtherTrials) {
  std::vector<Trial> others = HealthyStudy();
  others.resize(2);
  EXPECT_FALSE(ShouldStop(Median(), kAccuracy, Curve(9, {0.1, 0.1, 0.1}), others));
}

TEST(MedianStoppingTest, TheTrialItselfIsNotAnOtherTrial) {
  std::vector<Trial> others = HealthyStudy();
  others.resize(2);
  const Trial bad = Curve(9, {0.1, 0.1, 0.1});
  others.push_back(bad);  // callers may pass the whole study
  EXPECT_FALSE(ShouldStop(Median(), kAccuracy, bad, others));
}

TEST(MedianStoppingTest, NoDecisionBeforeMinSteps) {
  EarlyStoppingConfig config = Median();
  config.min_steps = 5;
  EXPECT_FALSE(ShouldStop(config, kAccuracy, Curve(9, {0.1, 0.1, 0.1, 0.1}), HealthyStudy()));
  EXPECT_TRUE(ShouldStop(config, kAccuracy, Curve(9, {0.1, 0.1, 0.1, 0.1, 0.1}), HealthyStudy()));
}

TEST(MedianStoppingTest, TrialWithoutTheMetricIsNotStopped) {
  EXPECT_FALSE(ShouldStop(Median(), kAccuracy, Curve(9, {0.1, 0.1, 0.1}, "other"), HealthyStudy()));
  EXPECT_FALSE(ShouldStop(Median(), kAccuracy, Trial{.id = 9}, HealthyStudy()));
}

// Eight other trials with flat curves 0.1, 0.2, ..., 0.8 over 9 steps: at every rung
// (1, 3, 9) a trial keeps going only when at most two of them beat it (top 9 / 3 = 3).
std::vector<Trial> FlatStudy(int steps = 9) {
  std::vector<Trial> others;
  for (int i = 1; i <= 8; ++i) others.push_back(Curve(i, std::vector<double>(steps, i / 10.0)));
  return others;
}

TEST(AshaStoppingTest, StopsAClearlyBadCurve) {
  EXPECT_TRUE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.05)), FlatStudy()));
}

TEST(AshaStoppingTest, KeepsAGoodCurve) {
  EXPECT_FALSE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.95)), FlatStudy()));
}

TEST(AshaStoppingTest, KeepsOnlyTheTopThirdAtARung) {
  // Two trials better (0.7, 0.8): in the top 3 of 9.
  EXPECT_FALSE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.65)), FlatStudy()));
  // Three trials better (0.6, 0.7, 0.8): out.
  EXPECT_TRUE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.55)), FlatStudy()));
  // A tie with the cut-off keeps the trial.
  EXPECT_FALSE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.6)), FlatStudy()));
}

TEST(AshaStoppingTest, JudgesAtTheHighestRungReachedWithValuesUpToThatRung) {
  // Step 10 is past rung 9 but short of rung 27: the judgement uses values up to step 9,
  // so the late jump to 0.99 does not save the trial.
  std::vector<double> curve(9, 0.05);
  curve.push_back(0.99);
  EXPECT_TRUE(ShouldStop(Asha(), kAccuracy, Curve(20, curve), FlatStudy()));
}

TEST(AshaStoppingTest, CountsOnlyTrialsThatReachedTheRung) {
  // Only two others reached step 9; the rest stopped at step 2.
  std::vector<Trial> others = FlatStudy(2);
  others[0] = Curve(1, std::vector<double>(9, 0.5));
  others[1] = Curve(2, std::vector<double>(9, 0.6));
  EXPECT_FALSE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.05)), others));
  // At rung 1 all eight count and the trial is last: stopped there.
  EXPECT_TRUE(ShouldStop(Asha(), kAccuracy, Curve(20, {0.05, 0.05}), others));
}

TEST(AshaStoppingTest, NoDecisionBeforeTheFirstRung) {
  EarlyStoppingConfig config = Asha();
  config.min_resource = 10;
  EXPECT_FALSE(
      ShouldStop(config, kAccuracy, Curve(20, std::vector<double>(9, 0.05)), FlatStudy(12)));
  EXPECT_TRUE(
      ShouldStop(config, kAccuracy, Curve(20, std::vector<double>(10, 0.05)), FlatStudy(12)));
}

TEST(AshaStoppingTest, MinimizeStopsAHighLoss) {
  std::vector<Trial> others;
  for (int i = 1; i <= 6; ++i) {
    others.push_back(Curve(i, std::vector<double>(3, 0.1 * i), "loss"));
  }
  EXPECT_TRUE(ShouldStop(Asha(), kLoss, Curve(20, {0.9, 0.9, 0.9}, "loss"), others));
  EXPECT_FALSE(ShouldStop(Asha(), kLoss, Curve(20, {0.05, 0.05, 0.05}, "loss"), others));
}

TEST(AshaStoppingTest, NoneAndTooFewTrialsNeverStop) {
  EXPECT_FALSE(ShouldStop(EarlyStoppingConfig{}, kAccuracy, Curve(20, std::vector<double>(9, 0.05)),
                          FlatStudy()));
  std::vector<Trial> others = FlatStudy();
  others.resize(2);
  EXPECT_FALSE(ShouldStop(Asha(), kAccuracy, Curve(20, std::vector<double>(9, 0.05)), others));
}

}  // namespace
}  // namespace evoscale::search
