// The trainer protocol's lines, good and bad.
#include "trainer_adapter/trial_event.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::trainer_adapter {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;

TEST(TrialEventTest, ProgressLineAsTheTrainerPrintsIt) {
  absl::StatusOr<TrialEvent> e = ParseTrialEvent(
      R"({"event":"progress","step":100,"examples":102400,"elapsed_s":1.25,)"
      R"("metrics":{"logloss":0.4717,"auc":0.7318}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, TrialEvent::Kind::kProgress);
  EXPECT_EQ(e->step, 100);
  EXPECT_EQ(e->examples, 102400);
  EXPECT_DOUBLE_EQ(e->elapsed_s, 1.25);
  EXPECT_THAT(e->metrics, ElementsAre(Pair("auc", 0.7318), Pair("logloss", 0.4717)));
}

TEST(TrialEventTest, FinalLineKeepsItsFiguresAndIgnoresUnknownFields) {
  absl::StatusOr<TrialEvent> e = ParseTrialEvent(
      R"({"event":"final","examples_per_s":52938.5,"peak_rss_bytes":171800000,)"
      R"("metrics":{"auc":0.73,"logloss":null},"table":{"rows":12,"shard_rows":[6,6]},)"
      R"("isa":"avx2"})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, TrialEvent::Kind::kFinal);
  EXPECT_DOUBLE_EQ(e->examples_per_s, 52938.5);
  EXPECT_EQ(e->peak_rss_bytes, 171800000);
  // null (the trainer's NaN) is left out, not read as 0.
  EXPECT_THAT(e->metrics, ElementsAre(Pair("auc", 0.73)));
}

TEST(TrialEventTest, ErrorAndCheckpointLines) {
  absl::StatusOr<TrialEvent> e = ParseTrialEvent(
      R"({"event":"error","step":7,"code":"INTERNAL","message":"non-finite loss \"nan\""})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, TrialEvent::Kind::kError);
  EXPECT_EQ(e->step, 7);
  EXPECT_EQ(e->code, "INTERNAL");
  EXPECT_EQ(e->message, "non-finite loss \"nan\"");
  e = ParseTrialEvent(
      R"({"event":"checkpoint","step":50,"examples":5,"path":"/tmp/c\u00e9/0005"})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, TrialEvent::Kind::kCheckpoint);
  EXPECT_EQ(e->path, "/tmp/c\xc3\xa9/0005");
}

TEST(TrialEventTest, BadLinesNameWhatIsWrong) {
  struct Case {
    const char* line;
    const char* message;
  } const cases[] = {
      {"epoch 1 done", "parse error at line 1, column 1: syntax error"},
      {"[1,2]", "must be a JSON object"},
      {R"({"step":1})", "\"event\": missing"},
      {R"({"event":"done"})", "\"event\": unknown value \"done\""},
      {R"({"event":"progress","step":"ten"})", "\"step\": must be a non-negative integer"},
      {R"({"event":"progress","step":-1})", "\"step\": must be a non-negative integer"},
      {R"({"event":"progress","step":1.5})", "\"step\": must be a non-negative integer"},
      {R"({"event":"progress","metrics":[1]})", "\"metrics\": must be an object"},
      {R"({"event":"progress","metrics":{"auc":"high"}})", "\"metrics.auc\": must be a number"},
      {R"({"event":"final","examples_per_s":-3})", "\"examples_per_s\": must be a non-negative"},
      {R"({"event":"error","message":5})", "\"message\": must be a string"},
      {R"({"event":"progress"} trailing)", "expected end of input"},
      {R"({"event":"progress")", "unexpected end of input; expected '}'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TrialEvent> e = ParseTrialEvent(c.line);
    ASSERT_FALSE(e.ok()) << c.line;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(c.message)) << c.line;
  }
}

TEST(TrialEventTest, LinesAreStrictJson) {
  // Any JSON value may sit in a field the protocol ignores; anything else fails the line.
  auto line = [](const std::string& value) {
    return R"({"event":"progress","extra":)" + value + "}";
  };
  for (const char* good : {"0", "-0.5e+3", "\"a\\tb\"", "[]", "{}", " [true,false,null] ",
                           R"({"a":{"b":[1,{"c":"\ud83d\ude00"}]}})"}) {
    EXPECT_TRUE(ParseTrialEvent(line(good)).ok()) << good;
  }
  for (const char* bad : {"", "01", "1.", ".5", "+1", "1e", "nan", "Infinity", "'a'", "\"a",
                          "[1,]", "{\"a\":1,}", "{a:1}", "\"\\x\"", "\"\\ud800\"", "tru",
                          "1e999", "\"tab\there\""}) {
    absl::StatusOr<TrialEvent> e = ParseTrialEvent(line(bad));
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(e.status().message()), StartsWith("trial event: not JSON: ")) << bad;
  }
}

TEST(TrialEventTest, TheLastOfARepeatedMemberCountsAndEscapesDecode) {
  absl::StatusOr<TrialEvent> e = ParseTrialEvent(
      R"({"event":"error","code":"A","code":"B","message":"\u00e9\ud83d\ude00"})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->code, "B");
  EXPECT_EQ(e->message, "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(TrialEventTest, DeepNestingInAnIgnoredFieldIsHarmless) {
  // The reader does not recurse, so nesting needs no limit.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::StatusOr<TrialEvent> e =
      ParseTrialEvent(R"({"event":"progress","step":3,"extra":)" + deep + "}");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->step, 3);
}

}  // namespace
}  // namespace evoscale::trainer_adapter
