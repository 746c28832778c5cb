// Tests of the telemetry files `evoscale telemetry send` reads (service/cli/telemetry_file.cc):
// today's fields in the API's units, and the earlier format's still read.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "service/cli/cli.h"

namespace evoscale::cli {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::vector<v1::TelemetrySample> MustParse(const std::string& text) {
  absl::StatusOr<std::vector<v1::TelemetrySample>> samples =
      ParseTelemetryText(text, "t", "default/ranker");
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<v1::TelemetrySample>{};
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<std::vector<v1::TelemetrySample>> samples =
      ParseTelemetryText(text, "t", "default/ranker");
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(samples.status().message());
}

TEST(TelemetryFileTest, CsvTakesContainersTimesInEitherFormAndSeconds) {
  const std::vector<v1::TelemetrySample> samples = MustParse(
      "instance,container,time,cpu_cores,latency_seconds\n"
      "pod-1,server,1700000000.25,1.5,0.02\n"
      "pod-1,envoy,2023-11-14T22:13:20.25Z,0.1,0\n");
  ASSERT_THAT(samples, SizeIs(2));
  EXPECT_EQ(samples[0].container(), "server");
  EXPECT_EQ(samples[1].container(), "envoy");
  for (const v1::TelemetrySample& s : samples) {
    EXPECT_EQ(s.workload(), "default/ranker");
    EXPECT_EQ(s.time().seconds(), 1700000000);
    EXPECT_EQ(s.time().nanos(), 250000000);
  }
  EXPECT_DOUBLE_EQ(samples[0].latency_seconds(), 0.02);
}

TEST(TelemetryFileTest, EarlierCsvColumnsAreReadInTodaysUnits) {
  const std::vector<v1::TelemetrySample> samples =
      MustParse("instance,timestamp,cpu_cores,latency_ms\npod-1,1700000000,1.5,25\n");
  ASSERT_THAT(samples, SizeIs(1));
  EXPECT_EQ(samples[0].time().seconds(), 1700000000);
  EXPECT_EQ(samples[0].time().nanos(), 0);
  EXPECT_DOUBLE_EQ(samples[0].latency_seconds(), 0.025);
  EXPECT_EQ(samples[0].container(), "");
}

TEST(TelemetryFileTest, JsonLinesTakeProtobufJsonAndTheEarlierFields) {
  const std::vector<v1::TelemetrySample> samples = MustParse(
      R"({"instance":"a","container":"server","time":"2023-11-14T22:13:20Z","latencySeconds":0.5})"
      "\n"
      R"({"instance":"a","time":1700000060.5,"cpu_cores":1})"
      "\n"
      R"({"instance":"a","timestamp":1700000120,"latency_ms":40,"memoryBytes":5e8})"
      "\n"
      R"({"instance":"a","timestamp":1700000180,"latencyMs":4})");
  ASSERT_THAT(samples, SizeIs(4));
  EXPECT_EQ(samples[0].container(), "server");
  EXPECT_EQ(TimeUtil::ToString(samples[0].time()), "2023-11-14T22:13:20Z");
  EXPECT_DOUBLE_EQ(samples[0].latency_seconds(), 0.5);
  EXPECT_EQ(samples[1].time().seconds(), 1700000060);
  EXPECT_EQ(samples[1].time().nanos(), 500000000);
  EXPECT_EQ(samples[2].time().seconds(), 1700000120);
  EXPECT_DOUBLE_EQ(samples[2].latency_seconds(), 0.04);
  EXPECT_DOUBLE_EQ(samples[2].memory_bytes(), 5e8);
  EXPECT_DOUBLE_EQ(samples[3].latency_seconds(), 0.004);
}

TEST(TelemetryFileTest, ConflictsAndBadValuesNameTheLineAndField) {
  EXPECT_THAT(ParseError("instance,time,timestamp\n"), HasSubstr("t:1: column \"timestamp\""));
  EXPECT_THAT(ParseError("instance,latency_ms,latency_seconds\n"),
              HasSubstr("latency_seconds is given twice"));
  EXPECT_THAT(ParseError("instance,time\npod,yesterday\n"),
              HasSubstr("t:2: time: \"yesterday\" is neither unix seconds nor an RFC 3339"));
  EXPECT_THAT(ParseError("instance,timestamp\npod,1e300\n"),
              HasSubstr("timestamp: 1e+300 is not a time in unix seconds"));
  EXPECT_THAT(ParseError("instance,cpu\n"), HasSubstr("column \"cpu\" is not a TelemetrySample"));
  EXPECT_THAT(ParseError(R"({"instance":"a","time":1,"timestamp":2})"),
              HasSubstr("t:1: time and timestamp: give one of them"));
  EXPECT_THAT(ParseError(R"({"instance":"a","latency_ms":1,"latency_seconds":2})"),
              HasSubstr("give one of them"));
  EXPECT_THAT(ParseError(R"({"instance":"a","timestamp":"noon"})"),
              HasSubstr("timestamp: must be a number (unix seconds)"));
  EXPECT_THAT(ParseError(R"({"instance":"a","cpu":1})"), HasSubstr("t:1: not a TelemetrySample"));
  EXPECT_THAT(ParseError(R"({"instance":["a"]})"), HasSubstr("t:1: not a TelemetrySample"));
}

}  // namespace
}  // namespace evoscale::cli
