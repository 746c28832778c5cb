// The trainer protocol's lines, byte for byte: field order, rounding, null and escaping.
#include "trainer/protocol.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "trainer/metrics.h"

namespace evoscale::trainer {
namespace {

TEST(ProtocolTest, ProgressLineHasTheBindingFieldsInOrder) {
  BinaryMetrics window;
  const float logits[] = {2.0f, -1.0f, 0.5f, -3.0f};
  const float labels[] = {1.0f, 0.0f, 0.0f, 1.0f};
  window.Add(logits, labels, 4);
  // Mean softplus of (-2, -1, 0.5, 3): 1.11571...; 2 of the 4 positive/negative pairs ordered.
  EXPECT_EQ(ProgressLine(100, 102400, 1.23456, window),
            R"({"event":"progress","step":100,"examples":102400,"elapsed_s":1.235,)"
            R"("metrics":{"logloss":1.11571,"auc":0.5}})");
}

TEST(ProtocolTest, MetricsOfAnEmptyWindowAreNull) {
  EXPECT_EQ(ProgressLine(3, 0, 0.0001, BinaryMetrics()),
            R"({"event":"progress","step":3,"examples":0,"elapsed_s":0.0,)"
            R"("metrics":{"logloss":null,"auc":null}})");
}

TEST(ProtocolTest, FiguresKeepSixSignificantDigits) {
  EXPECT_EQ(Figure(0.123456789).dump(), "0.123457");
  EXPECT_EQ(Figure(93.0546875).dump(), "93.0547");
  EXPECT_EQ(Figure(1234567.0).dump(), "1234570.0");
  EXPECT_EQ(Figure(2.5e-7).dump(), "2.5e-07");
  EXPECT_EQ(Figure(std::numeric_limits<double>::quiet_NaN()).dump(), "null");
  EXPECT_EQ(Figure(std::numeric_limits<double>::infinity()).dump(), "null");
}

TEST(ProtocolTest, FinalLineStartsWithTheSummaryThenTheTrainersFields) {
  FinalSummary summary;
  summary.examples_per_s = 52938.54;
  summary.peak_rss_bytes = 171800000;
  summary.auc = 0.7318049;
  summary.logloss = 0.47171234;
  summary.eval_examples = 2000;
  summary.holdout = false;
  summary.steps = 71;
  summary.examples = 18000;
  summary.train_s = 0.3004;
  summary.malformed_lines = 2;
  const nlohmann::ordered_json details = {{"table", {{"rows", 12}, {"shard_rows", {5, 7}}}},
                                          {"isa", "avx2"}};
  EXPECT_EQ(FinalLine(summary, details),
            R"({"event":"final","examples_per_s":52938.5,"peak_rss_bytes":171800000,)"
            R"("metrics":{"auc":0.731805,"logloss":0.471712},"eval_examples":2000,)"
            R"("eval_set":"test","steps":71,"examples":18000,"train_s":0.3,"malformed_lines":2,)"
            R"("table":{"rows":12,"shard_rows":[5,7]},"isa":"avx2"})");
  summary.holdout = true;
  summary.auc = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(FinalLine(summary, {}).find(R"("metrics":{"auc":null,"logloss":0.471712})"
                                        R"(,"eval_examples":2000,"eval_set":"holdout",)"),
            std::string::npos);
}

TEST(ProtocolTest, CheckpointLine) {
  EXPECT_EQ(CheckpointLine(5, 1280, true, "/tmp/ck/ckpt-000000000005"),
            R"({"event":"checkpoint","step":5,"examples":1280,"full":true,)"
            R"("path":"/tmp/ck/ckpt-000000000005"})");
}

TEST(ProtocolTest, ErrorLineCarriesTheStepOnlyOnceATrainerStarted) {
  EXPECT_EQ(ErrorLine(absl::InvalidArgumentError("--epochs 0: must be >= 1")),
            R"({"event":"error","code":"INVALID_ARGUMENT","message":"--epochs 0: must be >= 1"})");
  EXPECT_EQ(ErrorLine(absl::InternalError("non-finite training loss (nan) at step 2"), 2),
            R"({"event":"error","step":2,"code":"INTERNAL",)"
            R"("message":"non-finite training loss (nan) at step 2"})");
}

TEST(ProtocolTest, StringsAreEscapedAndInvalidUtf8IsReplaced) {
  EXPECT_EQ(ErrorLine(absl::NotFoundError("\"a\\b\"\n\t\x01 caf\xc3\xa9 \xff")),
            "{\"event\":\"error\",\"code\":\"NOT_FOUND\","
            "\"message\":\"\\\"a\\\\b\\\"\\n\\t\\u0001 caf\xc3\xa9 \xef\xbf\xbd\"}");
}

}  // namespace
}  // namespace evoscale::trainer
