// The designers' view of multi-fidelity, cost-aware search: stopped trials ranked between full
// runs and failures, and GENETIC screening by predicted cost while a budget lasts.
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "search/designers.h"
#include "search/internal/fitness.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

using internal::Better;
using internal::Fitness;
using internal::FitnessFunction;

const MetricConfig kAuc{.name = "auc", .goal = Goal::kMaximize};

Trial Ended(TrialStatus status, double auc, int64_t last_step) {
  Trial t;
  t.status = status;
  for (int64_t s = 1; s <= last_step; ++s) {
    Measurement m;
    m.step = s;
    m.metrics["auc"] = auc;
    t.measurements.push_back(m);
  }
  t.final_measurement = t.measurements.back();
  return t;
}

TEST(StoppedFitnessTest, StoppedRunsRankBelowFullOnesByHowFarTheyWentThenByValue) {
  const FitnessFunction f({kAuc}, /*single_objective=*/true);
  const Fitness full_bad = f.Evaluate(Ended(TrialStatus::kSucceeded, 0.60, 27));
  const Fitness late_good = f.Evaluate(Ended(TrialStatus::kStopped, 0.90, 9));
  const Fitness late_bad = f.Evaluate(Ended(TrialStatus::kStopped, 0.70, 9));
  const Fitness early_best = f.Evaluate(Ended(TrialStatus::kStopped, 0.95, 3));
  const Fitness failed = f.Evaluate(Ended(TrialStatus::kFailed, 0.99, 27));
  EXPECT_FALSE(late_good.failed);
  EXPECT_EQ(late_good.stopped_at, 9);
  EXPECT_TRUE(Better(full_bad, late_good));
  EXPECT_TRUE(Better(late_good, late_bad));
  EXPECT_TRUE(Better(late_bad, early_best));
  EXPECT_TRUE(Better(early_best, failed));
  EXPECT_FALSE(Better(late_good, full_bad));
}

// One parameter x in [0, 1]: a full run of x costs exp(4 x) core-seconds over 10 steps, and
// every trial scores the same, so only cost can tell candidates apart.
ProblemStatement CostProblem(double budget, uint64_t seed) {
  ProblemStatement p;
  ParameterConfig x;
  x.name = "x";
  x.type = ParameterType::kDouble;
  x.min = 0;
  x.max = 1;
  ParameterConfig y = x;
  y.name = "y";
  p.space.parameters = {x, y};
  p.metrics = {kAuc};
  p.algorithm = Algorithm::kGenetic;
  p.seed = seed;
  p.budget_core_seconds = budget;
  p.max_step = 10;
  return p;
}

// Runs 60 trials to step 10 (costs as CostProblem says, AUC a gentle function of y) and
// returns the mean cost of the last 30 suggestions.
double MeanLateCost(double budget, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(CostProblem(budget, seed));
  EXPECT_TRUE(designer.ok()) << designer.status();
  std::vector<double> costs;
  for (int64_t i = 0; i < 60; ++i) {
    absl::StatusOr<std::vector<ParameterDict>> s = (*designer)->Suggest(1, i);
    EXPECT_TRUE(s.ok() && s->size() == 1);
    const double x = std::get<double>(s->front().at("x"));
    const double y = std::get<double>(s->front().at("y"));
    Trial t;
    t.id = i + 1;
    t.parameters = s->front();
    t.status = TrialStatus::kSucceeded;
    const double full = std::exp(4 * x);
    for (int64_t step = 1; step <= 10; ++step) {
      Measurement m;
      m.step = step;
      m.elapsed_seconds = full * std::pow(step / 10.0, 0.7);
      m.metrics["auc"] = 0.8 - 0.01 * (y - 0.5) * (y - 0.5);
      t.measurements.push_back(m);
    }
    t.final_measurement = t.measurements.back();
    if (i >= 30) costs.push_back(full);
    (*designer)->Update({t}, {});
  }
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

TEST(CostAwareGeneticTest, WithABudgetItSuggestsCheaperTrialsThanWithout) {
  // A budget far from spent keeps the cost weight near its start; without one it is 0.
  int cheaper = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    cheaper += MeanLateCost(/*budget=*/1e9, seed) < MeanLateCost(/*budget=*/0, seed) ? 1 : 0;
  }
  EXPECT_GE(cheaper, 4);
}

// Suggests 4 trials, lets them run to step 3 (costs as CostProblem says), and returns the
// mean full-run cost of the 8 suggestions that follow, while no trial has completed yet.
double MeanCostWhileTheFirstTrialsRun(double budget, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(CostProblem(budget, seed));
  EXPECT_TRUE(designer.ok()) << designer.status();
  std::vector<Trial> running;
  auto full_cost = [](const ParameterDict& p) { return std::exp(4 * std::get<double>(p.at("x"))); };
  absl::StatusOr<std::vector<ParameterDict>> first = (*designer)->Suggest(4, 0);
  EXPECT_TRUE(first.ok() && first->size() == 4);
  for (size_t i = 0; i < first->size(); ++i) {
    Trial t;
    t.id = static_cast<int64_t>(i) + 1;
    t.parameters = (*first)[i];
    for (int64_t step = 1; step <= 3; ++step) {
      Measurement m;
      m.step = step;
      m.elapsed_seconds = full_cost(t.parameters) * std::pow(step / 10.0, 0.7);
      m.metrics["auc"] = 0.7;
      t.measurements.push_back(m);
    }
    running.push_back(std::move(t));
  }
  (*designer)->Update({}, running);
  absl::StatusOr<std::vector<ParameterDict>> next = (*designer)->Suggest(8, 4);
  EXPECT_TRUE(next.ok() && next->size() == 8);
  double sum = 0;
  for (const ParameterDict& p : *next) sum += full_cost(p);
  return sum / 8;
}

