#include "search/internal/cma.h"

#include <cmath>
#include <vector>

#include "Eigen/Dense"
#include "gtest/gtest.h"
#include "search/internal/fitness.h"
#include "search/internal/sampling.h"
#include "tests/search/surrogate_test_support.h"

namespace evoscale::search::internal {
namespace {

using testing::Loss;

TEST(CmaModelTest, ConvergesOnAShiftedSphere) {
  CmaModel model(5);
  model.Reset(Eigen::VectorXd::Constant(5, 0.5), 0.2);
  SplitMix64 rng(1);
  const Eigen::VectorXd optimum = Eigen::VectorXd::Constant(5, 0.3);
  for (int i = 0; i < 1500; ++i) {
    const Eigen::VectorXd x = model.Sample(rng);
    model.Tell(x, Loss((x - optimum).squaredNorm()));
  }
  EXPECT_LT((model.mean() - optimum).norm(), 1e-3);
  EXPECT_LT(model.sigma(), 0.01);
}

TEST(CmaModelTest, FailedPointsDoNotMoveTheMean) {
  CmaModel model(3, /*lambda=*/4);
  model.Reset(Eigen::VectorXd::Constant(3, 0.5), 0.1);
  for (int i = 0; i < 4; ++i) model.Tell(Eigen::VectorXd::Constant(3, 0.9), Fitness{});
  EXPECT_EQ(model.mean(), Eigen::VectorXd::Constant(3, 0.5));
}

TEST(CmaModelTest, InjectedFarPointsCannotBlowUpTheStep) {
  CmaModel model(4, /*lambda=*/6);
  model.Reset(Eigen::VectorXd::Constant(4, 0.5), 0.01);
  for (int i = 0; i < 6; ++i) model.Tell(Eigen::VectorXd::Constant(4, i % 2 ? 100.0 : -100.0), Loss(i));
  EXPECT_LT(model.sigma(), 0.05);
  EXPECT_LT((model.mean() - Eigen::VectorXd::Constant(4, 0.5)).norm(), 0.2);
}

}  // namespace
}  // namespace evoscale::search::internal
