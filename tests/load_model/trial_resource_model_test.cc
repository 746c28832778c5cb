#include "load_model/trial_resource_model.h"

#include <cmath>

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

TEST(TrialResourceModelTest, FitsMemoryLinearInEmbeddingDim) {
  TrialResourceModel m;
  // memory = 100 MB + 4 MB per embedding dimension; cpu = threads.
  for (double dim : {8, 16, 24, 32, 48}) {
    for (double threads : {1, 2, 4}) {
      TrialTelemetry t;
      t.params = {{"embedding_dim", dim}, {"threads", threads}};
      t.peak_memory_bytes = 100e6 + 4e6 * dim;
      t.peak_cpu_cores = threads;
      ASSERT_TRUE(m.AddTrial(t).ok());
    }
  }
  const TrialResourceRequest r = m.Predict({{"embedding_dim", 64}, {"threads", 2}});
  const double truth = 100e6 + 4e6 * 64;
  EXPECT_GE(r.memory_bytes, truth * 1.2 * 0.999);  // Margin on an exact fit.
  EXPECT_LE(r.memory_bytes, truth * 1.2 * 1.01);
  EXPECT_NEAR(r.cpu_cores, 2 * 1.2, 0.05);
  EXPECT_EQ(r.gpus, 0);
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
