// Behaviour shared by the evolutionary designers (GENETIC, REGULARIZED_EVOLUTION, NSGA2):
// determinism, rebuilding from stored trials, duplicates, pending trials, failures.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "search/designers.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

// x0..x{n-1} in [-5, 5], a log-scaled double, an integer and a categorical with a child.
SearchSpace Space(int doubles = 4) {
  SearchSpace space;
  for (int i = 0; i < doubles; ++i) {
    space.parameters.push_back(
        {.name = absl::StrCat("x", i), .type = ParameterType::kDouble, .min = -5, .max = 5});
  }
  space.parameters.push_back({.name = "lr",
                              .type = ParameterType::kDouble,
                              .scale = ScaleType::kLog,
                              .min = 1e-4,
                              .max = 1});
  space.parameters.push_back({.name = "layers", .type = ParameterType::kInteger, .min = 1, .max = 6});
  ParameterConfig opt{.name = "opt", .type = ParameterType::kCategorical};
  opt.categories = {"sgd", "adam"};
  ConditionalChild child;
  child.parent_categories = {"sgd"};
  child.parameters.push_back(
      {.name = "momentum", .type = ParameterType::kDouble, .min = 0, .max = 0.99});
  opt.children.push_back(child);
  space.parameters.push_back(opt);
  return space;
}

double Objective(const ParameterDict& p) {
  double f = 0;
  for (const auto& [name, value] : p) {
    if (name[0] == 'x') f += std::pow(std::get<double>(value) - 1, 2);
  }
  f += std::pow(std::log10(std::get<double>(p.at("lr"))) + 2, 2);
  f += std::abs(static_cast<double>(std::get<int64_t>(p.at("layers"))) - 3);
  if (std::get<std::string>(p.at("opt")) == "adam") f += 0.5;
  return f;
}

ProblemStatement Problem(Algorithm algorithm, uint64_t seed = 1,
                         std::map<std::string, std::string> settings = {}) {
  ProblemStatement problem;
  problem.space = Space();
  problem.metrics = {{.name = "loss", .goal = Goal::kMinimize}};
  if (algorithm == Algorithm::kNsga2) {
    problem.metrics.push_back({.name = "size", .goal = Goal::kMinimize});
  }
  problem.algorithm = algorithm;
  problem.seed = seed;
  problem.settings = std::move(settings);
  return problem;
}

std::unique_ptr<Designer> Make(const ProblemStatement& problem) {
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(problem);
  EXPECT_TRUE(designer.ok()) << designer.status();
  return designer.ok() ? *std::move(designer) : nullptr;
}

// Completes `p` as the study's next trial; every 7th fails and every 11th is infeasible.
Trial Complete(int64_t id, const ParameterDict& p) {
  Trial t;
  t.id = id;
  t.parameters = p;
  if (id % 7 == 0) {
    t.status = TrialStatus::kFailed;
  } else if (id % 11 == 0) {
    t.status = TrialStatus::kInfeasible;
  } else {
    t.status = TrialStatus::kSucceeded;
    t.final_measurement.metrics["loss"] = Objective(p);
    t.final_measurement.metrics["size"] = static_cast<double>(std::get<int64_t>(p.at("layers")));
  }
  return t;
}

// A simulated study with `workers` trials in flight, completing out of order. Records every
// Update the live designer gets, so tests can replay the history.
struct Simulation {
  std::vector<Trial> completed;  // completion order
  std::vector<Trial> pending;
  std::vector<std::vector<ParameterDict>> suggestions;  // per Suggest call
  int64_t trials = 0;
};

