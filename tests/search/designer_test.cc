#include "search/designers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// --- Search-space builders ---------------------------------------------------------------

ParameterConfig Double(std::string name, double min, double max,
                       ScaleType scale = ScaleType::kLinear) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kDouble;
  p.scale = scale;
  p.min = min;
  p.max = max;
  return p;
}

ParameterConfig Integer(std::string name, double min, double max,
                        ScaleType scale = ScaleType::kLinear) {
  ParameterConfig p = Double(std::move(name), min, max, scale);
  p.type = ParameterType::kInteger;
  return p;
}

ParameterConfig Discrete(std::string name, std::vector<double> values) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kDiscrete;
  p.discrete_values = std::move(values);
  return p;
}

ParameterConfig Categorical(std::string name, std::vector<std::string> categories) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kCategorical;
  p.categories = std::move(categories);
  return p;
}

ConditionalChild WhenCategory(std::vector<std::string> categories, ParameterConfig child) {
  ConditionalChild c;
  c.parent_categories = std::move(categories);
  c.parameters.push_back(std::move(child));
  return c;
}

ConditionalChild WhenNumber(std::vector<double> numbers, ParameterConfig child) {
  ConditionalChild c;
  c.parent_numbers = std::move(numbers);
  c.parameters.push_back(std::move(child));
  return c;
}

// optimizer in {sgd, adam}; sgd -> sgd_momentum; adam -> beta1 in {0.8, 0.9};
// beta1 == 0.9 -> amsgrad in {yes, no}.
ParameterConfig OptimizerWithChildren() {
  ParameterConfig beta1 = Discrete("beta1", {0.8, 0.9});
  beta1.children.push_back(WhenNumber({0.9}, Categorical("amsgrad", {"yes", "no"})));
  ParameterConfig optimizer = Categorical("optimizer", {"sgd", "adam"});
  optimizer.children.push_back(WhenCategory({"sgd"}, Double("sgd_momentum", 0, 1)));
  optimizer.children.push_back(WhenCategory({"adam"}, std::move(beta1)));
  return optimizer;
}

SearchSpace MixedSpace() {
  SearchSpace space;
  space.parameters = {
      Double("lr", 1e-5, 1e-1, ScaleType::kLog),
      Double("dropout", 0, 0.5),
      Double("momentum", 1e-3, 1, ScaleType::kReverseLog),
      Integer("layers", 1, 8),
      Integer("batch", 16, 1024, ScaleType::kLog),
      Discrete("units", {32, 64, 128}),
      OptimizerWithChildren(),
      Categorical("single", {"only"}),
      Integer("fixed", 5, 5),
  };
  return space;
}

ProblemStatement Problem(Algorithm algorithm, SearchSpace space, uint64_t seed = 42,
                         std::map<std::string, std::string> settings = {}) {
  ProblemStatement problem;
  problem.space = std::move(space);
  problem.metrics = {MetricConfig{.name = "auc"}};
  problem.algorithm = algorithm;
  problem.settings = std::move(settings);
  problem.seed = seed;
  return problem;
}

std::vector<ParameterDict> SuggestOrDie(const ProblemStatement& problem, int count,
                                        int64_t trial_index) {
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(problem);
  EXPECT_TRUE(designer.ok()) << designer.status();
  if (!designer.ok()) return {};
  absl::StatusOr<std::vector<ParameterDict>> suggestions = (*designer)->Suggest(count, trial_index);
  EXPECT_TRUE(suggestions.ok()) << suggestions.status();
  if (!suggestions.ok()) return {};
  return *std::move(suggestions);
}

// Share of `values` strictly below `threshold`.
double ShareBelow(const std::vector<double>& values, double threshold) {
  const auto below =
      std::count_if(values.begin(), values.end(), [&](double v) { return v < threshold; });
  return static_cast<double>(below) / static_cast<double>(values.size());
}

std::vector<double> DoublesOf(const std::vector<ParameterDict>& suggestions,
                              const std::string& name) {
  std::vector<double> values;
  for (const ParameterDict& dict : suggestions) {
    const ParameterValue& value = dict.at(name);
    values.push_back(std::holds_alternative<double>(value)
                         ? std::get<double>(value)
                         : static_cast<double>(std::get<int64_t>(value)));
  }
  return values;
}

