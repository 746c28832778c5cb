// The cost-aware GENETIC designer's log-linear cost model: what it learns from a handful of
// trials, and that it extrapolates where a Gaussian process would fall back to the mean.
#include "search/internal/linear_cost.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "search/internal/genome.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

// rounds in [0, 1] (a double), booster in {linear, tree, dart}; depth in [0, 1] only for
// tree and dart.
SearchSpace BoosterSpace() {
  ParameterConfig rounds{.name = "rounds", .type = ParameterType::kDouble, .min = 0, .max = 1};
  ParameterConfig depth{.name = "depth", .type = ParameterType::kDouble, .min = 0, .max = 1};
  ParameterConfig booster{.name = "booster", .type = ParameterType::kCategorical,
                          .categories = {"linear", "tree", "dart"}};
  booster.children.push_back({.parent_categories = {"tree", "dart"}, .parameters = {depth}});
  return {.parameters = {rounds, booster}};
}

// log cost = 1 + 3 rounds + (dart ? 2 : 0) + (active depth ? depth : 0).
double LogCost(double rounds, const std::string& booster, double depth) {
  return 1 + 3 * rounds + (booster == "dart" ? 2 : 0) + (booster == "linear" ? 0 : depth);
}

Genome At(const GenomeCodec& codec, double rounds, const std::string& booster, double depth) {
  ParameterDict p{{"rounds", rounds}, {"booster", booster}};
  if (booster != "linear") p["depth"] = depth;
  return codec.Encode(p);
}

TEST(LinearCostModelTest, LearnsWhatMakesARunDearFromAFewTrials) {
  const GenomeCodec codec(BoosterSpace());
  LinearCostModel model(codec, /*min_points=*/4);
  std::vector<Genome> genomes;
  std::vector<double> costs;
  const std::vector<std::string> boosters = {"linear", "tree", "dart"};
  for (int i = 0; i < 12; ++i) {
    const double rounds = 0.05 + 0.08 * i, depth = 0.9 - 0.07 * i;
    const std::string& booster = boosters[static_cast<size_t>(i) % 3];
    genomes.push_back(At(codec, rounds, booster, depth));
    costs.push_back(LogCost(rounds, booster, depth));
  }
  model.Fit(std::vector<Genome>(genomes.begin(), genomes.begin() + 3),
            std::vector<double>(costs.begin(), costs.begin() + 3));
  EXPECT_FALSE(model.fitted());  // fewer than min_points
  model.Fit(genomes, costs);
  ASSERT_TRUE(model.fitted());
  // Points it has not seen, within the ridge's shrinkage of the truth.
  for (const auto& [rounds, booster, depth] :
       std::vector<std::tuple<double, std::string, double>>{
           {0.5, "dart", 0.5}, {0.2, "linear", 0.0}, {0.8, "tree", 0.3}}) {
    EXPECT_NEAR(model.Predict(At(codec, rounds, booster, depth)), LogCost(rounds, booster, depth), 0.35)
        << rounds << " " << booster << " " << depth;
  }
  // The order that matters: dart dearer than tree, more rounds dearer.
  EXPECT_GT(model.Predict(At(codec, 0.5, "dart", 0.5)), model.Predict(At(codec, 0.5, "tree", 0.5)) + 1);
  EXPECT_GT(model.Predict(At(codec, 0.9, "linear", 0)), model.Predict(At(codec, 0.1, "linear", 0)) + 1.5);
}

TEST(LinearCostModelTest, ExtrapolatesPastTheTrialsItHasSeen) {
  // Only cheap runs so far (rounds <= 0.4): a run of 0.95 rounds is still predicted dearer
  // than any of them, by about the slope.
  const GenomeCodec codec(BoosterSpace());
  LinearCostModel model(codec, 4);
  std::vector<Genome> genomes;
  std::vector<double> costs;
  for (int i = 0; i < 8; ++i) {
    const double rounds = 0.05 * i;
    genomes.push_back(At(codec, rounds, "linear", 0));
    costs.push_back(LogCost(rounds, "linear", 0));
  }
  model.Fit(genomes, costs);
  ASSERT_TRUE(model.fitted());
  const double seen_dearest = model.Predict(At(codec, 0.35, "linear", 0));
  EXPECT_GT(model.Predict(At(codec, 0.95, "linear", 0)), seen_dearest + 1.2);
}

TEST(LinearCostModelTest, EqualCostsGiveAFlatModel) {
  const GenomeCodec codec(BoosterSpace());
  LinearCostModel model(codec, 4);
  std::vector<Genome> genomes;
  std::vector<double> costs;
  for (int i = 0; i < 6; ++i) {
    genomes.push_back(At(codec, 0.15 * i, i % 2 == 0 ? "tree" : "dart", 0.1 * i));
    costs.push_back(2.0);
  }
  model.Fit(genomes, costs);
  ASSERT_TRUE(model.fitted());
  EXPECT_NEAR(model.Predict(At(codec, 1.0, "linear", 0)), 2.0, 1e-9);
  EXPECT_NEAR(model.Predict(At(codec, 0.0, "dart", 1.0)), 2.0, 1e-9);
}

}  // namespace
}  // namespace evoscale::search::internal
