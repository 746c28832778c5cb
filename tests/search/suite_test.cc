// The search suite's own arithmetic (bench/search/suite.h): hypervolumes, noise draws, and
// that every problem is a proper minimisation problem with optimum 0.
#include "bench/search/suite.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "gtest/gtest.h"
#include "search/internal/sampling.h"

namespace evoscale::bench {
namespace {

TEST(SuiteHypervolumeTest, TwoAndThreeObjectivesMatchHandComputedVolumes) {
  EXPECT_DOUBLE_EQ(Hypervolume({{0.5, 0.5}}, {1, 1}), 0.25);
  // Two points: 0.5 x 1 + 0.5 x 0.5 minus nothing (staircase).
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 0.5}, {0.5, 0}}, {1, 1}), 0.75);
  // A dominated point and one outside the reference add nothing.
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 0.5}, {0.5, 0}, {0.6, 0.6}, {2, -1}}, {1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(Hypervolume({{0.5, 0.5, 0.5}}, {1, 1, 1}), 0.125);
  // Three boxes of 1/4 overlapping pairwise and all together in the same 1/8:
  // inclusion-exclusion gives 3/4 - 3/8 + 1/8.
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 0.5, 0.5}, {0.5, 0, 0.5}, {0.5, 0.5, 0}}, {1, 1, 1}), 0.5);
}

TEST(SuiteNoiseTest, DrawsAreAFunctionOfProblemSeedAndIndex) {
  EXPECT_EQ(SuiteNoiseDraw("noisy_sphere20", 1, 7), SuiteNoiseDraw("noisy_sphere20", 1, 7));
  EXPECT_NE(SuiteNoiseDraw("noisy_sphere20", 1, 7), SuiteNoiseDraw("noisy_sphere20", 1, 8));
  EXPECT_NE(SuiteNoiseDraw("noisy_sphere20", 1, 7), SuiteNoiseDraw("noisy_sphere20", 2, 7));
}

TEST(SuiteTest, EightTuningAndEightHeldOutProblemsNonNegativeEverywhere) {
  int tuning = 0, held_out = 0;
  search::internal::SplitMix64 rng(11);
  for (const SuiteProblem& p : Suite()) {
    tuning += p.split == "tuning";
    held_out += p.split == "held-out";
    for (int k = 0; k < 200; ++k) {
      std::vector<double> v;
      for (const SuiteParam& q : p.params) {
        const double u = rng.NextUnit();
        if (q.type == SuiteParam::Type::kCategorical) {
          v.push_back(std::floor(u * static_cast<double>(q.choices.size())));
        } else {
          double x = q.log ? std::exp(std::log(q.low) + u * (std::log(q.high) - std::log(q.low)))
                           : q.low + u * (q.high - q.low);
          if (q.type == SuiteParam::Type::kInt) x = std::round(x);
          v.push_back(x);
        }
      }
      // Inactive conditional parameters are NaN.
      for (size_t i = 0; i < p.params.size(); ++i) {
        const SuiteParam& q = p.params[i];
        if (q.parent < 0) continue;
        bool active = false;
        for (int c : q.parent_choices) active = active || v[q.parent] == c;
        if (!active) v[i] = std::nan("");
      }
      const double f = p.f(v);
      ASSERT_TRUE(std::isfinite(f)) << p.name;
      ASSERT_GE(f, -1e-9) << p.name;
    }
  }
  EXPECT_EQ(tuning, 8);
  EXPECT_EQ(held_out, 8);
}

TEST(SuiteTest, TheHpoSurfacesReachZeroAtTheirBestSetting) {
  const auto find = [](const char* name) -> const SuiteProblem& {
    for (const SuiteProblem& p : Suite()) {
      if (p.name == name) return p;
    }
    throw std::runtime_error(name);
  };
  // lr 1e-3, batch 256, adamw, 3 layers of 256, dropout 0.18, wd 1e-3, gelu, emb 32, no warmup.
  EXPECT_NEAR(find("hpo_mixed10").f({1e-3, 256, 2, 3, 256, 0.18, 1e-3, 1, 32, 0}), 0, 1e-12);
  // dcn with 3 cross layers, sgd with momentum 0.9, lr 10^(-1.2 - 0.32), l2 1e-6, 512 x 3,
  // batch 2048.
  const double nan = std::nan("");
  EXPECT_NEAR(find("hpo_conditional11")
                  .f({1, 3, nan, 0, 0.9, nan, std::pow(10, -1.52), 1e-6, 512, 3, 2048}),
              0, 1e-12);
}

}  // namespace
}  // namespace evoscale::bench