// Checks one suggestion of MixedSpace(): every key known, types, bounds and conditions.
void ExpectValidMixedPoint(const ParameterDict& dict) {
  const std::set<std::string> known = {"lr",    "dropout",      "momentum",  "layers",
                                       "batch", "units",        "optimizer", "single",
                                       "fixed", "sgd_momentum", "beta1",     "amsgrad"};
  for (const auto& [name, value] : dict) EXPECT_TRUE(known.contains(name)) << name;

  auto expect_double_in = [&](const std::string& name, double lo, double hi) {
    ASSERT_TRUE(dict.contains(name)) << name;
    ASSERT_TRUE(std::holds_alternative<double>(dict.at(name))) << name;
    const double v = std::get<double>(dict.at(name));
    EXPECT_GE(v, lo) << name;
    EXPECT_LE(v, hi) << name;
  };
  auto expect_int_in = [&](const std::string& name, int64_t lo, int64_t hi) {
    ASSERT_TRUE(dict.contains(name)) << name;
    ASSERT_TRUE(std::holds_alternative<int64_t>(dict.at(name))) << name;
    const int64_t v = std::get<int64_t>(dict.at(name));
    EXPECT_GE(v, lo) << name;
    EXPECT_LE(v, hi) << name;
  };
  expect_double_in("lr", 1e-5, 1e-1);
  expect_double_in("dropout", 0, 0.5);
  expect_double_in("momentum", 1e-3, 1);
  expect_int_in("layers", 1, 8);
  expect_int_in("batch", 16, 1024);
  expect_int_in("fixed", 5, 5);

  ASSERT_TRUE(dict.contains("units"));
  ASSERT_TRUE(std::holds_alternative<double>(dict.at("units")));
  EXPECT_THAT(std::set<double>({32, 64, 128}),
              ::testing::Contains(std::get<double>(dict.at("units"))));

  ASSERT_TRUE(dict.contains("single"));
  EXPECT_EQ(std::get<std::string>(dict.at("single")), "only");

  ASSERT_TRUE(dict.contains("optimizer"));
  ASSERT_TRUE(std::holds_alternative<std::string>(dict.at("optimizer")));
  const std::string& optimizer = std::get<std::string>(dict.at("optimizer"));
  ASSERT_TRUE(optimizer == "sgd" || optimizer == "adam") << optimizer;
  EXPECT_EQ(dict.contains("sgd_momentum"), optimizer == "sgd");
  if (optimizer == "sgd") expect_double_in("sgd_momentum", 0, 1);
  EXPECT_EQ(dict.contains("beta1"), optimizer == "adam");
  bool amsgrad_active = false;
  if (optimizer == "adam") {
    ASSERT_TRUE(std::holds_alternative<double>(dict.at("beta1")));
    const double beta1 = std::get<double>(dict.at("beta1"));
    EXPECT_TRUE(beta1 == 0.8 || beta1 == 0.9) << beta1;
    amsgrad_active = beta1 == 0.9;
  }
  EXPECT_EQ(dict.contains("amsgrad"), amsgrad_active);
  if (amsgrad_active) {
    ASSERT_TRUE(std::holds_alternative<std::string>(dict.at("amsgrad")));
    const std::string& amsgrad = std::get<std::string>(dict.at("amsgrad"));
    EXPECT_TRUE(amsgrad == "yes" || amsgrad == "no") << amsgrad;
  }
}

// --- Behaviour common to every algorithm ------------------------------------------------

class EveryDesignerTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(EveryDesignerTest, SuggestionsRespectTypesBoundsAndConditions) {
  const std::vector<ParameterDict> suggestions =
      SuggestOrDie(Problem(GetParam(), MixedSpace()), 200, 0);
  ASSERT_EQ(suggestions.size(), 200u);
  for (const ParameterDict& dict : suggestions) ExpectValidMixedPoint(dict);
}

