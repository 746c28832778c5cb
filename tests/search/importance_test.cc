#include "search/importance.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

ParameterConfig Double(const std::string& name) {
  return ParameterConfig{.name = name, .type = ParameterType::kDouble, .min = 0, .max = 1};
}

Trial Completed(ParameterDict params, double value, TrialStatus status = TrialStatus::kSucceeded) {
  Trial t;
  t.parameters = std::move(params);
  t.status = status;
  t.final_measurement.metrics["loss"] = value;
  return t;
}

const ParameterImportance& Find(const std::vector<ParameterImportance>& all,
                                const std::string& name) {
  for (const ParameterImportance& p : all) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no " << name;
  return all.front();
}

TEST(MainEffectImportanceTest, RanksParametersByTheVarianceTheyExplain) {
  SearchSpace space{.parameters = {Double("x"), Double("y"), Double("z")}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Trial> trials;
  for (int i = 0; i < 400; ++i) {
    const double x = u(rng), y = u(rng), z = u(rng);
    // x explains about 4/5 of the variance, y 1/5, z nothing.
    trials.push_back(Completed({{"x", x}, {"y", y}, {"z", z}}, 2 * x + y));
  }
  const std::vector<ParameterImportance> all = MainEffectImportance(space, trials, "loss");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "x");
  EXPECT_EQ(all[1].name, "y");
  EXPECT_EQ(all[2].name, "z");
  EXPECT_NEAR(Find(all, "x").explained_variance, 0.8, 0.05);
  EXPECT_NEAR(Find(all, "y").explained_variance, 0.2, 0.05);
  EXPECT_LT(Find(all, "z").explained_variance, 0.01);  // chance grouping is corrected for
  EXPECT_NEAR(all[0].importance + all[1].importance + all[2].importance, 1.0, 1e-12);
  EXPECT_EQ(Find(all, "z").trials, 400);
}

TEST(MainEffectImportanceTest, CategoricalAndConditionalParameters) {
  ParameterConfig opt{.name = "opt",
                      .type = ParameterType::kCategorical,
                      .categories = {"sgd", "adam", "ftrl"}};
  opt.children.push_back(
      ConditionalChild{.parent_categories = {"sgd"}, .parameters = {Double("momentum")}});
  SearchSpace space{.parameters = {opt, Double("noise")}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Trial> trials;
  const std::vector<std::string> names = {"sgd", "adam", "ftrl"};
  for (int i = 0; i < 90; ++i) {
    const std::string& o = names[i % 3];
    ParameterDict params = {{"opt", o}, {"noise", u(rng)}};
    if (o == "sgd") params["momentum"] = u(rng);
    trials.push_back(Completed(params, o == "adam" ? 0.1 : o == "sgd" ? 0.5 : 0.9));
  }
  const std::vector<ParameterImportance> all = MainEffectImportance(space, trials, "loss");
  EXPECT_EQ(all[0].name, "opt");
  EXPECT_NEAR(Find(all, "opt").explained_variance, 1.0, 1e-9);
  EXPECT_EQ(Find(all, "momentum").trials, 30);  // only where it is active
  EXPECT_GT(Find(all, "opt").importance, 0.99);  // the noise parameter explains ~nothing
}

TEST(MainEffectImportanceTest, NothingToExplainGivesZeros) {
  SearchSpace space{.parameters = {Double("x")}};
  std::vector<Trial> few = {Completed({{"x", 0.1}}, 1), Completed({{"x", 0.9}}, 2),
                            Completed({{"x", 0.5}}, 3)};
  std::vector<ParameterImportance> all = MainEffectImportance(space, few, "loss");
  EXPECT_EQ(all[0].trials, 3);
  EXPECT_EQ(all[0].importance, 0);  // fewer than 4 trials
  std::vector<Trial> flat;
  for (int i = 0; i < 20; ++i) flat.push_back(Completed({{"x", i / 20.0}}, 0.5));
  EXPECT_EQ(MainEffectImportance(space, flat, "loss")[0].explained_variance, 0);
  // Only SUCCEEDED trials with a finite value of the metric count.
  std::vector<Trial> mixed = flat;
  mixed.push_back(Completed({{"x", 0.3}}, 9, TrialStatus::kFailed));
  mixed.push_back(Completed({{"x", 0.3}}, NAN));
  EXPECT_EQ(MainEffectImportance(space, mixed, "loss")[0].trials, 20);
  EXPECT_EQ(MainEffectImportance(space, mixed, "other")[0].trials, 0);
}

}  // namespace
}  // namespace evoscale::search
