#include "trainer/flags.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace evoscale::trainer {
namespace {

TEST(TrainerFlagsTest, ParsesTheBindingFlags) {
  auto parsed = ParseTrainerFlags({"--train",
                                   "a.tsv",
                                   "--test=b.tsv",
                                   "--epochs",
                                   "2",
                                   "--batch-size",
                                   "256",
                                   "--embedding-dim",
                                   "8",
                                   "--hidden",
                                   "64,32",
                                   "--optimizer-sparse",
                                   "ftrl",
                                   "--lr-sparse",
                                   "0.1",
                                   "--lr-dense",
                                   "0.002",
                                   "--threads",
                                   "3",
                                   "--shards",
                                   "6",
                                   "--seed",
                                   "9",
                                   "--checkpoint-dir",
                                   "/tmp/ck",
                                   "--resume",
                                   "--device",
                                   "cpu"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const TrainerConfig& c = parsed->config;
  EXPECT_EQ(c.train_path, "a.tsv");
  EXPECT_EQ(c.test_path, "b.tsv");
  EXPECT_EQ(c.epochs, 2);
  EXPECT_EQ(c.batch_size, 256);
  EXPECT_EQ(c.embedding_dim, 8);
  EXPECT_EQ(c.hidden, (std::vector<int>{64, 32}));
  EXPECT_EQ(c.sparse.kind, SparseOptimizerKind::kFtrl);
  EXPECT_FLOAT_EQ(c.sparse.lr, 0.1f);
  EXPECT_FLOAT_EQ(c.lr_dense, 0.002f);
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.shards, 6);
  EXPECT_EQ(c.seed, 9u);
  EXPECT_TRUE(c.resume);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(TrainerFlagsTest, DefaultsMatchTorchDnn) {
  auto parsed = ParseTrainerFlags({"--synthetic", "100"});
  ASSERT_TRUE(parsed.ok());
  const TrainerConfig& c = parsed->config;
  EXPECT_EQ(c.sparse.kind, SparseOptimizerKind::kAdagrad);
  EXPECT_FLOAT_EQ(c.sparse.lr, 0.05f);
  EXPECT_FLOAT_EQ(c.lr_dense, 1e-3f);
  EXPECT_EQ(c.hidden, (std::vector<int>{256, 128}));
  EXPECT_EQ(c.embedding_dim, 16);
  EXPECT_EQ(c.batch_size, 1024);
}

TEST(TrainerFlagsTest, BadFlagsNameTheFlag) {
  auto unknown = ParseTrainerFlags({"--bogus", "1"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "unknown flag --bogus");
  auto not_int = ParseTrainerFlags({"--batch-size", "big"});
  EXPECT_EQ(not_int.status().message(), "flag --batch-size: \"big\" is not an integer");
  auto missing = ParseTrainerFlags({"--train"});
  EXPECT_EQ(missing.status().message(), "flag --train needs a value");
  auto opt = ParseTrainerFlags({"--optimizer-sparse", "rmsprop"});
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  auto stray = ParseTrainerFlags({"train.tsv"});
  EXPECT_EQ(stray.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainerFlagsTest, ConfigFileIsOverriddenByTheCommandLine) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "trainer_flags_test_config.json").string();
  std::ofstream(path) << R"({"synthetic": 500, "batch_size": 64, "hidden": [32, 16],
                             "optimizer-sparse": "adam", "resume": false})";
  auto parsed = ParseTrainerFlags({"--config", path, "--batch-size", "128"});
  std::remove(path.c_str());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.synthetic_rows, 500);
  EXPECT_EQ(parsed->config.batch_size, 128);
  EXPECT_EQ(parsed->config.hidden, (std::vector<int>{32, 16}));
  EXPECT_EQ(parsed->config.sparse.kind, SparseOptimizerKind::kAdam);
  auto missing = ParseTrainerFlags({"--config", "/nonexistent.json"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(ParseFlatJsonTest, RejectsBrokenJson) {
  EXPECT_FALSE(ParseFlatJson("{\"a\": 1").ok());
  EXPECT_FALSE(ParseFlatJson("[1]").ok());
  auto ok = ParseFlatJson("{ }");
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->empty());
}

}  // namespace
}  // namespace evoscale::trainer