TEST_P(EveryDesignerTest, ConditionalChildrenAppearExactlyWhenTheirParentMatches) {
  SearchSpace space;
  space.parameters = {OptimizerWithChildren()};
  const std::vector<ParameterDict> suggestions = SuggestOrDie(Problem(GetParam(), space), 200, 0);
  ASSERT_FALSE(suggestions.empty());
  std::set<std::set<std::string>> key_sets;
  for (const ParameterDict& dict : suggestions) {
    std::set<std::string> keys;
    for (const auto& [name, value] : dict) keys.insert(name);
    key_sets.insert(keys);
    const std::string& optimizer = std::get<std::string>(dict.at("optimizer"));
    EXPECT_EQ(dict.contains("sgd_momentum"), optimizer == "sgd");
    EXPECT_EQ(dict.contains("beta1"), optimizer == "adam");
    EXPECT_EQ(dict.contains("amsgrad"),
              optimizer == "adam" && std::get<double>(dict.at("beta1")) == 0.9);
  }
  // Every branch of the tree shows up.
  EXPECT_THAT(key_sets,
              UnorderedElementsAre(std::set<std::string>{"optimizer", "sgd_momentum"},
                                   std::set<std::string>{"optimizer", "beta1"},
                                   std::set<std::string>{"optimizer", "beta1", "amsgrad"}));
}

TEST_P(EveryDesignerTest, SameSeedAndTrialIndexGiveSameSuggestions) {
  const ProblemStatement problem = Problem(GetParam(), MixedSpace(), /*seed=*/7);
  const std::vector<ParameterDict> first = SuggestOrDie(problem, 5, 11);
  const std::vector<ParameterDict> again = SuggestOrDie(problem, 5, 11);
  ASSERT_EQ(first.size(), 5u);
  EXPECT_EQ(first, again);
  // Suggestion j of a call is point trial_index + j, however the calls are split.
  const std::vector<ParameterDict> third = SuggestOrDie(problem, 1, 13);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0], first[2]);
}

