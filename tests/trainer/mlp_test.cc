#include "trainer/mlp.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/internal/mlp_kernels.h"

namespace evoscale::trainer {
namespace {

// Loss = sum_i logit_i * c_i, so dlogits = c.
double Loss(Mlp& mlp, const std::vector<float>& x, int n, const std::vector<float>& c) {
  Mlp::Workspace ws = mlp.NewWorkspace(n);
  std::vector<float> logits(n);
  mlp.Forward(ws, x.data(), n, logits.data());
  double loss = 0;
  for (int i = 0; i < n; ++i) loss += double(logits[i]) * c[i];
  return loss;
}

TEST(MlpTest, BackwardMayWriteTheInputGradientOverTheInput) {
  auto created = Mlp::Create({5, 7, 3, 1}, 11, DenseAdamConfig{});
  ASSERT_TRUE(created.ok());
  Mlp& mlp = **created;
  const int n = 6;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * 5), c(n), logits(n), dx(n * 5);
  for (auto& v : x) v = normal(rng);
  for (auto& v : c) v = normal(rng);
  Mlp::Workspace separate = mlp.NewWorkspace(n);
  mlp.Forward(separate, x.data(), n, logits.data());
  mlp.Backward(separate, x.data(), n, c.data(), dx.data());
  Mlp::Workspace in_place = mlp.NewWorkspace(n);
  std::vector<float> x_then_dx = x;
  mlp.Forward(in_place, x_then_dx.data(), n, logits.data());
  mlp.Backward(in_place, x_then_dx.data(), n, c.data(), x_then_dx.data());
  EXPECT_EQ(x_then_dx, dx);
  EXPECT_EQ(in_place.grads, separate.grads);
}

TEST(MlpTest, GradientsMatchFiniteDifferences) {
  auto created = Mlp::Create({5, 7, 3, 1}, 11, DenseAdamConfig{});
  ASSERT_TRUE(created.ok());
  Mlp& mlp = **created;
  const int n = 6;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * 5), c(n);
  for (auto& v : x) v = normal(rng);
  for (auto& v : c) v = normal(rng);
  Mlp::Workspace ws = mlp.NewWorkspace(n);
  std::vector<float> logits(n), dx(n * 5);
  mlp.Forward(ws, x.data(), n, logits.data());
  mlp.Backward(ws, x.data(), n, c.data(), dx.data());
  const float h = 1e-3f;
  for (size_t p = 0; p < mlp.num_params(); p += 5) {
    const float saved = mlp.params()[p];
    mlp.params()[p] = saved + h;
    const double up = Loss(mlp, x, n, c);
    mlp.params()[p] = saved - h;
    const double down = Loss(mlp, x, n, c);
    mlp.params()[p] = saved;
    EXPECT_NEAR(ws.grads[p], (up - down) / (2 * h), 2e-2) << "param " << p;
  }
  for (size_t i = 0; i < x.size(); i += 3) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = Loss(mlp, x, n, c);
    x[i] = saved - h;
    const double down = Loss(mlp, x, n, c);
    x[i] = saved;
    EXPECT_NEAR(dx[i], (up - down) / (2 * h), 2e-2) << "input " << i;
  }
}

TEST(MlpTest, InitialisesLikeTorchLinear) {
  auto mlp = *Mlp::Create({100, 4, 1}, 1, DenseAdamConfig{});
  float max_abs = 0;
  for (size_t i = 0; i < 400; ++i) max_abs = std::max(max_abs, std::fabs(mlp->params()[i]));
  EXPECT_LE(max_abs, 0.1f);  // 1/sqrt(100)
  EXPECT_GT(max_abs, 0.08f);
}

TEST(MlpTest, AdamStepMovesAgainstTheSummedGradient) {
  auto mlp = *Mlp::Create({2, 1}, 1, DenseAdamConfig{0.1f});
  Mlp::Workspace a = mlp->NewWorkspace(1), b = mlp->NewWorkspace(1);
  const std::vector<float> before = mlp->params();
  a.grads = {1.0f, -1.0f, 0.5f};
  b.grads = {1.0f, 0.0f, -1.0f};  // sums: 2, -1, -0.5
  mlp->AdamStep({&a, &b}, 0, mlp->num_params(), 1);
  // First Adam step: -lr * sign(g).
  EXPECT_NEAR(mlp->params()[0], before[0] - 0.1f, 1e-5);
  EXPECT_NEAR(mlp->params()[1], before[1] + 0.1f, 1e-5);
  EXPECT_NEAR(mlp->params()[2], before[2] + 0.1f, 1e-5);
}

TEST(MlpTest, RejectsBadShapes) {
  EXPECT_EQ(Mlp::Create({4}, 1, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Mlp::Create({4, 2}, 1, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Mlp::Create({4, 0, 1}, 1, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MlpKernelsTest, BestVariantAgreesWithBaseline) {
  const auto& best = internal::BestMlpKernels();
  const auto& base = internal::BaselineMlpKernels();
  const int sizes[] = {33, 17, 1};
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  std::vector<float> w0(33 * 17), b0(17), w1(17), b1(1), x(9 * 33);
  for (auto* v : {&w0, &b0, &w1, &b1, &x}) {
    for (auto& e : *v) e = normal(rng);
  }
  const float* ws[] = {w0.data(), w1.data()};
  const float* bs[] = {b0.data(), b1.data()};
  internal::MlpView view{2, sizes, ws, bs};
  std::vector<float> h1(9 * 17), o1(9), h2(9 * 17), o2(9);
  float* acts1[] = {h1.data(), o1.data()};
  float* acts2[] = {h2.data(), o2.data()};
  best.forward(view, x.data(), 9, acts1);
  base.forward(view, x.data(), 9, acts2);
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(o1[i], o2[i], 1e-3f * (1 + std::fabs(o2[i])));
}

}  // namespace
}  // namespace evoscale::trainer