Simulation Simulate(Designer& designer, int total, int workers, uint64_t order_seed,
               int updates_per_completion = 1) {
  Simulation sim;
  internal::SplitMix64 rng(order_seed);
  std::vector<Trial> unfed;
  while (sim.trials < total) {
    const int count = std::min<int>(workers - static_cast<int>(sim.pending.size()),
                                    static_cast<int>(total - sim.trials));
    designer.Update(unfed, sim.pending);
    unfed.clear();
    absl::StatusOr<std::vector<ParameterDict>> asked = designer.Suggest(count, sim.trials);
    EXPECT_TRUE(asked.ok()) << asked.status();
    sim.suggestions.push_back(*asked);
    for (const ParameterDict& p : *asked) {
      Trial t;
      t.id = ++sim.trials;
      t.parameters = p;
      sim.pending.push_back(t);
    }
    // Finish a random pending trial or two, out of order.
    const int finish = 1 + static_cast<int>(rng.NextBelow(2));
    for (int k = 0; k < finish && !sim.pending.empty(); ++k) {
      const size_t i = rng.NextBelow(sim.pending.size());
      const Trial done = Complete(sim.pending[i].id, sim.pending[i].parameters);
      sim.pending.erase(sim.pending.begin() + static_cast<std::ptrdiff_t>(i));
      sim.completed.push_back(done);
      unfed.push_back(done);
      if (static_cast<int>(unfed.size()) >= updates_per_completion) {
        designer.Update(unfed, sim.pending);
        unfed.clear();
      }
    }
  }
  designer.Update(unfed, sim.pending);
  return sim;
}

class EvolutionaryDesignerTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(EvolutionaryDesignerTest, SameSeedAndResultsGiveSameSuggestions) {
  std::unique_ptr<Designer> a = Make(Problem(GetParam(), 5));
  std::unique_ptr<Designer> b = Make(Problem(GetParam(), 5));
  std::unique_ptr<Designer> c = Make(Problem(GetParam(), 6));
  const Simulation run_a = Simulate(*a, 80, 4, 1);
  const Simulation run_b = Simulate(*b, 80, 4, 1);
  const Simulation run_c = Simulate(*c, 80, 4, 1);
  EXPECT_EQ(run_a.suggestions, run_b.suggestions);
  EXPECT_NE(run_a.suggestions, run_c.suggestions);
}

TEST_P(EvolutionaryDesignerTest, RebuiltDesignerSuggestsWhatTheLiveOneWould) {
  for (int workers : {1, 3, 8}) {
    std::unique_ptr<Designer> live = Make(Problem(GetParam(), 9));
    const Simulation sim = Simulate(*live, 90, workers, 2);
    std::unique_ptr<Designer> rebuilt = Make(Problem(GetParam(), 9));
    rebuilt->Update(sim.completed, sim.pending);  // one call, as after a restart
    absl::StatusOr<std::vector<ParameterDict>> want = live->Suggest(5, sim.trials);
    absl::StatusOr<std::vector<ParameterDict>> got = rebuilt->Suggest(5, sim.trials);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ(*want, *got) << "workers " << workers;
  }
}

TEST_P(EvolutionaryDesignerTest, BatchingOfUpdatesDoesNotMatter) {
  std::unique_ptr<Designer> one_by_one = Make(Problem(GetParam(), 3));
  std::unique_ptr<Designer> batched = Make(Problem(GetParam(), 3));
  const Simulation a = Simulate(*one_by_one, 70, 4, 7, /*updates_per_completion=*/1);
  const Simulation b = Simulate(*batched, 70, 4, 7, /*updates_per_completion=*/3);
  EXPECT_EQ(a.suggestions, b.suggestions);
}

TEST_P(EvolutionaryDesignerTest, NeverRepeatsATriedOrPendingPoint) {
  std::unique_ptr<Designer> designer = Make(Problem(GetParam(), 4));
  const Simulation sim = Simulate(*designer, 150, 6, 3);
  std::set<uint64_t> seen;
  for (const auto& call : sim.suggestions) {
    for (const ParameterDict& p : call) {
      EXPECT_TRUE(seen.insert(internal::Fingerprint(p)).second);
    }
  }
}