TEST_P(EveryDesignerTest, NegativeCountIsInvalidArgument) {
  absl::StatusOr<std::unique_ptr<Designer>> designer =
      CreateDesigner(Problem(GetParam(), MixedSpace()));
  ASSERT_TRUE(designer.ok()) << designer.status();
  absl::StatusOr<std::vector<ParameterDict>> suggestions = (*designer)->Suggest(-1, 0);
  EXPECT_EQ(suggestions.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(suggestions.status().message(), "count must be >= 0, got -1");
}

TEST_P(EveryDesignerTest, SingleValueParametersAlwaysTakeThatValue) {
  SearchSpace space;
  space.parameters = {Categorical("single", {"only"}), Integer("fixed", 5, 5),
                      Double("pinned", 0.25, 0.25), Discrete("one", {3})};
  const std::vector<ParameterDict> suggestions = SuggestOrDie(Problem(GetParam(), space), 10, 0);
  ASSERT_FALSE(suggestions.empty());
  for (const ParameterDict& dict : suggestions) {
    EXPECT_EQ(dict, (ParameterDict{{"single", std::string("only")},
                                   {"fixed", int64_t{5}},
                                   {"pinned", 0.25},
                                   {"one", 3.0}}));
  }
}

std::string AlgorithmTestName(const ::testing::TestParamInfo<Algorithm>& info) {
  switch (info.param) {
    case Algorithm::kGenetic:
      return "Genetic";
    case Algorithm::kRegularizedEvolution:
      return "RegularizedEvolution";
    case Algorithm::kNsga2:
      return "Nsga2";
    case Algorithm::kRandom:
      return "Random";
    case Algorithm::kQuasiRandom:
      return "QuasiRandom";
    case Algorithm::kGrid:
      return "Grid";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, EveryDesignerTest,
                         ::testing::Values(Algorithm::kRandom, Algorithm::kQuasiRandom,
                                           Algorithm::kGrid, Algorithm::kGenetic,
                                           Algorithm::kRegularizedEvolution, Algorithm::kNsga2),
                         AlgorithmTestName);

// The stateless designers ignore history; the evolutionary ones are tested in their own
// files.
class StatelessDesignerTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(StatelessDesignerTest, UpdateDoesNotChangeSuggestions) {
  const ProblemStatement problem = Problem(GetParam(), MixedSpace(), /*seed=*/7);
  absl::StatusOr<std::unique_ptr<Designer>> designer = CreateDesigner(problem);
  ASSERT_TRUE(designer.ok()) << designer.status();
  absl::StatusOr<std::vector<ParameterDict>> before = (*designer)->Suggest(3, 4);
  ASSERT_TRUE(before.ok()) << before.status();
  Trial done;
  done.id = 1;
  done.parameters = (*before)[0];
  done.status = TrialStatus::kSucceeded;
  done.final_measurement.metrics["auc"] = 0.7;
  (*designer)->Update({done}, {});
  absl::StatusOr<std::vector<ParameterDict>> after = (*designer)->Suggest(3, 4);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*before, *after);
}

INSTANTIATE_TEST_SUITE_P(RandomQuasiRandomAndGrid, StatelessDesignerTest,
                         ::testing::Values(Algorithm::kRandom, Algorithm::kQuasiRandom,
                                           Algorithm::kGrid),
                         AlgorithmTestName);

// --- Random and quasi-random sampling ----------------------------------------------------

class SamplingDesignerTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(SamplingDesignerTest, DifferentSeedsGiveDifferentSuggestions) {
  const std::vector<ParameterDict> a = SuggestOrDie(Problem(GetParam(), MixedSpace(), 1), 5, 0);
  const std::vector<ParameterDict> b = SuggestOrDie(Problem(GetParam(), MixedSpace(), 2), 5, 0);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_NE(a, b);
  EXPECT_NE(std::get<double>(a[0].at("lr")), std::get<double>(b[0].at("lr")));
}

TEST_P(SamplingDesignerTest, ConsecutiveSuggestionsDiffer) {
  const std::vector<ParameterDict> s = SuggestOrDie(Problem(GetParam(), MixedSpace()), 50, 0);
  std::set<double> lrs;
  for (const ParameterDict& dict : s) lrs.insert(std::get<double>(dict.at("lr")));
  EXPECT_EQ(lrs.size(), 50u);
}

TEST_P(SamplingDesignerTest, LogScaleSpreadsEvenlyOverOrdersOfMagnitude) {
  const std::vector<ParameterDict> s = SuggestOrDie(Problem(GetParam(), MixedSpace()), 400, 0);
  // A linear scale would put about 1% of lr below the geometric mean 1e-3.
  const double lr_share = ShareBelow(DoublesOf(s, "lr"), 1e-3);
  EXPECT_GT(lr_share, 0.35);
  EXPECT_LT(lr_share, 0.65);
  // Integers on a log scale too: 16..1024 has geometric mean 128.
  const double batch_share = ShareBelow(DoublesOf(s, "batch"), 128);
  EXPECT_GT(batch_share, 0.35);
  EXPECT_LT(batch_share, 0.65);
}

TEST_P(SamplingDesignerTest, ReverseLogScaleCrowdsNearTheMaximum) {
  const std::vector<ParameterDict> s = SuggestOrDie(Problem(GetParam(), MixedSpace()), 400, 0);
  // momentum in [1e-3, 1], reverse log: about 90% land above the midpoint.
  EXPECT_LT(ShareBelow(DoublesOf(s, "momentum"), 0.5), 0.25);
}

TEST_P(SamplingDesignerTest, LinearIntegersAreRoughlyUniformIncludingEndPoints) {
  SearchSpace space;
  space.parameters = {Integer("k", 1, 4)};
  const std::vector<ParameterDict> s = SuggestOrDie(Problem(GetParam(), space), 400, 0);
  std::map<int64_t, int> counts;
  for (const ParameterDict& dict : s) ++counts[std::get<int64_t>(dict.at("k"))];
  ASSERT_EQ(counts.size(), 4u);
  for (const auto& [value, count] : counts) {
    EXPECT_GT(count, 70) << value;
    EXPECT_LT(count, 130) << value;
  }
}

TEST_P(SamplingDesignerTest, EmptySpaceGivesEmptyAssignments) {
  const std::vector<ParameterDict> s = SuggestOrDie(Problem(GetParam(), SearchSpace{}), 3, 0);
  EXPECT_THAT(s, ElementsAre(ParameterDict{}, ParameterDict{}, ParameterDict{}));
}

INSTANTIATE_TEST_SUITE_P(RandomAndQuasiRandom, SamplingDesignerTest,
                         ::testing::Values(Algorithm::kRandom, Algorithm::kQuasiRandom),
                         AlgorithmTestName);

double MaxGap(std::vector<double> points) {
  points.push_back(0);
  points.push_back(1);
  std::sort(points.begin(), points.end());
  double gap = 0;
  for (size_t i = 1; i < points.size(); ++i) gap = std::max(gap, points[i] - points[i - 1]);
  return gap;
}

TEST(QuasiRandomDesignerTest, CoversTheUnitIntervalEvenly) {
  SearchSpace space;
  space.parameters = {Double("x", 0, 1)};
  for (int64_t start : {0, 5, 1000}) {
    const std::vector<ParameterDict> s =
        SuggestOrDie(Problem(Algorithm::kQuasiRandom, space, 3), 64, start);
    ASSERT_EQ(s.size(), 64u);
    EXPECT_LT(MaxGap(DoublesOf(s, "x")), 3.0 / 64) << "start " << start;
  }
}

TEST(QuasiRandomDesignerTest, CoversEachAxisOfAManyDimensionalSpace) {
  SearchSpace space;
  for (int d = 0; d < 20; ++d) space.parameters.push_back(Double(absl::StrCat("x", d), 0, 1));
  const std::vector<ParameterDict> s =
      SuggestOrDie(Problem(Algorithm::kQuasiRandom, space, 9), 256, 0);
  ASSERT_EQ(s.size(), 256u);
  for (int d = 0; d < 20; ++d) {
    const std::string name = absl::StrCat("x", d);
    EXPECT_LT(MaxGap(DoublesOf(s, name)), 0.05) << name;
  }
}

// --- Grid ----------------------------------------------------------------------------------

TEST(GridDesignerTest, EnumeratesTheWholeGridThenRunsOut) {
  SearchSpace space;
  space.parameters = {Categorical("c", {"a", "b", "c"}), Integer("k", 1, 2), Double("x", 0, 1)};
  const ProblemStatement problem = Problem(Algorithm::kGrid, space, 0, {{"grid_points", "3"}});
  const std::vector<ParameterDict> all = SuggestOrDie(problem, 20, 0);
  ASSERT_EQ(all.size(), 18u);  // 3 categories x 2 integers x 3 doubles
  std::set<std::tuple<std::string, int64_t, double>> points;
  for (const ParameterDict& dict : all) {
    points.emplace(std::get<std::string>(dict.at("c")), std::get<int64_t>(dict.at("k")),
                   std::get<double>(dict.at("x")));
  }
  std::set<std::tuple<std::string, int64_t, double>> expected;
  for (std::string c : {"a", "b", "c"}) {
    for (int64_t k : {1, 2}) {
      for (double x : {0.0, 0.5, 1.0}) expected.emplace(c, k, x);
    }
  }
  EXPECT_EQ(points, expected);

  EXPECT_EQ(SuggestOrDie(problem, 5, 16).size(), 2u);
  EXPECT_TRUE(SuggestOrDie(problem, 3, 18).empty());
  EXPECT_TRUE(SuggestOrDie(problem, 3, 1000).empty());
}

TEST(GridDesignerTest, DefaultsToTenPointsPerDouble) {
  SearchSpace space;
  space.parameters = {Double("x", 0, 9)};
  const std::vector<ParameterDict> all = SuggestOrDie(Problem(Algorithm::kGrid, space), 20, 0);
  ASSERT_EQ(all.size(), 10u);
  std::vector<double> xs = DoublesOf(all, "x");
  std::sort(xs.begin(), xs.end());
  for (int i = 0; i < 10; ++i) EXPECT_DOUBLE_EQ(xs[i], i);
}

TEST(GridDesignerTest, SpacesWideIntegersAndLogDoublesInScaledSpace) {
  SearchSpace space;
  space.parameters = {Integer("k", 1, 100), Double("lr", 1, 100, ScaleType::kLog)};
  const std::vector<ParameterDict> all =
      SuggestOrDie(Problem(Algorithm::kGrid, space, 0, {{"grid_points", "5"}}), 100, 0);
  ASSERT_EQ(all.size(), 25u);
  std::set<int64_t> ks;
  std::set<double> lrs;
  for (const ParameterDict& dict : all) {
    ks.insert(std::get<int64_t>(dict.at("k")));
    lrs.insert(std::get<double>(dict.at("lr")));
  }
  EXPECT_THAT(ks, ElementsAre(1, 26, 51, 75, 100));
  ASSERT_EQ(lrs.size(), 5u);
  const std::vector<double> expected = {1, std::sqrt(10.0), 10, std::sqrt(1000.0), 100};
  int i = 0;
  for (double lr : lrs) EXPECT_NEAR(lr, expected[i++], 1e-9 * lr);
}

TEST(GridDesignerTest, SmallIntegerRangesAndDiscreteValuesAreEnumerated) {
  SearchSpace space;
  space.parameters = {Integer("k", -2, 2), Discrete("d", {0.1, 0.2})};
  const std::vector<ParameterDict> all =
      SuggestOrDie(Problem(Algorithm::kGrid, space, 0, {{"grid_points", "5"}}), 100, 0);
  EXPECT_EQ(all.size(), 10u);
}

TEST(GridDesignerTest, SinglePointSpaceGivesOneSuggestion) {
  SearchSpace space;
  space.parameters = {Categorical("single", {"only"}), Integer("fixed", 5, 5)};
  const std::vector<ParameterDict> all = SuggestOrDie(Problem(Algorithm::kGrid, space), 3, 0);
  EXPECT_THAT(all,
              ElementsAre(ParameterDict{{"single", std::string("only")}, {"fixed", int64_t{5}}}));
}

TEST(GridDesignerTest, EmptySpaceHasOnePoint) {
  EXPECT_THAT(SuggestOrDie(Problem(Algorithm::kGrid, SearchSpace{}), 3, 0),
              ElementsAre(ParameterDict{}));
}

// --- Settings ------------------------------------------------------------------------------

void ExpectInvalid(Algorithm algorithm, std::map<std::string, std::string> settings,
                   const std::string& message) {
  const absl::Status status = ValidateAlgorithmSettings(algorithm, settings);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(ValidateAlgorithmSettingsTest, AcceptsKnownSettingsInRange) {
  EXPECT_TRUE(ValidateAlgorithmSettings(Algorithm::kGenetic, {}).ok());
  EXPECT_TRUE(ValidateAlgorithmSettings(Algorithm::kGenetic, {{"population_size", "4"},
                                                              {"mutation_rate", "1"},
                                                              {"crossover_rate", "0"},
                                                              {"tournament_size", "2"},
                                                              {"candidates", "256"},
                                                              {"min_move_share", "0.2"},
                                                              {"reward_decay", "1"}})
                  .ok());
  EXPECT_TRUE(
      ValidateAlgorithmSettings(
          Algorithm::kRegularizedEvolution,
          {{"population_size", "10000"}, {"tournament_size", "50"}, {"mutation_rate", "0.05"}})
          .ok());
  EXPECT_TRUE(ValidateAlgorithmSettings(
                  Algorithm::kNsga2,
                  {{"population_size", "100"}, {"mutation_rate", "0.1"}, {"crossover_rate", "0.9"}})
                  .ok());
  EXPECT_TRUE(ValidateAlgorithmSettings(Algorithm::kGrid, {{"grid_points", "2"}}).ok());
  EXPECT_TRUE(ValidateAlgorithmSettings(Algorithm::kGrid, {{"grid_points", "1000"}}).ok());
  EXPECT_TRUE(ValidateAlgorithmSettings(Algorithm::kRandom, {}).ok());
  EXPECT_TRUE(ValidateAlgorithmSettings(Algorithm::kQuasiRandom, {}).ok());
}

TEST(ValidateAlgorithmSettingsTest, UnknownKeyNamesTheKnownOnes) {
  ExpectInvalid(Algorithm::kGrid, {{"foo", "1"}},
                R"(settings["foo"]: unknown setting for GRID; known: grid_points)");
  ExpectInvalid(Algorithm::kRandom, {{"grid_points", "10"}},
                R"(settings["grid_points"]: unknown setting for RANDOM; known: none)");
  ExpectInvalid(Algorithm::kQuasiRandom, {{"seed", "1"}},
                R"(settings["seed"]: unknown setting for QUASI_RANDOM; known: none)");
  ExpectInvalid(Algorithm::kRegularizedEvolution, {{"crossover_rate", "0.5"}},
                R"(settings["crossover_rate"]: unknown setting for REGULARIZED_EVOLUTION; )"
                R"(known: population_size, tournament_size, mutation_rate)");
  ExpectInvalid(Algorithm::kNsga2, {{"tournament_size", "3"}},
                R"(settings["tournament_size"]: unknown setting for NSGA2; )"
                R"(known: population_size, mutation_rate, crossover_rate)");
  ExpectInvalid(Algorithm::kGenetic, {{"populationsize", "30"}},
                R"(settings["populationsize"]: unknown setting for GENETIC; )"
                R"(known: population_size, mutation_rate, crossover_rate, tournament_size, )"
                R"(local_search_rate, initial_step, candidates, min_move_share, reward_decay, )"
                R"(model_share, model_candidates)");
}

TEST(ValidateAlgorithmSettingsTest, BadValuesNameTheKeyTheRuleAndTheValue) {
  ExpectInvalid(Algorithm::kGenetic, {{"population_size", "x"}},
                R"(settings["population_size"]: must be an integer in [4, 10000], got "x")");
  ExpectInvalid(Algorithm::kGenetic, {{"population_size", "3"}},
                R"(settings["population_size"]: must be an integer in [4, 10000], got "3")");
  ExpectInvalid(Algorithm::kNsga2, {{"population_size", "10001"}},
                R"(settings["population_size"]: must be an integer in [4, 10000], got "10001")");
  ExpectInvalid(Algorithm::kGenetic, {{"population_size", "12.5"}},
                R"(settings["population_size"]: must be an integer in [4, 10000], got "12.5")");
  ExpectInvalid(Algorithm::kGenetic, {{"tournament_size", "1"}},
                R"(settings["tournament_size"]: must be an integer >= 2, got "1")");
  ExpectInvalid(Algorithm::kGenetic, {{"mutation_rate", "0"}},
                R"(settings["mutation_rate"]: must be a number in (0, 1], got "0")");
  ExpectInvalid(Algorithm::kRegularizedEvolution, {{"mutation_rate", "nan"}},
                R"(settings["mutation_rate"]: must be a number in (0, 1], got "nan")");
  ExpectInvalid(Algorithm::kGenetic, {{"crossover_rate", "1.5"}},
                R"(settings["crossover_rate"]: must be a number in [0, 1], got "1.5")");
  ExpectInvalid(Algorithm::kNsga2, {{"crossover_rate", ""}},
                R"(settings["crossover_rate"]: must be a number in [0, 1], got "")");
  ExpectInvalid(Algorithm::kGrid, {{"grid_points", "1"}},
                R"(settings["grid_points"]: must be an integer in [2, 1000], got "1")");
  ExpectInvalid(Algorithm::kGrid, {{"grid_points", "1001"}},
                R"(settings["grid_points"]: must be an integer in [2, 1000], got "1001")");
  ExpectInvalid(Algorithm::kGenetic, {{"candidates", "0"}},
                R"(settings["candidates"]: must be an integer in [1, 256], got "0")");
  ExpectInvalid(Algorithm::kGenetic, {{"min_move_share", "0.5"}},
                R"(settings["min_move_share"]: must be a number in [0, 0.2], got "0.5")");
  ExpectInvalid(Algorithm::kGenetic, {{"reward_decay", "-1"}},
                R"(settings["reward_decay"]: must be a number in [0, 1], got "-1")");
  ExpectInvalid(Algorithm::kGenetic, {{"model_share", "1.5"}},
                R"(settings["model_share"]: must be a number in [0, 1], got "1.5")");
  ExpectInvalid(Algorithm::kGenetic, {{"model_candidates", "4"}},
                R"(settings["model_candidates"]: must be an integer in [8, 4096], got "4")");
}

TEST(CreateDesignerTest, RejectsInvalidSettings) {
  absl::StatusOr<std::unique_ptr<Designer>> designer =
      CreateDesigner(Problem(Algorithm::kGrid, MixedSpace(), 0, {{"grid_points", "many"}}));
  EXPECT_EQ(designer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(designer.status().message(),
            R"(settings["grid_points"]: must be an integer in [2, 1000], got "many")");
}

}  // namespace
}  // namespace evoscale::search
