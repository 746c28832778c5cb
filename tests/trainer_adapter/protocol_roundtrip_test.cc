// The trainer protocol end to end (trainer/PROTOCOL.md): every line trainer/protocol.h can
// print is fed to the adapter's parser, directly (ParseTrialEvent) and as a runner reads a
// trial's stdout (RecordOutputLine, also with a CRLF's '\r'), and every field the adapter keeps
// must come back as the line carried it. The printer's own bytes are protocol_test's
// (tests/trainer/); the parser's bad lines are trial_event_test's.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "trainer/metrics.h"
#include "trainer/protocol.h"
#include "trainer_adapter/trial_event.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale {
namespace {

using ::testing::HasSubstr;
using trainer::BinaryMetrics;
using trainer::FinalSummary;
using trainer_adapter::ParseTrialEvent;
using trainer_adapter::RecordOutputLine;
using trainer_adapter::TrialEvent;
using trainer_adapter::TrialOutcome;

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The protocol's roundings (PROTOCOL.md, "Numbers"), computed apart from protocol.cc's.
double Significant6(double v) { return std::strtod(absl::StrFormat("%.6g", v).c_str(), nullptr); }
double Decimals(double v, int decimals) {
  return std::strtod(absl::StrFormat("%.*f", decimals, v).c_str(), nullptr);
}

void ExpectSameEvent(const TrialEvent& got, const TrialEvent& want) {
  EXPECT_EQ(TrialEventKindName(got.kind), TrialEventKindName(want.kind));
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.examples, want.examples);
  EXPECT_EQ(got.elapsed_s, want.elapsed_s);
  EXPECT_EQ(got.metrics, want.metrics);
  EXPECT_EQ(got.examples_per_s, want.examples_per_s);
  EXPECT_EQ(got.peak_rss_bytes, want.peak_rss_bytes);
  EXPECT_EQ(got.path, want.path);
  EXPECT_EQ(got.code, want.code);
  EXPECT_EQ(got.message, want.message);
}