TEST_P(EvolutionaryDesignerTest, SurvivesOnlyFailuresAndMissingMetrics) {
  std::unique_ptr<Designer> designer = Make(Problem(GetParam(), 2));
  int64_t id = 0;
  for (int round = 0; round < 30; ++round) {
    absl::StatusOr<std::vector<ParameterDict>> asked = designer->Suggest(2, id);
    ASSERT_TRUE(asked.ok());
    ASSERT_EQ(asked->size(), 2u);
    std::vector<Trial> done;
    for (const ParameterDict& p : *asked) {
      Trial t;
      t.id = ++id;
      t.parameters = p;
      t.status = round % 2 ? TrialStatus::kFailed : TrialStatus::kSucceeded;
      if (round % 3 == 0) t.final_measurement.metrics["loss"] = std::nan("");
      done.push_back(t);
    }
    designer->Update(done, {});
  }
}

TEST_P(EvolutionaryDesignerTest, SmallDiscreteSpaceIsCoveredWithoutRepeats) {
  ProblemStatement problem = Problem(GetParam(), 8);
  problem.space.parameters = {{.name = "a", .type = ParameterType::kInteger, .min = 0, .max = 2},
                              {.name = "b", .type = ParameterType::kInteger, .min = 0, .max = 2}};
  std::unique_ptr<Designer> designer = Make(problem);
  std::set<uint64_t> seen;
  std::vector<Trial> done;
  for (int64_t id = 0; id < 9; ++id) {
    designer->Update(done, {});
    done.clear();
    absl::StatusOr<std::vector<ParameterDict>> asked = designer->Suggest(1, id);
    ASSERT_TRUE(asked.ok());
    seen.insert(internal::Fingerprint((*asked)[0]));
    Trial t;
    t.id = id + 1;
    t.parameters = (*asked)[0];
    t.status = TrialStatus::kSucceeded;
    t.final_measurement.metrics["loss"] = static_cast<double>(id);
    t.final_measurement.metrics["size"] = 1;
    done.push_back(t);
  }
  EXPECT_GE(seen.size(), 8u);  // nearly every one of the 9 points, none wasted twice
}

std::string Name(const ::testing::TestParamInfo<Algorithm>& info) {
  switch (info.param) {
    case Algorithm::kGenetic:
      return "Genetic";
    case Algorithm::kRegularizedEvolution:
      return "RegularizedEvolution";
    case Algorithm::kNsga2:
      return "Nsga2";
    default:
      return "Other";
  }
}

INSTANTIATE_TEST_SUITE_P(Evolutionary, EvolutionaryDesignerTest,
                         ::testing::Values(Algorithm::kGenetic, Algorithm::kRegularizedEvolution,
                                           Algorithm::kNsga2),
                         Name);

// --- Search quality, kept cheap ------------------------------------------------------------

double BestAfter(Algorithm algorithm, uint64_t seed, int budget,
                 std::map<std::string, std::string> settings = {}) {
  std::unique_ptr<Designer> designer = Make(Problem(algorithm, seed, std::move(settings)));
  double best = INFINITY;
  std::vector<Trial> done;
  for (int64_t id = 0; id < budget; ++id) {
    designer->Update(done, {});
    done.clear();
    const ParameterDict p = (*designer->Suggest(1, id))[0];
    Trial t;
    t.id = id + 1;
    t.parameters = p;
    t.status = TrialStatus::kSucceeded;
    t.final_measurement.metrics["loss"] = Objective(p);
    t.final_measurement.metrics["size"] = 1;
    best = std::min(best, Objective(p));
    done.push_back(t);
  }
  return best;
}

TEST(GeneticDesignerTest, BeatsRandomSearchOnAMixedSpace) {
  for (uint64_t seed : {1, 2, 3}) {
    EXPECT_LT(BestAfter(Algorithm::kGenetic, seed, 120), BestAfter(Algorithm::kRandom, seed, 120))
        << "seed " << seed;
  }
}

