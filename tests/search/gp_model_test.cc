// The GENETIC designer's model of the objective (gp_model.h) and its acquisition optimiser
// (acquisition.h): the fit learns which genes matter, predicts held-out points, handles
// categorical and conditional genes, its log EI and gradient agree with finite differences,
// the optimiser finds a known maximum, and fantasies of pending points repel.
#include "search/internal/gp_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "search/internal/acquisition.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/lbfgs.h"
#include "search/internal/sampling.h"
#include "search/types.h"
#include "tests/search/surrogate_test_support.h"

namespace evoscale::search::internal {
namespace {

using testing::kAdam;
using testing::kSgd;
using testing::Loss;

SearchSpace Doubles(int n) {
  SearchSpace space;
  for (int i = 0; i < n; ++i) {
    space.parameters.push_back(
        {.name = "x" + std::to_string(i), .type = ParameterType::kDouble, .min = 0, .max = 1});
  }
  return space;
}

std::vector<Genome> RandomPoints(int n, int genes, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<Genome> points(static_cast<size_t>(n), Genome(static_cast<size_t>(genes)));
  for (Genome& p : points) {
    for (double& g : p) g = rng.NextUnit();
  }
  return points;
}

// Standardised targets of f at the points.
template <typename F>
std::vector<double> Targets(const std::vector<Genome>& points, F f) {
  std::vector<Fitness> fitness;
  for (const Genome& p : points) fitness.push_back(Loss(f(p)));
  std::vector<size_t> kept;
  return WarpedTargets(fitness, &kept);
}

TEST(LbfgsTest, MinimisesTheRosenbrockFunction) {
  const Objective rosenbrock = [](const Eigen::VectorXd& x, Eigen::VectorXd* g) {
    const double a = 1 - x[0], b = x[1] - x[0] * x[0];
    (*g)[0] = -2 * a - 400 * x[0] * b;
    (*g)[1] = 200 * b;
    return a * a + 100 * b * b;
  };
  const LbfgsResult result = MinimiseLbfgs(rosenbrock, Eigen::Vector2d(-1.2, 1), 200, 1e-8);
  EXPECT_NEAR(result.x[0], 1, 1e-4);
  EXPECT_NEAR(result.x[1], 1, 1e-4);
}

TEST(GpModelTest, FitLearnsARelevantAndAnIrrelevantGene) {
  const GenomeCodec codec(Doubles(2));
  const std::vector<Genome> points = RandomPoints(40, 2, 7);
  // Depends on x0 only, with a period the length scale must match.
  const std::vector<double> y = Targets(points, [](const Genome& p) { return std::sin(6 * p[0]); });
  const GpModel model(codec);
  const GpHyperparameters h = model.FitHyperparameters(points, y);
  // rho = 1 / length^2: x0 short (relevant), x1 long (irrelevant).
  EXPECT_GT(h.inverse_squared_lengths[0], 4.0);
  EXPECT_LT(h.inverse_squared_lengths[1], 0.5);
  EXPECT_GT(h.inverse_squared_lengths[0], 20 * h.inverse_squared_lengths[1]);
  // A deterministic function: the noise goes to its floor's neighbourhood.
  EXPECT_LT(h.noise, 1e-2);
}

TEST(GpModelTest, PredictsHeldOutPointsOfASmoothFunction) {
  const GenomeCodec codec(Doubles(3));
  auto f = [](const Genome& p) { return std::pow(p[0] - 0.3, 2) + 0.5 * std::pow(p[1] - 0.6, 2) + 0.1 * p[2]; };
  const std::vector<Genome> points = RandomPoints(50, 3, 11);
  std::vector<double> raw;
  for (const Genome& p : points) raw.push_back(f(p));
  // Standardise by hand (no warping: every loss kept as is) to compare on f's own scale.
  double mean = 0, var = 0;
  for (double v : raw) mean += v / static_cast<double>(raw.size());
  for (double v : raw) var += (v - mean) * (v - mean) / static_cast<double>(raw.size());
  std::vector<double> y;
  for (double v : raw) y.push_back((v - mean) / std::sqrt(var));
  GpModel model(codec);
  ASSERT_TRUE(model.Condition(points, y, model.FitHyperparameters(points, y)));
  double error = 0;
  const std::vector<Genome> held_out = RandomPoints(200, 3, 12);
  for (const Genome& p : held_out) {
    const double predicted = model.Predict(p).mean * std::sqrt(var) + mean;
    error += std::pow(predicted - f(p), 2) / static_cast<double>(held_out.size());
  }
  // f's own spread is sqrt(var); the model's error is a small fraction of it.
  EXPECT_LT(std::sqrt(error), 0.05 * std::sqrt(var));
}

TEST(GpModelTest, CategoricalAndConditionalGenes) {
  // Genes: x, y, opt (sgd/adam), momentum (sgd only). Adam costs 0.5; under sgd, momentum
  // should be 0.9.
  const GenomeCodec codec(testing::DoublesAndOptimizer({"x", "y"}));
  auto f = [](const Genome& g) {
    const double bowl = std::pow(g[0] - 0.3, 2) + std::pow(g[1] - 0.7, 2);
    return g[2] > 0.5 ? bowl + 0.5 : bowl + std::pow(g[3] - 0.9, 2);
  };
  SplitMix64 rng(3);
  std::vector<Genome> points;
  for (int i = 0; i < 60; ++i) {
    points.push_back({rng.NextUnit(), rng.NextUnit(), rng.NextUnit() < 0.5 ? kSgd : kAdam, rng.NextUnit()});
  }
  const std::vector<double> y = Targets(points, f);
  GpModel model(codec);
  ASSERT_EQ(model.genes().size(), 4u);
  ASSERT_TRUE(model.Condition(points, y, model.FitHyperparameters(points, y)));
  const double sgd_good = model.Predict({0.3, 0.7, kSgd, 0.9}).mean;
  EXPECT_LT(sgd_good, model.Predict({0.3, 0.7, kAdam, 0.9}).mean);
  EXPECT_LT(sgd_good, model.Predict({0.3, 0.7, kSgd, 0.1}).mean);
  // Under adam the momentum gene is inactive: its value changes nothing.
  EXPECT_DOUBLE_EQ(model.Predict({0.3, 0.7, kAdam, 0.1}).mean,
                   model.Predict({0.3, 0.7, kAdam, 0.9}).mean);
  // And log EI's gradient is 0 on the categorical and the inactive gene.
  std::vector<double> gradient;
  model.LogExpectedImprovement({0.5, 0.5, kAdam, 0.4}, model.best_target(), &gradient);
  EXPECT_EQ(gradient[2], 0);
  EXPECT_EQ(gradient[3], 0);
  EXPECT_NE(gradient[0], 0);
}

TEST(GpModelTest, LogExpectedImprovementGradientMatchesFiniteDifferences) {
  const GenomeCodec codec(Doubles(3));
  const std::vector<Genome> points = RandomPoints(25, 3, 5);
  const std::vector<double> y =
      Targets(points, [](const Genome& p) { return std::sin(5 * p[0]) + p[1] * p[2]; });
  GpModel model(codec);
  ASSERT_TRUE(model.Condition(points, y, model.FitHyperparameters(points, y)));
  // Near the best point (z around 0) and far from every point in a poor region (deep tail).
  for (const double best : {model.best_target(), model.best_target() - 3.0}) {
    for (const Genome& x : RandomPoints(5, 3, 99)) {
      std::vector<double> gradient;
      const double value = model.LogExpectedImprovement(x, best, &gradient);
      ASSERT_TRUE(std::isfinite(value));
      for (size_t g = 0; g < 3; ++g) {
        Genome up = x, down = x;
        up[g] += 1e-6;
        down[g] -= 1e-6;
        const double numeric =
            (model.LogExpectedImprovement(up, best) - model.LogExpectedImprovement(down, best)) / 2e-6;
        EXPECT_NEAR(gradient[g], numeric, 1e-4 * std::max(1.0, std::abs(numeric)))
            << "gene " << g << " best " << best;
      }
    }
  }
}

TEST(GpModelTest, LogExpectedImprovementStaysFiniteFarIntoTheTail) {
  const GenomeCodec codec(Doubles(1));
  const std::vector<Genome> points = {{0.1}, {0.5}, {0.9}};
  const std::vector<double> y = {0, 1, 2};
  GpModel model(codec);
  ASSERT_TRUE(model.Condition(points, y, model.DefaultHyperparameters()));
  // At the worst point with a target far below: EI underflows a double, log EI does not,
  // and it keeps ordering points.
  const double far = model.LogExpectedImprovement({0.9}, -40);
  const double farther = model.LogExpectedImprovement({0.9}, -60);
  EXPECT_TRUE(std::isfinite(far));
  EXPECT_TRUE(std::isfinite(farther));
  EXPECT_LT(farther, far);
  EXPECT_LT(far, -100);
}

// A model fitted on `n` random points (from `seed`) of a 2-D bowl centred at (cx, cy).
GpModel BowlModel(const GenomeCodec& codec, int n, uint64_t seed, double cx, double cy) {
  const std::vector<Genome> points = RandomPoints(n, 2, seed);
  const std::vector<double> y = Targets(
      points, [&](const Genome& p) { return std::pow(p[0] - cx, 2) + std::pow(p[1] - cy, 2); });
  GpModel model(codec);
  model.Condition(points, y, model.FitHyperparameters(points, y));
  return model;
}

// The known maximum: a model of a bowl in 2-D, its log EI's maximum found by a dense grid.
TEST(AcquisitionTest, FindsTheMaximumADenseGridFinds) {
  const GenomeCodec codec(Doubles(2));
  const GpModel model = BowlModel(codec, 20, 21, 0.62, 0.27);
  ASSERT_TRUE(model.conditioned());
  const double best = model.best_target();
  double grid_best = -std::numeric_limits<double>::infinity();
  Genome grid_argmax;
  for (int i = 0; i <= 400; ++i) {
    for (int j = 0; j <= 400; ++j) {
      const Genome x = {i / 400.0, j / 400.0};
      const double v = model.LogExpectedImprovement(x, best);
      if (v > grid_best) {
        grid_best = v;
        grid_argmax = x;
      }
    }
  }
  // From random candidates, the optimiser reaches the grid's maximum.
  const AcquisitionOptimum found =
      MaximiseAcquisition(model, codec, best, RandomPoints(64, 2, 22), /*refine=*/4);
  EXPECT_GE(found.value, grid_best - 1e-3);
  EXPECT_NEAR(found.genome[0], grid_argmax[0], 0.02);
  EXPECT_NEAR(found.genome[1], grid_argmax[1], 0.02);
}

TEST(AcquisitionTest, NeighbourSearchFindsTheBestCategory) {
  // Three categories; the third is best. Candidates all start in the first.
  SearchSpace space = Doubles(1);
  ParameterConfig kind{.name = "kind", .type = ParameterType::kCategorical};
  kind.categories = {"a", "b", "c"};
  space.parameters.push_back(kind);
  const GenomeCodec codec(space);
  SplitMix64 rng(4);
  std::vector<Genome> points;
  for (int i = 0; i < 30; ++i) points.push_back({rng.NextUnit(), (static_cast<double>(i % 3) + 0.5) / 3});
  const std::vector<double> y = Targets(points, [](const Genome& p) {
    return std::pow(p[0] - 0.5, 2) + (p[1] > 2.0 / 3 ? 0.0 : 1.0);
  });
  GpModel model(codec);
  ASSERT_TRUE(model.Condition(points, y, model.FitHyperparameters(points, y)));
  const AcquisitionOptimum found = MaximiseAcquisition(
      model, codec, model.best_target(), {{0.1, 0.1}, {0.9, 0.2}}, /*refine=*/2);
  EXPECT_GT(found.genome[1], 2.0 / 3);
}

TEST(AcquisitionTest, PendingPointsRepelTheNextSuggestion) {
  const GenomeCodec codec(Doubles(2));
  const GpModel model = BowlModel(codec, 15, 31, 0.4, 0.4);
  ASSERT_TRUE(model.conditioned());
  const double best = model.best_target();
  const AcquisitionOptimum first = MaximiseAcquisition(model, codec, best, RandomPoints(32, 2, 32), 4);
  // With the first suggestion pending (an exact fantasy, no better than the best value),
  // the same search moves away from it; without the fantasy it lands on it again.
  const AcquisitionOptimum again = MaximiseAcquisition(model, codec, best, RandomPoints(32, 2, 32), 4);
  EXPECT_LT(std::hypot(again.genome[0] - first.genome[0], again.genome[1] - first.genome[1]), 1e-3);
  GpModel fantasised = model;
  fantasised.AddFantasies({first.genome}, best);
  ASSERT_EQ(fantasised.size(), model.size() + 1);
  EXPECT_LT(fantasised.LogExpectedImprovement(first.genome, best), first.value - 2);
  const AcquisitionOptimum second =
      MaximiseAcquisition(fantasised, codec, best, RandomPoints(32, 2, 32), 4);
  EXPECT_GT(std::hypot(second.genome[0] - first.genome[0], second.genome[1] - first.genome[1]), 0.02);
}

TEST(WarpedTargetsTest, KeepsTheOrderTamesOutliersAndLeavesFailuresOut) {
  std::vector<Fitness> fitness;
  for (double v : {3.0, 1.0, 2.0, 1e9, 4.0, 0.5}) fitness.push_back(Loss(v));
  fitness.push_back(Fitness{});  // failed
  std::vector<size_t> kept;
  const std::vector<double> t = WarpedTargets(fitness, &kept);
  ASSERT_EQ(kept, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  // Order kept: 0.5 < 1 < 2 < 3 < 4 < 1e9.
  EXPECT_LT(t[5], t[1]);
  EXPECT_LT(t[1], t[2]);
  EXPECT_LT(t[2], t[0]);
  EXPECT_LT(t[0], t[4]);
  EXPECT_LT(t[4], t[3]);
  // The better half keeps its spacing (0.5, 1, 2: gaps 0.5 and 1) ...
  EXPECT_NEAR((t[2] - t[1]) / (t[1] - t[5]), 2.0, 1e-9);
  // ... and the outlier is a couple of spreads away, not 1e9 (standardised: within 3 of the
  // best).
  EXPECT_LT(t[3] - t[5], 3);
  // The worst is the prior mean, 0.
  EXPECT_NEAR(t[3], 0, 1e-12);
}

TEST(NormalQuantileTest, InvertsTheNormalDistribution) {
  for (double p : {1e-6, 0.01, 0.2, 0.5, 0.7, 0.99, 1 - 1e-6}) {
    const double z = NormalQuantile(p);
    EXPECT_NEAR(0.5 * std::erfc(-z / std::sqrt(2.0)), p, 1e-8 * std::max(1.0, p / 1e-6));
  }
}

}  // namespace
}  // namespace evoscale::search::internal