// Reads `line` as the adapter does and expects `want` back, each way it can read it.
void ExpectReadsAs(const std::string& line, const TrialEvent& want) {
  SCOPED_TRACE(line);
  // One line, whatever its strings hold: the runners split stdout at '\n' (and at 1 MiB).
  EXPECT_EQ(line.find_first_of("\n\r"), std::string::npos);
  EXPECT_LT(line.size(), size_t{1} << 20);
  absl::StatusOr<TrialEvent> parsed = ParseTrialEvent(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameEvent(*parsed, want);
  for (const std::string& printed : {line, line + "\r"}) {
    TrialOutcome outcome;
    std::optional<TrialEvent> recorded = RecordOutputLine(printed, &outcome);
    ASSERT_TRUE(recorded.has_value()) << outcome.first_bad_line_error;
    ExpectSameEvent(*recorded, want);
    EXPECT_EQ(outcome.events, 1);
    EXPECT_EQ(outcome.other_lines, 0);
    EXPECT_EQ(outcome.final.has_value(), want.kind == TrialEvent::Kind::kFinal);
    EXPECT_EQ(outcome.error.has_value(), want.kind == TrialEvent::Kind::kError);
    if (outcome.final.has_value()) ExpectSameEvent(*outcome.final, want);
    if (outcome.error.has_value()) ExpectSameEvent(*outcome.error, want);
  }
}

BinaryMetrics Window(const std::vector<float>& logits, const std::vector<float>& labels) {
  BinaryMetrics window;
  window.Add(logits.data(), labels.data(), logits.size());
  return window;
}

TEST(ProtocolRoundTripTest, ProgressLinesComeBackWithTheirCountsTimeAndMetrics) {
  const BinaryMetrics window = Window({2.0f, -1.0f, 0.5f, -3.0f}, {1, 0, 0, 1});
  ExpectReadsAs(trainer::ProgressLine(100, 102400, 1.23456, window),
                {.kind = TrialEvent::Kind::kProgress,
                 .step = 100,
                 .examples = 102400,
                 .elapsed_s = 1.235,
                 .metrics = {{"auc", 0.5}, {"logloss", Significant6(window.LogLoss())}}});
  // The first line of a run: nothing counted yet, and an empty window's metrics are null,
  // which the adapter leaves out rather than reading them as 0.
  ExpectReadsAs(trainer::ProgressLine(0, 0, 0.0004, BinaryMetrics()),
                {.kind = TrialEvent::Kind::kProgress, .step = 0, .examples = 0, .elapsed_s = 0});
  // An infinite logloss (a logit of +inf on a negative) is null too; the AUC stays.
  ExpectReadsAs(trainer::ProgressLine(
                    7, 14, 2.0, Window({std::numeric_limits<float>::infinity(), 0.5f}, {0, 1})),
                {.kind = TrialEvent::Kind::kProgress,
                 .step = 7,
                 .examples = 14,
                 .elapsed_s = 2,
                 .metrics = {{"auc", 0}}});
  // A window of one class has no AUC.
  const BinaryMetrics positives = Window({0.25f, 1.5f}, {1, 1});
  ExpectReadsAs(trainer::ProgressLine(8, 16, 1e-9, positives),
                {.kind = TrialEvent::Kind::kProgress,
                 .step = 8,
                 .examples = 16,
                 .elapsed_s = 0,
                 .metrics = {{"logloss", Significant6(positives.LogLoss())}}});
}

TEST(ProtocolRoundTripTest, CountsComeBackExactUpToTheLargestInt64) {
  // 2^53 + 1 is the first integer a double cannot hold; counts are read as integers.
  for (int64_t count :
       {int64_t{9'000'000'000'000'000}, int64_t{9'007'199'254'740'993}, kMaxCount - 1, kMaxCount}) {
    const double elapsed = 30 * 365 * 86400.0 + 0.0625;
    ExpectReadsAs(trainer::ProgressLine(count, count, elapsed, BinaryMetrics()),
                  {.kind = TrialEvent::Kind::kProgress,
                   .step = count,
                   .examples = count,
                   .elapsed_s = Decimals(elapsed, 3)});
    ExpectReadsAs(trainer::CheckpointLine(count, count, true, "/ck/ckpt-x"),
                  {.kind = TrialEvent::Kind::kCheckpoint,
                   .step = count,
                   .examples = count,
                   .path = "/ck/ckpt-x"});
    ExpectReadsAs(
        trainer::ErrorLine(absl::InternalError("x"), count),
        {.kind = TrialEvent::Kind::kError, .step = count, .code = "INTERNAL", .message = "x"});
    FinalSummary summary;
    summary.peak_rss_bytes = uint64_t(count);
    summary.examples = count;
    summary.steps = count;
    summary.eval_examples = count;
    summary.malformed_lines = count;
    ExpectReadsAs(trainer::FinalLine(summary, {}), {.kind = TrialEvent::Kind::kFinal,
                                                    .examples = count,
                                                    .examples_per_s = 0,
                                                    .peak_rss_bytes = count});
  }
}

TEST(ProtocolRoundTripTest, CheckpointPathsComeBackWhateverTheyHold) {
  ExpectReadsAs(trainer::CheckpointLine(5, 1280, true, "/tmp/ck/rank-0-of-2/ckpt-000000000005"),
                {.kind = TrialEvent::Kind::kCheckpoint,
                 .step = 5,
                 .examples = 1280,
                 .path = "/tmp/ck/rank-0-of-2/ckpt-000000000005"});
  // "full" is the trainer's to print; the adapter keeps no flag for it.
  ExpectReadsAs(
      trainer::CheckpointLine(6, 1536, false, "/d \"q\" \\b\n\t\x01 caf\xc3\xa9 \xf0\x9f\x98\x80"),
      {.kind = TrialEvent::Kind::kCheckpoint,
       .step = 6,
       .examples = 1536,
       .path = "/d \"q\" \\b\n\t\x01 caf\xc3\xa9 \xf0\x9f\x98\x80"});
  // Bytes that are not UTF-8 reach the adapter as U+FFFD, one for each.
  ExpectReadsAs(trainer::CheckpointLine(7, 1792, false, "/ck/\xff/x\xc3"),
                {.kind = TrialEvent::Kind::kCheckpoint,
                 .step = 7,
                 .examples = 1792,
                 .path = "/ck/\xef\xbf\xbd/x\xef\xbf\xbd"});
  ExpectReadsAs(trainer::CheckpointLine(0, 0, true, ""),
                {.kind = TrialEvent::Kind::kCheckpoint, .step = 0, .examples = 0});
}

TEST(ProtocolRoundTripTest, FinalLinesComeBackWhateverTheTrainerAddsToThem) {
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
  const TrialEvent want = {.kind = TrialEvent::Kind::kFinal,
                           .examples = 18000,
                           .metrics = {{"auc", 0.731805}, {"logloss", 0.471712}},
                           .examples_per_s = 52938.5,
                           .peak_rss_bytes = 171800000};
  // The details of the CPU trainer in one process, of a CPU job of three ranks, of a GPU job
  // of two, and none: the adapter reads none of them and none of them stops it.
  const nlohmann::ordered_json cpu = {{"table",
                                       {{"rows", 12},
                                        {"bytes", 4096},
                                        {"bytes_per_row", trainer::Figure(341.333333)},
                                        {"payload_bytes", 1536},
                                        {"evicted", 0},
                                        {"pending_ids", 3},
                                        {"full_rejections", 0},
                                        {"shard_rows", {5, 7}}}},
                                      {"dense_bytes", 8192},
                                      {"model_bytes", 9824},
                                      {"rss_over_model", trainer::Figure(17487.8)},
                                      {"rss_over_payload", trainer::Figure(17683.2)},
                                      {"threads", 2},
                                      {"shards", 2},
                                      {"ranks", 1},
                                      {"rank_table_bytes", nlohmann::ordered_json::array()},
                                      {"isa", "avx2"},
                                      {"checkpoints", 2}};
  nlohmann::ordered_json job = cpu;
  job["ranks"] = 3;
  job["rank_table_bytes"] = {1365, 1365, 1366};
  job["bytes_exchanged_per_example"] = trainer::Figure(2125.36);
  const nlohmann::ordered_json gpu = {
      {"table", {{"rows", 12}, {"device_bytes", 1 << 20}, {"payload_bytes", 960}}},
      {"dense_bytes", 8192},
      {"device", "cuda"},
      {"gpu", "NVIDIA H200"},
      {"ranks", 2},
      {"rank_device_bytes", 1 << 20},
      {"bytes_exchanged_per_example", trainer::Figure(512.5)}};
  for (const nlohmann::ordered_json& details : {cpu, job, gpu, nlohmann::ordered_json::object()}) {
    ExpectReadsAs(trainer::FinalLine(summary, details), want);
  }
  summary.holdout = true;
  ExpectReadsAs(trainer::FinalLine(summary, cpu), want);
}

TEST(ProtocolRoundTripTest, FinalFiguresThatAreNotFiniteAreLeftOut) {
  FinalSummary summary;  // as it starts: NaN metrics, nothing counted
  ExpectReadsAs(
      trainer::FinalLine(summary, {}),
      {.kind = TrialEvent::Kind::kFinal, .examples = 0, .examples_per_s = 0, .peak_rss_bytes = 0});
  summary.examples_per_s = kInf;
  summary.auc = 0.5;
  summary.logloss = kInf;
  summary.train_s = kNaN;
  ExpectReadsAs(trainer::FinalLine(summary, {}), {.kind = TrialEvent::Kind::kFinal,
                                                  .examples = 0,
                                                  .metrics = {{"auc", 0.5}},
                                                  .peak_rss_bytes = 0});
  // Extremes of the range a figure keeps.
  summary.examples_per_s = 1e15 + 0.04;
  summary.auc = 2.5e-300;
  summary.logloss = 1.7e308;
  ExpectReadsAs(trainer::FinalLine(summary, {}),
                {.kind = TrialEvent::Kind::kFinal,
                 .examples = 0,
                 .metrics = {{"auc", 2.5e-300}, {"logloss", 1.7e308}},
                 .examples_per_s = Decimals(1e15 + 0.04, 1),
                 .peak_rss_bytes = 0});
}

TEST(ProtocolRoundTripTest, ErrorLinesComeBackWithEveryCodeAndAnyMessage) {
  for (int code = 1; code <= 16; ++code) {  // every code but OK
    const absl::Status status(static_cast<absl::StatusCode>(code), "what failed");
    const std::string name = absl::StatusCodeToString(status.code());
    ASSERT_FALSE(name.empty()) << code;
    // Before a trainer started (a flag error): no step.
    ExpectReadsAs(trainer::ErrorLine(status),
                  {.kind = TrialEvent::Kind::kError, .code = name, .message = "what failed"});
    ExpectReadsAs(
        trainer::ErrorLine(status, 0),
        {.kind = TrialEvent::Kind::kError, .step = 0, .code = name, .message = "what failed"});
  }
  const std::string escapes("quote \" backslash \\ newline \n tab \t bell \x07 nul \0 end", 52);
  ASSERT_EQ(escapes.find('\0'), 47u);
  const std::string unicode = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  const std::string long_message(100000, 'm');
  for (const std::string& message : {escapes, unicode, long_message, std::string()}) {
    ExpectReadsAs(
        trainer::ErrorLine(absl::InternalError(message), 12),
        {.kind = TrialEvent::Kind::kError, .step = 12, .code = "INTERNAL", .message = message});
  }
  ExpectReadsAs(trainer::ErrorLine(absl::NotFoundError("\xff open \"/d/\xc3\""), 3),
                {.kind = TrialEvent::Kind::kError,
                 .step = 3,
                 .code = "NOT_FOUND",
                 .message = "\xef\xbf\xbd open \"/d/\xef\xbf\xbd\""});
}

// What the printer takes but no trainer passes (a count below 0, a negative time, a peak RSS
// beyond int64): lines outside the protocol, which the adapter counts as log lines, naming the
// field, rather than reading them as something else.
TEST(ProtocolRoundTripTest, NegativeCountsAndTimesAreOutsideTheProtocolAndSaySo) {
  FinalSummary huge_rss;
  huge_rss.peak_rss_bytes = std::numeric_limits<uint64_t>::max();
  FinalSummary slow;
  slow.examples_per_s = -1;
  const struct {
    std::string line;
    const char* field;
  } cases[] = {
      {trainer::ProgressLine(-1, 0, 0, BinaryMetrics()), "\"step\""},
      {trainer::ProgressLine(1, -5, 0, BinaryMetrics()), "\"examples\""},
      {trainer::ProgressLine(1, 5, -0.5, BinaryMetrics()), "\"elapsed_s\""},
      {trainer::CheckpointLine(-2, 0, true, "/ck"), "\"step\""},
      {trainer::ErrorLine(absl::InternalError("x"), -3), "\"step\""},
      {trainer::FinalLine(huge_rss, {}), "\"peak_rss_bytes\""},
      {trainer::FinalLine(slow, {}), "\"examples_per_s\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    absl::StatusOr<TrialEvent> parsed = ParseTrialEvent(c.line);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.field));
    TrialOutcome outcome;
    EXPECT_FALSE(RecordOutputLine(c.line, &outcome).has_value());
    EXPECT_EQ(outcome.events, 0);
    EXPECT_EQ(outcome.other_lines, 1);
    EXPECT_EQ(outcome.first_bad_line_error, parsed.status().message());
  }
}

// A run's lines in their order, into one outcome: a SIGTERM'd CPU run ends with its checkpoint
// and an ABORTED error; a finished one with its final line.
TEST(ProtocolRoundTripTest, ARunsLinesMakeOneOutcome) {
  const BinaryMetrics window = Window({1.0f, -1.0f}, {1, 0});
  TrialOutcome stopped;
  for (const std::string& line :
       {trainer::ProgressLine(10, 2560, 0.5, window),
        trainer::CheckpointLine(10, 2560, true, "/ck/ckpt-000000000010"),
        trainer::ProgressLine(20, 5120, 1.0, window),
        trainer::CheckpointLine(23, 5888, false, "/ck/ckpt-000000000023"),
        trainer::ErrorLine(absl::AbortedError("stopped at step 23; checkpoint in /ck"), 23)}) {
    ASSERT_TRUE(RecordOutputLine(line, &stopped).has_value()) << line;
  }
  EXPECT_EQ(stopped.events, 5);
  EXPECT_EQ(stopped.other_lines, 0);
  EXPECT_FALSE(stopped.final.has_value());
  ASSERT_TRUE(stopped.error.has_value());
  ExpectSameEvent(*stopped.error, {.kind = TrialEvent::Kind::kError,
                                   .step = 23,
                                   .code = "ABORTED",
                                   .message = "stopped at step 23; checkpoint in /ck"});
  TrialOutcome finished;
  FinalSummary summary;
  summary.auc = 0.75;
  summary.examples = 5888;
  ASSERT_TRUE(
      RecordOutputLine(trainer::ProgressLine(20, 5120, 1.0, window), &finished).has_value());
  // A line that is not an event (a library's log on stdout) is counted, never fatal.
  EXPECT_FALSE(RecordOutputLine("loading 26 tables", &finished).has_value());
  ASSERT_TRUE(RecordOutputLine(trainer::FinalLine(summary, {{"ranks", 1}}), &finished).has_value());
  EXPECT_EQ(finished.events, 2);
  EXPECT_EQ(finished.other_lines, 1);
  EXPECT_FALSE(finished.error.has_value());
  ASSERT_TRUE(finished.final.has_value());
  ExpectSameEvent(*finished.final, {.kind = TrialEvent::Kind::kFinal,
                                    .examples = 5888,
                                    .metrics = {{"auc", 0.75}},
                                    .examples_per_s = 0,
                                    .peak_rss_bytes = 0});
}

}  // namespace
}  // namespace evoscale