TEST(CostAwareGeneticTest, RunningTrialsTeachTheCostModelAndTheInitialDesignLeansCheap) {
  // No trial has completed: only the running trials' elapsed times say what a run costs.
  int cheaper = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    cheaper += MeanCostWhileTheFirstTrialsRun(/*budget=*/1e9, seed) <
                       MeanCostWhileTheFirstTrialsRun(/*budget=*/0, seed)
                   ? 1
                   : 0;
  }
  EXPECT_GE(cheaper, 4);
}

// Four runs to step 10 end (x, y from the initial design, a full run of x costing `full(x)`
// core-seconds), then the designer suggests the next six points of its initial design; returns
// how many of those have x above 0.6.
template <typename Full>
int InitialAboveSixTenths(double budget, uint64_t seed, Full full) {
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(CostProblem(budget, seed));
  EXPECT_TRUE(designer.ok()) << designer.status();
  for (int64_t i = 0; i < 4; ++i) {
    absl::StatusOr<std::vector<ParameterDict>> s = (*designer)->Suggest(1, i);
    EXPECT_TRUE(s.ok() && s->size() == 1);
    const double x = std::get<double>(s->front().at("x"));
    Trial t;
    t.id = i + 1;
    t.parameters = s->front();
    t.status = TrialStatus::kSucceeded;
    for (int64_t step = 1; step <= 10; ++step) {
      Measurement m;
      m.step = step;
      m.elapsed_seconds = full(x) * std::pow(step / 10.0, 0.7);
      m.metrics["auc"] = 0.8;
      t.measurements.push_back(m);
    }
    t.final_measurement = t.measurements.back();
    (*designer)->Update({t}, {});
  }
  absl::StatusOr<std::vector<ParameterDict>> next = (*designer)->Suggest(6, 4);
  EXPECT_TRUE(next.ok() && next->size() == 6);
  int above = 0;
  for (const ParameterDict& p : *next) above += std::get<double>(p.at("x")) > 0.6 ? 1 : 0;
  return above;
}

TEST(CostAwareGeneticTest, UnderABudgetTheDesignStaysInTheCheaperHalfOnceTheCostModelFits) {
  // A full run costs exp(4 x): the cheaper half of the space is x below 0.5.
  auto full = [](double x) { return std::exp(4 * x); };
  int with_budget = 0, without = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    with_budget += InitialAboveSixTenths(1e9, seed, full);
    without += InitialAboveSixTenths(0, seed, full);
  }
  EXPECT_LE(with_budget, 1);
  EXPECT_GE(without, 6);  // of 30 quasi-random points, about 12
}

// x in [0, 1] and engine in {fast, slow}. Four runs of the fast engine (ids 2..5) have ended, a
// full run costing exp(3 x); the slow engine's only trial, id `slow_id`, is running and has
// reported nothing. Returns how many of the next 6 suggestions (of the initial design) use the
// slow engine.
int SlowSuggestions(int64_t slow_id, uint64_t seed) {
  ProblemStatement p = CostProblem(1e9, seed);
  p.space.parameters.pop_back();
  ParameterConfig engine{.name = "engine", .type = ParameterType::kCategorical,
                         .categories = {"fast", "slow"}};
  p.space.parameters.push_back(engine);
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(p);
  EXPECT_TRUE(designer.ok()) << designer.status();
  std::vector<Trial> ended;
  for (int i = 0; i < 4; ++i) {
    Trial t;
    t.id = i + 2;
    const double x = 0.1 + 0.25 * i;
    t.parameters = {{"x", x}, {"engine", std::string("fast")}};
    t.status = TrialStatus::kSucceeded;
    for (int64_t step = 1; step <= 10; ++step) {
      Measurement m;
      m.step = step;
      m.elapsed_seconds = std::exp(3 * x) * std::pow(step / 10.0, 0.7);
      m.metrics["auc"] = 0.7;
      t.measurements.push_back(m);
    }
    t.final_measurement = t.measurements.back();
    ended.push_back(std::move(t));
  }
  Trial slow;
  slow.id = slow_id;
  slow.parameters = {{"x", 0.2}, {"engine", std::string("slow")}};
  (*designer)->Update(ended, {slow});
  absl::StatusOr<std::vector<ParameterDict>> next = (*designer)->Suggest(6, 5);
  EXPECT_TRUE(next.ok() && next->size() == 6);
  int slow_ones = 0;
  for (const ParameterDict& s : *next) slow_ones += std::get<std::string>(s.at("engine")) == "slow";
  return slow_ones;
}

TEST(CostAwareGeneticTest, ARunningTrialOutlivedByLaterOnesTeachesThatItIsDear) {
  // Created before the four runs that have ended, the silent slow trial has run at least as
  // long as the longest of them (exp(2.55) s, above their median full run): the slow engine is
  // dear. Created after them (id 100), it says nothing yet.
  int outlived = 0, young = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    outlived += SlowSuggestions(/*slow_id=*/1, seed);
    young += SlowSuggestions(/*slow_id=*/100, seed);
  }
  EXPECT_LE(outlived, 4) << young;
  EXPECT_GE(young, 9) << outlived;  // of 30 quasi-random points, about half use it
}

}  // namespace
}  // namespace evoscale::search
