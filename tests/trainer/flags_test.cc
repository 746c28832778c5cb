#include "trainer/flags.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

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

// Every flag of kTrainerUsage, with a value other than its default and what it must set.
struct FlagCase {
  std::string flag;
  std::string value;
  std::function<bool(const TrainerConfig&)> took;
};

std::vector<FlagCase> EveryValueFlag() {
  return {
      {"train", "a.tsv", [](const TrainerConfig& c) { return c.train_path == "a.tsv"; }},
      {"test", "b.tsv", [](const TrainerConfig& c) { return c.test_path == "b.tsv"; }},
      {"synthetic", "500", [](const TrainerConfig& c) { return c.synthetic_rows == 500; }},
      {"epochs", "3", [](const TrainerConfig& c) { return c.epochs == 3; }},
      {"batch-size", "64", [](const TrainerConfig& c) { return c.batch_size == 64; }},
      {"embedding-dim", "4", [](const TrainerConfig& c) { return c.embedding_dim == 4; }},
      {"hidden", "32,16,8",
       [](const TrainerConfig& c) { return c.hidden == std::vector<int>{32, 16, 8}; }},
      {"optimizer-sparse", "sgd",
       [](const TrainerConfig& c) { return c.sparse.kind == SparseOptimizerKind::kSgd; }},
      {"lr-sparse", "0.25", [](const TrainerConfig& c) { return c.sparse.lr == 0.25f; }},
      {"lr-dense", "1e-4", [](const TrainerConfig& c) { return c.lr_dense == 1e-4f; }},
      {"threads", "5", [](const TrainerConfig& c) { return c.threads == 5; }},
      {"shards", "10", [](const TrainerConfig& c) { return c.shards == 10; }},
      {"seed", "42", [](const TrainerConfig& c) { return c.seed == 42u; }},
      {"checkpoint-dir", "/tmp/ck",
       [](const TrainerConfig& c) { return c.checkpoint_dir == "/tmp/ck"; }},
      {"device", "cuda", [](const TrainerConfig& c) { return c.device == "cuda"; }},
      {"progress-every", "7", [](const TrainerConfig& c) { return c.progress_every == 7; }},
      {"max-steps", "11", [](const TrainerConfig& c) { return c.max_steps == 11; }},
      {"init-stddev", "0.5", [](const TrainerConfig& c) { return c.init_stddev == 0.5f; }},
      {"holdout-fraction", "0.25",
       [](const TrainerConfig& c) { return c.holdout_fraction == 0.25; }},
      {"max-malformed-fraction", "0.5",
       [](const TrainerConfig& c) { return c.max_malformed_fraction == 0.5; }},
      {"min-count", "3", [](const TrainerConfig& c) { return c.min_count == 3u; }},
      {"min-count-slots", "1:2,3:9",
       [](const TrainerConfig& c) {
         return c.min_count_by_slot == std::vector<uint32_t>{0, 2, 0, 9};
       }},
      {"expire-after-steps", "40",
       [](const TrainerConfig& c) { return c.expire_after_steps == 40; }},
      {"evict-every", "13", [](const TrainerConfig& c) { return c.evict_every == 13; }},
      {"checkpoint-every", "17", [](const TrainerConfig& c) { return c.checkpoint_every == 17; }},
      {"full-checkpoint-every", "4",
       [](const TrainerConfig& c) { return c.full_checkpoint_every == 4; }},
  };
}

TEST(TrainerFlagsTest, EveryFlagTakesItsValueAfterASpaceOrAnEqualsSign) {
  for (const FlagCase& f : EveryValueFlag()) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--" + f.flag, f.value},
          std::vector<std::string>{"--" + f.flag + "=" + f.value}}) {
      absl::StatusOr<ParsedFlags> parsed = ParseTrainerFlags(args);
      ASSERT_TRUE(parsed.ok()) << args[0] << ": " << parsed.status();
      EXPECT_TRUE(f.took(parsed->config)) << args[0];
      // A flag's default is not what the case sets, so the case shows the flag was read.
      EXPECT_FALSE(f.took(TrainerConfig())) << args[0];
    }
  }
}

