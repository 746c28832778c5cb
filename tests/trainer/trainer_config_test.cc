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
