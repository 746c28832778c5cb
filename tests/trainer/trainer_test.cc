#include "trainer/trainer.h"

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "trainer/gpu.h"

namespace evoscale::trainer {
namespace {

// A small, fast configuration on generated data.
TrainerConfig Small() {
  TrainerConfig c;
  c.synthetic_rows = 20000;
  c.batch_size = 256;
  c.embedding_dim = 8;
  c.hidden = {32, 16};
  c.threads = 2;
  c.progress_every = 20;
  return c;
}

std::vector<std::string> Train(const TrainerConfig& config, absl::Status* status) {
  std::vector<std::string> lines;
  *status = RunTrainer(config, [&](std::string_view line) { lines.emplace_back(line); });
  return lines;
}

double Number(const std::string& line, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":([-0-9.e+]+)");
  if (!std::regex_search(line, m, re)) return -1;
  double v = -1;
  EXPECT_TRUE(absl::SimpleAtod(m[1].str(), &v));
  return v;
}

TEST(TrainerTest, EmitsProgressAndFinalLinesInTheProtocolFormat) {
  absl::Status status;
  auto lines = Train(Small(), &status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_GE(lines.size(), 2u);
  const std::regex progress(
      R"(\{"event":"progress","step":\d+,"examples":\d+,"elapsed_s":[0-9.]+,"metrics":\{"logloss":[0-9.e-]+,"auc":[0-9.e-]+\}\})");
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_TRUE(std::regex_match(lines[i], progress)) << lines[i];
  }
  const std::string& final_line = lines.back();
  EXPECT_EQ(final_line.rfind(R"({"event":"final","examples_per_s":)", 0), 0u) << final_line;
  EXPECT_TRUE(std::regex_search(
      final_line,
      std::regex(R"("peak_rss_bytes":\d+,"metrics":\{"auc":0\.\d+,"logloss":0\.\d+\})")))
      << final_line;
  EXPECT_EQ(Number(final_line, "examples"), 18000);  // 10% held out
  EXPECT_EQ(Number(final_line, "eval_examples"), 2000);
  EXPECT_GT(Number(final_line, "rows"), 1000);
  // The generated data has real signal (small runs learn part of it).
  EXPECT_GT(Number(final_line, "auc"), 0.56);
}

TEST(TrainerTest, IsDeterministicForASeedAndShardsAgree) {
  TrainerConfig c = Small();
  c.synthetic_rows = 6000;
  absl::Status s1, s2, s3;
  auto a = Train(c, &s1);
  auto b = Train(c, &s2);
  c.shards = 5;  // a different split of the same ids; the same model up to summation order
  auto d = Train(c, &s3);
  ASSERT_TRUE(s1.ok() && s2.ok() && s3.ok());
  EXPECT_EQ(Number(a.back(), "auc"), Number(b.back(), "auc"));
  EXPECT_EQ(Number(a.back(), "rows"), Number(d.back(), "rows"));
  EXPECT_NEAR(Number(a.back(), "auc"), Number(d.back(), "auc"), 0.002);
}

TEST(TrainerTest, EveryOptimizerTrains) {
  for (auto kind : {SparseOptimizerKind::kSgd, SparseOptimizerKind::kAdagrad,
                    SparseOptimizerKind::kFtrl, SparseOptimizerKind::kAdam}) {
    TrainerConfig c = Small();
    c.epochs = 2;
    c.progress_every = 0;
    c.sparse.kind = kind;
    // Gradients are means over the batch, so plain SGD and FTRL need large steps.
    c.sparse.lr = kind == SparseOptimizerKind::kSgd    ? 20.0f
                  : kind == SparseOptimizerKind::kFtrl ? 10.0f
                  : kind == SparseOptimizerKind::kAdam ? 0.005f
                                                       : 0.05f;
    absl::Status status;
    auto lines = Train(c, &status);
    ASSERT_TRUE(status.ok()) << SparseOptimizerName(kind) << ": " << status;
    EXPECT_GT(Number(lines.back(), "auc"), 0.55) << SparseOptimizerName(kind);
  }
}

TEST(TrainerTest, ThresholdAndExpiryShrinkTheTable) {
  TrainerConfig c = Small();
  c.synthetic_rows = 8000;
  absl::Status status;
  const double plain_rows = Number(Train(c, &status).back(), "rows");
  c.min_count = 3;
  auto thresholded = Train(c, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_LT(Number(thresholded.back(), "rows"), plain_rows / 2);
  EXPECT_GT(Number(thresholded.back(), "pending_ids"), 0);
  c.min_count = 0;
  c.expire_after_steps = 5;
  c.evict_every = 5;
  auto expired = Train(c, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_GT(Number(expired.back(), "evicted"), 0);
  EXPECT_LT(Number(expired.back(), "rows"), plain_rows);
}

TEST(TrainerTest, NonFiniteLossStopsWithAnErrorNamingTheStep) {
  TrainerConfig c = Small();
  c.sparse.kind = SparseOptimizerKind::kSgd;
  c.sparse.lr = 1e30f;
  c.lr_dense = 1e30f;
  absl::Status status;
  auto lines = Train(c, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("non-finite training loss"), absl::string_view::npos) << status;
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(std::regex_search(lines.back(), std::regex(R"(^\{"event":"error","step":\d+,)")))
      << lines.back();
  EXPECT_NE(lines.back().find("at step"), std::string::npos);
}

TEST(TrainerTest, DeviceCudaWithoutAGpuIsAClearError) {
  absl::StatusOr<int> devices = CudaDeviceCount();
  if (devices.ok() && *devices > 0) GTEST_SKIP() << "a CUDA device is present (gpu tests cover it)";
  TrainerConfig c = Small();
  c.device = "cuda";
  absl::Status status;
  auto lines = Train(c, &status);
  if (BuiltWithCuda()) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find("no CUDA device"), std::string::npos) << status;
  } else {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    EXPECT_NE(status.message().find("built without CUDA"), std::string::npos) << status;
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind(R"({"event":"error",)", 0), 0u) << lines[0];
}

TEST(TrainerTest, MissingFileIsAnErrorEvent) {
  TrainerConfig c = Small();
  c.synthetic_rows = 0;
  c.train_path = "/nonexistent/train.tsv";
  absl::Status status;
  auto lines = Train(c, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(R"("event":"error")"), std::string::npos);
  EXPECT_NE(lines[0].find("/nonexistent/train.tsv"), std::string::npos);
}

TEST(TrainerTest, CriteoSampleReachesTorchQuality) {
  const std::string dir = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k";
  if (!std::filesystem::exists(dir + "/train.tsv")) {
    GTEST_SKIP() << dir << " is absent: skipping the real-data check";
  }
  TrainerConfig c;
  c.train_path = dir + "/train.tsv";
  c.test_path = dir + "/test.tsv";
  c.batch_size = 256;
  absl::Status status;
  auto lines = Train(c, &status);
  ASSERT_TRUE(status.ok()) << status;
  // PyTorch's run of the same model: AUC 0.735 (../shared/bench/README.md); small and noisy.
  EXPECT_GT(Number(lines.back(), "auc"), 0.70) << lines.back();
}

}  // namespace
}  // namespace evoscale::trainer