TEST(TrainerFlagsTest, DashesInANameMayBeUnderscores) {
  auto parsed = ParseTrainerFlags({"--batch_size", "12", "--lr_dense=0.5", "--min_count_slots",
                                   "0:4"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.batch_size, 12);
  EXPECT_EQ(parsed->config.lr_dense, 0.5f);
  EXPECT_EQ(parsed->config.min_count_by_slot, std::vector<uint32_t>{4});
}

TEST(TrainerFlagsTest, SwitchesAreBareOrTakeTrueOrFalse) {
  auto bare = ParseTrainerFlags({"--resume", "--help"});
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->config.resume);
  EXPECT_TRUE(bare->help);
  for (const char* off : {"--resume=false", "--resume=0"}) {
    auto parsed = ParseTrainerFlags({"--resume", off});
    ASSERT_TRUE(parsed.ok()) << off << ": " << parsed.status();
    EXPECT_FALSE(parsed->config.resume) << off;
  }
  for (const char* on : {"--resume=true", "--resume=1"}) {
    auto parsed = ParseTrainerFlags({on});
    ASSERT_TRUE(parsed.ok()) << on << ": " << parsed.status();
    EXPECT_TRUE(parsed->config.resume) << on;
  }
  auto bad = ParseTrainerFlags({"--resume=yes"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "flag --resume: \"yes\" is not true or false");
}

TEST(TrainerFlagsTest, TheLastOfARepeatedFlagWins) {
  auto parsed = ParseTrainerFlags({"--epochs", "1", "--epochs=2", "--hidden", "8", "--hidden",
                                   "4,2"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.epochs, 2);
  EXPECT_EQ(parsed->config.hidden, (std::vector<int>{4, 2}));
}

TEST(TrainerFlagsTest, NumbersAreDecimal) {
  auto parsed = ParseTrainerFlags({"--seed", "010", "--lr-sparse", "1e-3"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.seed, 10u);  // not octal
  EXPECT_FLOAT_EQ(parsed->config.sparse.lr, 1e-3f);
  EXPECT_EQ(ParseTrainerFlags({"--seed", "0x10"}).status().message(),
            "flag --seed: \"0x10\" is not an integer");
}

TEST(TrainerFlagsTest, BadFlagsNameTheFlag) {
  auto unknown = ParseTrainerFlags({"--bogus", "1"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "unknown flag --bogus");
  EXPECT_EQ(ParseTrainerFlags({"--synthetic", "5", "--bogus=1"}).status().message(),
            "unknown flag --bogus");
  auto not_int = ParseTrainerFlags({"--batch-size", "big"});
  EXPECT_EQ(not_int.status().message(), "flag --batch-size: \"big\" is not an integer");
  auto not_number = ParseTrainerFlags({"--lr-dense=fast"});
  EXPECT_EQ(not_number.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(not_number.status().message(), "flag --lr-dense: \"fast\" is not a number");
  auto missing = ParseTrainerFlags({"--train"});
  EXPECT_EQ(missing.status().message(), "flag --train needs a value");
  auto opt = ParseTrainerFlags({"--optimizer-sparse", "rmsprop"});
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.status().message(),
            "flag --optimizer-sparse: \"rmsprop\" is not one of sgd, adagrad, ftrl, adam");
  EXPECT_EQ(ParseTrainerFlags({"--hidden", "64,0"}).status().message(),
            "flag --hidden: \"64,0\" is not a comma-separated list of positive widths");
  EXPECT_EQ(ParseTrainerFlags({"--min-count-slots", "26:1"}).status().message(),
            "flag --min-count-slots: \"26:1\" is not a list of SLOT:COUNT with SLOT in [0, 26)");
  auto stray = ParseTrainerFlags({"train.tsv"});
  EXPECT_EQ(stray.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stray.status().message(), "unexpected argument \"train.tsv\" (flags start with --)");
}

// Config files in a fresh directory per test.
class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("trainer_flags_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `json` to a new file and returns its path.
  std::string Write(const std::string& json) {
    const std::string path = (dir_ / ("config" + std::to_string(++files_) + ".json")).string();
    std::ofstream(path) << json;
    return path;
  }

  std::filesystem::path dir_;
  int files_ = 0;
};

TEST_F(ConfigFileTest, ConfigFileIsOverriddenByTheCommandLine) {
  const std::string path = Write(R"({"synthetic": 500, "batch_size": 64, "hidden": [32, 16],
                                     "optimizer-sparse": "adam", "resume": false})");
  auto parsed = ParseTrainerFlags({"--config", path, "--batch-size", "128"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.synthetic_rows, 500);
  EXPECT_EQ(parsed->config.batch_size, 128);
  EXPECT_EQ(parsed->config.hidden, (std::vector<int>{32, 16}));
  EXPECT_EQ(parsed->config.sparse.kind, SparseOptimizerKind::kAdam);
  auto missing = ParseTrainerFlags({"--config", (dir_ / "nonexistent.json").string()});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ConfigFileTest, StringEscapesDecode) {
  const std::string path =
      Write(R"({"train": "data\\day \"1\"\/\u0041\u00e9.tsv", "checkpoint_dir": "ck\td"})");
  auto parsed = ParseTrainerFlags({"--config=" + path});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.train_path, "data\\day \"1\"/A\xc3\xa9.tsv");
  EXPECT_EQ(parsed->config.checkpoint_dir, "ck\td");
}

TEST_F(ConfigFileTest, EveryFlagIsAKey) {
  const std::string path = Write(R"({
      "train": "a.tsv", "test": "b.tsv", "synthetic": 500, "epochs": 3, "batch_size": 64,
      "embedding-dim": 4, "hidden": [32, 16, 8], "optimizer_sparse": "sgd", "lr_sparse": 0.25,
      "lr_dense": 1e-4, "threads": 5, "shards": 10, "seed": 42, "checkpoint_dir": "/tmp/ck",
      "device": "cuda", "progress_every": 7, "max_steps": 11, "init_stddev": 0.5,
      "holdout_fraction": 0.25, "max_malformed_fraction": 0.5, "min_count": 3,
      "min_count_slots": ["1:2", "3:9"], "expire_after_steps": 40, "evict_every": 13,
      "checkpoint_every": 17, "full_checkpoint_every": 4, "resume": true})");
  auto parsed = ParseTrainerFlags({"--config", path});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  for (const FlagCase& f : EveryValueFlag()) EXPECT_TRUE(f.took(parsed->config)) << f.flag;
  EXPECT_TRUE(parsed->config.resume);
  // A list may also be given as the command line writes it.
  parsed = ParseTrainerFlags({"--config", Write(R"({"hidden": "64,32"})")});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.hidden, (std::vector<int>{64, 32}));
}

