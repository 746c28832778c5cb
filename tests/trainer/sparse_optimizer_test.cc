#include "trainer/sparse_optimizer.h"

#include <cmath>

#include "gtest/gtest.h"

namespace evoscale::trainer {
namespace {

SparseOptimizer Make(SparseOptimizerKind kind, float lr) {
  SparseOptimizerConfig config;
  config.kind = kind;
  config.lr = lr;
  return SparseOptimizer(config);
}

TEST(SparseOptimizerTest, SgdStepsAgainstTheGradient) {
  SparseOptimizer opt = Make(SparseOptimizerKind::kSgd, 0.1f);
  EXPECT_EQ(opt.StateFloats(4), 0);
  float w[2] = {1.0f, -2.0f};
  const float g[2] = {0.5f, -1.0f};
  opt.Apply(w, nullptr, g, 2);
  EXPECT_FLOAT_EQ(w[0], 0.95f);
  EXPECT_FLOAT_EQ(w[1], -1.9f);
}

TEST(SparseOptimizerTest, AdagradMatchesHandComputedSteps) {
  SparseOptimizer opt = Make(SparseOptimizerKind::kAdagrad, 0.05f);
  ASSERT_EQ(opt.StateFloats(1), 1);
  float w = 0.2f, n = 0.0f;
  opt.InitState(&w, &n, 1);
  const float g1 = 0.3f, g2 = -0.4f;
  opt.Apply(&w, &n, &g1, 1);
  // n = 0.09, w = 0.2 - 0.05 * 0.3 / 0.3 = 0.15
  EXPECT_FLOAT_EQ(n, 0.09f);
  EXPECT_NEAR(w, 0.15f, 1e-6);
  opt.Apply(&w, &n, &g2, 1);
  // n = 0.25, w = 0.15 + 0.05 * 0.4 / 0.5 = 0.19
  EXPECT_FLOAT_EQ(n, 0.25f);
  EXPECT_NEAR(w, 0.19f, 1e-6);
}

TEST(SparseOptimizerTest, FtrlMatchesHandComputedStepsAndKeepsTheInitialWeight) {
  SparseOptimizerConfig config;
  config.kind = SparseOptimizerKind::kFtrl;
  config.lr = 0.5f;  // alpha
  config.ftrl_beta = 1.0f;
  config.ftrl_l1 = 0.0f;
  config.ftrl_l2 = 0.0f;
  SparseOptimizer opt(config);
  ASSERT_EQ(opt.StateFloats(1), 2);
  float w = 0.1f, state[2];
  opt.InitState(&w, state, 1);
  // z0 = -w * beta / alpha = -0.2, n0 = 0
  EXPECT_FLOAT_EQ(state[0], -0.2f);
  EXPECT_FLOAT_EQ(state[1], 0.0f);
  const float g = 0.6f;
  opt.Apply(&w, state, &g, 1);
  // n = 0.36, sigma = 0.6 / 0.5 = 1.2, z = -0.2 + 0.6 - 1.2 * 0.1 = 0.28,
  // w = -0.28 / ((1 + 0.6) / 0.5) = -0.0875
  EXPECT_NEAR(state[1], 0.36f, 1e-6);
  EXPECT_NEAR(state[0], 0.28f, 1e-6);
  EXPECT_NEAR(w, -0.0875f, 1e-6);
}

TEST(SparseOptimizerTest, FtrlL1KeepsWeightsAtZeroUntilTheGradientOutweighsIt) {
  SparseOptimizerConfig config;
  config.kind = SparseOptimizerKind::kFtrl;
  config.lr = 0.5f;
  config.ftrl_l1 = 10.0f;
  SparseOptimizer opt(config);
  float w = 0.0f, state[2];
  opt.InitState(&w, state, 1);
  const float small = 0.01f;
  opt.Apply(&w, state, &small, 1);
  EXPECT_EQ(w, 0.0f);
  float w2 = 0.0f, state2[2];
  opt.InitState(&w2, state2, 1);
  const float big = 30.0f;
  opt.Apply(&w2, state2, &big, 1);
  // z = -10 + 30 = 20, n = 900: w = -(20 - 10) / ((1 + 30) / 0.5) = -10 / 62
  EXPECT_NEAR(w2, -10.0f / 62.0f, 1e-5);
}

TEST(SparseOptimizerTest, AdamMatchesHandComputedSteps) {
  SparseOptimizerConfig config;
  config.kind = SparseOptimizerKind::kAdam;
  config.lr = 0.01f;
  SparseOptimizer opt(config);
  ASSERT_EQ(opt.StateFloats(1), 3);
  float w = 1.0f, state[3];
  opt.InitState(&w, state, 1);
  const float g1 = 0.5f;
  opt.Apply(&w, state, &g1, 1);
  // First Adam step moves by lr * sign(g) (bias-corrected m/sqrt(v) = 1).
  EXPECT_NEAR(w, 0.99f, 1e-6);
  EXPECT_FLOAT_EQ(state[2], 1.0f);
  const float g2 = -0.5f;
  opt.Apply(&w, state, &g2, 1);
  // m = 0.9*0.05 - 0.05 = -0.005, v = 0.999*0.00025 + 0.00025 = 0.00049975;
  // m_hat = -0.005/0.19 = -0.0263158, v_hat = 0.00049975/0.001999 = 0.25 -> step 0.0105263
  EXPECT_NEAR(w, 0.99f + 0.01f * 0.0263158f / 0.5f, 1e-6);
}

TEST(SparseOptimizerTest, ParsesNames) {
  EXPECT_EQ(*ParseSparseOptimizerKind("ftrl"), SparseOptimizerKind::kFtrl);
  EXPECT_EQ(SparseOptimizerName(SparseOptimizerKind::kAdam), "adam");
  auto bad = ParseSparseOptimizerKind("rmsprop");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rmsprop"), absl::string_view::npos);
}

}  // namespace
}  // namespace evoscale::trainer
