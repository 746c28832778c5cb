// The GENETIC designer's Parzen density (TPE's proposal): where its draws land on numeric,
// categorical and conditional genes, and when it declines to fit.
#include "search/internal/parzen.h"

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

// x in [0, 1], opt in {sgd, adam} with momentum under sgd only. Genes: x, opt, momentum.
SearchSpace Space() { return testing::DoublesAndOptimizer({"x"}); }

TEST(MaskInactiveTest, AChildIsActiveOnlyUnderItsParentsValue) {
  const GenomeCodec codec(Space());
  EXPECT_EQ(MaskInactive(codec, {0.5, kSgd, 0.3}), (Genome{0.5, kSgd, 0.3}));
  const Genome adam = MaskInactive(codec, {0.5, kAdam, 0.3});
  EXPECT_EQ(adam[0], 0.5);
  EXPECT_EQ(adam[1], kAdam);
  EXPECT_TRUE(std::isnan(adam[2]));
}

TEST(ParzenDensityTest, DrawsLandNearTheBestTrialsAndInTheirCategory) {
  const GenomeCodec codec(Space());
  std::vector<Genome> genomes;
  std::vector<Fitness> fitness;
  SplitMix64 rng(3);
  for (int i = 0; i < 100; ++i) {
    const double x = rng.NextUnit();
    const bool adam = rng.NextUnit() < 0.5;
    genomes.push_back({x, adam ? kAdam : kSgd, rng.NextUnit()});
    fitness.push_back(Loss(std::abs(x - 0.2) + (adam ? 0 : 1)));
  }
  ParzenDensity density(codec);
  density.Fit(genomes, fitness);
  ASSERT_TRUE(density.fitted());
  int near = 0, adam = 0;
  for (int i = 0; i < 400; ++i) {
    const Genome g = density.Sample(rng);
    ASSERT_EQ(g.size(), 3u);
    for (double v : g) ASSERT_TRUE(v >= 0 && v <= 1) << v;
    near += std::abs(g[0] - 0.2) < 0.15;
    adam += g[1] >= 0.5;
  }
  // The best ten trials are adam with x near 0.2; the uniform prior takes about 1/11.
  EXPECT_GT(near, 250);
  EXPECT_GT(adam, 300);
}

TEST(ParzenDensityTest, AGeneInactiveInEveryGoodTrialIsDrawnUniformly) {
  const GenomeCodec codec(Space());
  std::vector<Genome> genomes;
  std::vector<Fitness> fitness;
  SplitMix64 rng(7);
  for (int i = 0; i < 60; ++i) {
    const bool adam = i % 2 == 0;
    // The good trials are adam: their momentum gene holds 0.9 but is not theirs.
    genomes.push_back({rng.NextUnit(), adam ? kAdam : kSgd, adam ? 0.9 : rng.NextUnit()});
    fitness.push_back(Loss(adam ? rng.NextUnit() : 2 + rng.NextUnit()));
  }
  ParzenDensity density(codec);
  density.Fit(genomes, fitness);
  ASSERT_TRUE(density.fitted());
  int near_stale_value = 0;
  for (int i = 0; i < 400; ++i) near_stale_value += std::abs(density.Sample(rng)[2] - 0.9) < 0.05;
  EXPECT_LT(near_stale_value, 80);  // uniform: about 40
}

TEST(ParzenDensityTest, NeedsEnoughRankedTrials) {
  const GenomeCodec codec(Space());
  ParzenDensity density(codec);
  std::vector<Genome> genomes(ParzenDensity::kMinTrials - 1, Genome{0.5, kSgd, 0.5});
  std::vector<Fitness> fitness(genomes.size(), Loss(1));
  density.Fit(genomes, fitness);
  EXPECT_FALSE(density.fitted());
  // Enough trials, but every one failed: nothing is good.
  genomes.assign(20, Genome{0.5, kSgd, 0.5});
  fitness.assign(20, Fitness{});
  density.Fit(genomes, fitness);
  EXPECT_FALSE(density.fitted());
  // One success among failures is enough.
  fitness[4] = Loss(0);
  density.Fit(genomes, fitness);
  EXPECT_TRUE(density.fitted());
}

}  // namespace
}  // namespace evoscale::search::internal
