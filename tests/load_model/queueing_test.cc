#include "load_model/queueing.h"

#include <cmath>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

TEST(QueueingTest, ErlangCMatchesClosedForms) {
  EXPECT_NEAR(ErlangC(1, 0.5), 0.5, 1e-12);         // M/M/1: P(wait) = rho.
  EXPECT_NEAR(ErlangC(2, 1.0), 1.0 / 3.0, 1e-12);   // B = 0.2, C = 0.2 / 0.6.
  EXPECT_EQ(ErlangC(2, 2.0), 1.0);
  EXPECT_EQ(ErlangC(3, 0.0), 0.0);
}

TEST(QueueingTest, MeanWait) {
  EXPECT_NEAR(MeanQueueWait(1, 0.5, 2.0), 2.0, 1e-12);  // 0.5 * 2 / (1 - 0.5)
  EXPECT_TRUE(std::isinf(MeanQueueWait(2, 2.5, 1.0)));
}

TEST(QueueingTest, MinServersForWait) {
  // 0.5 erlangs: one server waits 1 service time on average; a budget of 0.5 needs two.
  EXPECT_EQ(MinServersForWait(0.5, 1.0, 1.0, 100), 1);
  EXPECT_EQ(MinServersForWait(0.5, 1.0, 0.5, 100), 2);
  EXPECT_EQ(MinServersForWait(0, 1.0, 0.1, 100), 1);
  EXPECT_EQ(MinServersForWait(1000, 1.0, 0.01, 50), 50);
}

}  // namespace
}  // namespace evoscale::load_model