TEST_F(ConfigFileTest, WrongTypesNameTheKey) {
  struct Case {
    const char* json;
    const char* message;
  } const cases[] = {
      {R"({"epochs": "two"})", R"("epochs" must be an integer, not "two")"},
      {R"({"batch_size": 6.5})", R"("batch_size" must be an integer, not 6.5)"},
      {R"({"train": 5})", R"("train" must be a string, not 5)"},
      {R"({"lr_dense": true})", R"("lr_dense" must be a number, not true)"},
      {R"({"resume": "yes"})", R"("resume" must be true or false, not "yes")"},
      {R"({"test": null})", R"("test" must be a string, not null)"},
      {R"({"hidden": {"a": 1}})",
       R"("hidden" must be an array or a comma-separated string, not {"a":1})"},
      {R"({"hidden": [32, 1.5]})",
       R"("hidden" must be an array of strings or integers, not [32,1.5])"},
  };
  for (const Case& c : cases) {
    const std::string path = Write(c.json);
    auto parsed = ParseTrainerFlags({"--config", path});
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_EQ(parsed.status().message(), "--config " + path + ": " + c.message) << c.json;
  }
}

TEST_F(ConfigFileTest, BadValuesAndUnknownKeysNameTheFlag) {
  std::string path = Write(R"({"optimizer_sparse": "rmsprop"})");
  EXPECT_EQ(ParseTrainerFlags({"--config", path}).status().message(),
            "--config " + path +
                ": flag --optimizer-sparse: \"rmsprop\" is not one of sgd, adagrad, ftrl, adam");
  path = Write(R"({"hidden": [64, 0]})");
  EXPECT_EQ(ParseTrainerFlags({"--config", path}).status().message(),
            "--config " + path +
                ": flag --hidden: \"64,0\" is not a comma-separated list of positive widths");
  path = Write(R"({"synthetic": 5, "bogus": 1})");
  auto unknown = ParseTrainerFlags({"--config", path});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "--config " + path + ": unknown flag --bogus");
  path = Write(R"({"config": "other.json"})");
  EXPECT_EQ(ParseTrainerFlags({"--config", path}).status().message(),
            "--config " + path + ": unknown flag --config");
}

TEST_F(ConfigFileTest, BrokenJsonIsInvalid) {
  for (const char* json : {R"({"epochs": 1)", R"({"epochs": 1,})", "{epochs: 1}", ""}) {
    const std::string path = Write(json);
    auto parsed = ParseTrainerFlags({"--config", path});
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_EQ(parsed.status().message().rfind("--config " + path + ": ", 0), 0u)
        << parsed.status();
    EXPECT_NE(parsed.status().message().find("parse error"), absl::string_view::npos)
        << parsed.status();
  }
  const std::string path = Write("[1]");
  EXPECT_EQ(ParseTrainerFlags({"--config", path}).status().message(),
            "--config " + path + ": must be a JSON object of flags, not array");
  auto empty = ParseTrainerFlags({"--config", Write("{ }")});
  ASSERT_TRUE(empty.ok()) << empty.status();
}

}  // namespace
}  // namespace evoscale::trainer