// The objective is smooth: a model of it (the kModel move) gets far closer to its optimum
// than the GA's own moves alone in the same trials.
TEST(GeneticDesignerTest, TheModelOfTheObjectiveBeatsTheGaAloneOnASmoothProblem) {
  for (uint64_t seed : {1, 2, 3}) {
    const double with_model = BestAfter(Algorithm::kGenetic, seed, 80);
    const double ga_alone = BestAfter(Algorithm::kGenetic, seed, 80, {{"model_share", "0"}});
    EXPECT_LT(with_model, 0.5 * ga_alone) << "seed " << seed;
  }
}

// Eight workers asking at once get eight different points: each suggestion of a batch is a
// fantasy the next ones avoid (every suggestion here is the model's: model_share 1).
TEST(GeneticDesignerTest, TheModelSpreadsABatchOfSuggestions) {
  std::unique_ptr<Designer> designer = Make(Problem(Algorithm::kGenetic, 5, {{"model_share", "1"}}));
  std::vector<Trial> done;
  for (int64_t id = 0; id < 60; ++id) {
    designer->Update(done, {});
    done.clear();
    Trial t;
    t.id = id + 1;
    t.parameters = (*designer->Suggest(1, id))[0];
    t.status = TrialStatus::kSucceeded;
    t.final_measurement.metrics["loss"] = Objective(t.parameters);
    done.push_back(t);
  }
  designer->Update(done, {});
  const std::vector<ParameterDict> batch = *designer->Suggest(8, 60);
  ASSERT_EQ(batch.size(), 8u);
  double nearest = INFINITY;
  for (size_t a = 0; a < batch.size(); ++a) {
    for (size_t b = a + 1; b < batch.size(); ++b) {
      double d2 = 0;  // over x0..x3, each scaled to [0, 1]
      for (int i = 0; i < 4; ++i) {
        const std::string x = absl::StrCat("x", i);
        d2 += std::pow((std::get<double>(batch[a].at(x)) - std::get<double>(batch[b].at(x))) / 10, 2);
      }
      nearest = std::min(nearest, std::sqrt(d2));
    }
  }
  EXPECT_GT(nearest, 0.01);
  // And they are still good points: most of the batch is better than the median trial.
  int good = 0;
  for (const ParameterDict& p : batch) good += Objective(p) < 5;
  EXPECT_GE(good, 4);
}

TEST(GeneticDesignerTest, MaximizeGoalIsRespected) {
  ProblemStatement problem = Problem(Algorithm::kGenetic, 1);
  problem.metrics = {{.name = "score", .goal = Goal::kMaximize}};
  std::unique_ptr<Designer> designer = Make(problem);
  std::vector<Trial> done;
  double last_quarter = 0, first_quarter = 0;
  for (int64_t id = 0; id < 120; ++id) {
    designer->Update(done, {});
    done.clear();
    const ParameterDict p = (*designer->Suggest(1, id))[0];
    Trial t;
    t.id = id + 1;
    t.parameters = p;
    t.status = TrialStatus::kSucceeded;
    t.final_measurement.metrics["score"] = -Objective(p);
    if (id < 30) first_quarter += Objective(p);
    if (id >= 90) last_quarter += Objective(p);
    done.push_back(t);
  }
  EXPECT_LT(last_quarter, first_quarter);  // it climbed the score, i.e. descended the loss
}

TEST(GeneticDesignerTest, ParallelSuggestionsSpreadOut) {
  std::unique_ptr<Designer> designer = Make(Problem(Algorithm::kGenetic, 1));
  Simulation sim = Simulate(*designer, 60, 1, 1);
  absl::StatusOr<std::vector<ParameterDict>> batch = designer->Suggest(8, sim.trials);
  ASSERT_TRUE(batch.ok());
  std::set<uint64_t> distinct;
  for (const ParameterDict& p : *batch) distinct.insert(internal::Fingerprint(p));
  EXPECT_EQ(distinct.size(), 8u);
}

}  // namespace
}  // namespace evoscale::search
