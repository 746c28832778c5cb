// The GENETIC designer's Gaussian-process surrogate: it ranks points the way the trials do,
// on numeric, categorical and conditional genes, ignores failures, and its fit depends on
// the trials alone (not on how the fits were batched).
#include "search/internal/gp.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"
#include "search/types.h"
#include "tests/search/surrogate_test_support.h"

namespace evoscale::search::internal {
namespace {

using testing::kAdam;
using testing::kSgd;
using testing::Loss;

// x, y in [0, 1], opt in {sgd, adam} with momentum under sgd only. Genes: x, y, opt, momentum.
SearchSpace Space() { return testing::DoublesAndOptimizer({"x", "y"}); }

// A smooth bowl at (0.3, 0.7); adam costs 0.5; under sgd, momentum should be 0.9.
double Objective(const Genome& g) {
  double f = std::pow(g[0] - 0.3, 2) + std::pow(g[1] - 0.7, 2);
  if (g[2] > 0.5) return f + 0.5;
  return f + std::pow(g[3] - 0.9, 2);
}

void Trials(int n, uint64_t seed, std::vector<Genome>& genomes, std::vector<Fitness>& fitness) {
  SplitMix64 rng(seed);
  for (int i = 0; i < n; ++i) {
    Genome g = {rng.NextUnit(), rng.NextUnit(), rng.NextUnit() < 0.5 ? kSgd : kAdam, rng.NextUnit()};
    fitness.push_back(Loss(Objective(g)));
    genomes.push_back(std::move(g));
  }
}

// A surrogate fitted on `n` random trials drawn from `seed`.
GpSurrogate FittedOn(const GenomeCodec& codec, int n, uint64_t seed) {
  std::vector<Genome> genomes;
  std::vector<Fitness> fitness;
  Trials(n, seed, genomes, fitness);
  GpSurrogate gp(codec);
  gp.Fit(genomes, fitness);
  return gp;
}

TEST(GpSurrogateTest, RanksPointsLikeTheObjective) {
  const GenomeCodec codec(Space());
  const GpSurrogate gp = FittedOn(codec, 60, 1);
  ASSERT_TRUE(gp.fitted());
  // Near the optimum beats far from it; sgd with good momentum beats adam.
  EXPECT_LT(gp.Predict({0.3, 0.7, kSgd, 0.9}), gp.Predict({0.9, 0.1, kSgd, 0.9}));
  EXPECT_LT(gp.Predict({0.3, 0.7, kSgd, 0.9}), gp.Predict({0.3, 0.7, kAdam, 0.9}));
  EXPECT_LT(gp.Predict({0.3, 0.7, kSgd, 0.9}), gp.Predict({0.3, 0.7, kSgd, 0.1}));
  // Rank correlation with the objective on fresh points.
  std::vector<Genome> fresh;
  std::vector<Fitness> truth;
  Trials(200, 2, fresh, truth);
  int concordant = 0, pairs = 0;
  for (size_t i = 0; i < fresh.size(); ++i) {
    for (size_t j = i + 1; j < fresh.size(); j += 7) {
      ++pairs;
      concordant += (gp.Predict(fresh[i]) < gp.Predict(fresh[j])) == (truth[i].losses[0] < truth[j].losses[0]);
    }
  }
  EXPECT_GT(concordant, 0.75 * pairs);
}

TEST(GpSurrogateTest, AnInactiveGeneDoesNotMoveThePrediction) {
  const GenomeCodec codec(Space());
  const GpSurrogate gp = FittedOn(codec, 60, 3);
  ASSERT_TRUE(gp.fitted());
  EXPECT_DOUBLE_EQ(gp.Predict({0.3, 0.7, kAdam, 0.9}), gp.Predict({0.3, 0.7, kAdam, 0.1}));
  EXPECT_NE(gp.Predict({0.3, 0.7, kSgd, 0.9}), gp.Predict({0.3, 0.7, kSgd, 0.1}));
}

TEST(GpSurrogateTest, LeavesFailuresOutAndNeedsEnoughRankedTrials) {
  const GenomeCodec codec(Space());
  GpSurrogate gp(codec);
  std::vector<Genome> genomes;
  std::vector<Fitness> fitness;
  Trials(GpSurrogate::kMinPoints - 1, 4, genomes, fitness);
  gp.Fit(genomes, fitness);
  EXPECT_FALSE(gp.fitted());
  // Add failures: still too few ranked trials.
  for (int i = 0; i < 20; ++i) {
    genomes.push_back({0.3, 0.7, kSgd, 0.9});  // a failure at the optimum must not teach it
    fitness.push_back(Fitness{});
  }
  gp.Fit(genomes, fitness);
  EXPECT_FALSE(gp.fitted());
  Trials(40, 5, genomes, fitness);
  gp.Fit(genomes, fitness);
  EXPECT_TRUE(gp.fitted());
}

TEST(GpSurrogateTest, AFitDependsOnTheTrialsNotOnHowFitsWereBatched) {
  const GenomeCodec codec(Space());
  std::vector<Genome> genomes;
  std::vector<Fitness> fitness;
  Trials(137, 6, genomes, fitness);  // more than kMaxPoints, not a multiple of the reselection
  GpSurrogate once(codec), incremental(codec);
  once.Fit(genomes, fitness);
  for (size_t n = 1; n <= genomes.size(); n += 3) {
    incremental.Fit(absl::Span<const Genome>(genomes).first(n), absl::Span<const Fitness>(fitness).first(n));
  }
  incremental.Fit(genomes, fitness);
  ASSERT_TRUE(once.fitted() && incremental.fitted());
  for (const Genome& g : {Genome{0.1, 0.2, kSgd, 0.3}, Genome{0.8, 0.5, kAdam, 0.4}}) {
    EXPECT_DOUBLE_EQ(once.Predict(g), incremental.Predict(g));
  }
}

}  // namespace
}  // namespace evoscale::search::internal
