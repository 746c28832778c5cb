#include "trainer/trainer_config.h"

#include "gtest/gtest.h"

namespace evoscale::trainer {
namespace {

TEST(TrainerConfigTest, ValidationNamesTheSetting) {
  TrainerConfig c;
  EXPECT_NE(ValidateConfig(c).message().find("--train"), absl::string_view::npos);
  c.synthetic_rows = 10;
  c.batch_size = 0;
  EXPECT_NE(ValidateConfig(c).message().find("--batch-size 0"), absl::string_view::npos);
  c.batch_size = 8;
  c.resume = true;
  EXPECT_NE(ValidateConfig(c).message().find("--checkpoint-dir"), absl::string_view::npos);
  c.resume = false;
  c.device = "tpu";
  EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace evoscale::trainer

namespace evoscale::trainer {
namespace {

TEST(TrainerConfigTest, StreamAndServeSettingsAreChecked) {
  TrainerConfig c;
  c.train_path = "-";
  EXPECT_EQ(ValidateConfig(c).message(), "--train - (stdin) needs --stream");
  c.stream = true;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.epochs = 2;
  EXPECT_EQ(ValidateConfig(c).message(), "--stream reads its examples once: drop --epochs");
  c.epochs = 1;
  c.push_every_s = 0;
  EXPECT_EQ(ValidateConfig(c).message(), "--push-every 0: must be in (0, 3600] seconds");
  c.push_every_s = 1;
  c.dense_every_s = -1;
  EXPECT_EQ(ValidateConfig(c).message(), "--dense-every -1: must be in (0, 86400] seconds");
  c.dense_every_s = 60;
  c.serve = {"127.0.0.1:1"};
  c.device = "cuda";
  EXPECT_EQ(ValidateConfig(c).message(), "--serve: only --device cpu pushes rows yet");
  TrainerConfig synthetic;
  synthetic.synthetic_rows = 100;
  synthetic.stream = true;
  EXPECT_EQ(ValidateConfig(synthetic).message(), "--stream needs --train FILE or --train - (stdin)");
}

}  // namespace
}  // namespace evoscale::trainer
