#include "load_model/trial_resource_model.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

TEST(TrialResourceModelTest, DefaultsBeforeAnyTrial) {
  TrialResourceModel m;
  const TrialResourceRequest r = m.Predict({{"embedding_dim", 16}});
  EXPECT_DOUBLE_EQ(r.cpu_cores, 1.0);
  EXPECT_EQ(r.memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(r.gpus, 0);
}

TEST(TrialResourceModelTest, FitsMemoryLinearInEmbeddingDimIgnoringOtherParameters) {
  TrialResourceModel m;
  // memory = 100 MB + 4 MB per embedding dimension; cpu = threads; the learning rate matters
  // to neither.
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> lr(1e-4, 1e-1);
  for (double dim : {8, 16, 24, 32, 48}) {
    for (double threads : {1, 2, 4}) {
      TrialTelemetry t;
      t.params = {{"embedding_dim", dim}, {"threads", threads}, {"lr", lr(rng)}};
      t.peak_memory_bytes = 100e6 + 4e6 * dim;
      t.peak_cpu_cores = threads;
      ASSERT_TRUE(m.AddTrial(t).ok());
    }
  }
  const TrialResourceRequest r =
      m.Predict({{"embedding_dim", 40}, {"threads", 2}, {"lr", 0.05}});
  const double truth = 100e6 + 4e6 * 40;
  EXPECT_TRUE(r.learned);
  EXPECT_NEAR(r.memory_fit_bytes, truth, truth * 1e-3);
  // An exact fit earns the smallest margin.
  EXPECT_NEAR(r.memory_margin, 0.05, 1e-3);
  EXPECT_NEAR(r.memory_bytes, truth * 1.05, truth * 2e-3);
  EXPECT_NEAR(r.cpu_cores, 2 * 1.05, 0.01);
  EXPECT_EQ(r.gpus, 0);
  EXPECT_NE(r.explanation.find("embedding_dim"), std::string::npos) << r.explanation;
  EXPECT_EQ(r.explanation.find("lr"), std::string::npos) << r.explanation;
}

TEST(TrialResourceModelTest, FitsAPowerLawInRowsAndDim) {
  TrialResourceModel m;
  auto truth = [](double rows, double dim) { return 50.0 * std::pow(rows, 0.7) * dim; };
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> log_rows(std::log(1e4), std::log(1e6));
  std::uniform_int_distribution<int> dim(4, 64);
  for (int i = 0; i < 12; ++i) {
    TrialTelemetry t;
    t.params = {{"rows", std::exp(log_rows(rng))}, {"dim", double(dim(rng))}};
    t.peak_memory_bytes = truth(t.params["rows"], t.params["dim"]);
    t.peak_cpu_cores = 1;
    ASSERT_TRUE(m.AddTrial(t).ok());
  }
  const TrialResourceRequest r = m.Predict({{"rows", 3e5}, {"dim", 20}});
  EXPECT_NEAR(r.memory_fit_bytes, truth(3e5, 20), truth(3e5, 20) * 0.01);
  EXPECT_LT(r.memory_margin, 0.1);
  EXPECT_NE(r.explanation.find("power-law"), std::string::npos) << r.explanation;
}

TEST(TrialResourceModelTest, NoisyUsageWidensTheMarginEnoughToCoverNewTrials) {
  TrialResourceModel m;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dim(4, 64);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  auto usage = [&](double d) { return (100e6 + 4e6 * d) * noise(rng); };
  for (int i = 0; i < 20; ++i) {
    TrialTelemetry t;
    t.params = {{"dim", double(dim(rng))}};
    t.peak_memory_bytes = usage(t.params["dim"]);
    ASSERT_TRUE(m.AddTrial(t).ok());
  }
  const TrialResourceRequest probe = m.Predict({{"dim", 32}});
  EXPECT_GT(probe.memory_margin, 0.1);  // +-10% noise: more than the exact fit's 5%
  EXPECT_LT(probe.memory_margin, 0.4);
  int covered = 0;
  for (int i = 0; i < 100; ++i) {
    const double d = dim(rng);
    covered += m.Predict({{"dim", d}}).memory_bytes >= usage(d) ? 1 : 0;
  }
  EXPECT_GE(covered, 95);
}

TEST(TrialResourceModelTest, AnOomKillWidensTheMarginUntilNewerTrialsAgree) {
  TrialResourceModel m;
  auto add = [&](double dim) {
    TrialTelemetry t;
    t.params = {{"dim", dim}};
    t.peak_memory_bytes = 100e6 + 4e6 * dim;
    ASSERT_TRUE(m.AddTrial(t).ok());
  };
  for (double dim : {8, 16, 32, 48}) add(dim);
  const TrialResourceRequest before = m.Predict({{"dim", 64}});
  EXPECT_NEAR(before.memory_margin, 0.05, 1e-3);
  // Killed at its request: it needed more than fit x 1.05.
  m.AddOutOfMemory({{"dim", 64}}, double(before.memory_bytes));
  const TrialResourceRequest after = m.Predict({{"dim", 64}});
  EXPECT_NEAR(after.memory_margin, 0.05 + 0.1, 1e-3);
  EXPECT_GT(after.memory_bytes, before.memory_bytes);
  // Eight more trials that the fit predicts well: the kill no longer counts.
  for (int i = 0; i < 8; ++i) add(10 + i);
  EXPECT_NEAR(m.Predict({{"dim", 64}}).memory_margin, 0.05, 1e-3);
}

TEST(TrialResourceModelTest, FewTrialsUseTheLargestWithMargin) {
  TrialResourceModel m;
  TrialTelemetry t;
  t.params = {{"a", 1}, {"b", 2}, {"c", 3}};
  t.peak_cpu_cores = 3;
  t.peak_memory_bytes = 1e9;
  t.gpus_used = 0.4;
  ASSERT_TRUE(m.AddTrial(t).ok());
  const TrialResourceRequest r = m.Predict(t.params);
  EXPECT_DOUBLE_EQ(r.cpu_cores, 3.6);
  EXPECT_EQ(r.memory_bytes, 1'200'000'000);
  EXPECT_EQ(r.gpus, 1);  // A fractional GPU still needs a whole device.
}

TEST(TrialResourceModelTest, RejectsBadTelemetry) {
  TrialResourceModel m;
  TrialTelemetry t;
  t.peak_memory_bytes = -1;
  const absl::Status st = m.AddTrial(t);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("peak_memory_bytes"), std::string::npos);
  TrialTelemetry nan;
  nan.params = {{"lr", std::nan("")}};
  EXPECT_NE(m.AddTrial(nan).message().find("\"lr\""), std::string::npos);
  EXPECT_EQ(m.num_trials(), 0);
}

}  // namespace
}  // namespace evoscale::load_model
