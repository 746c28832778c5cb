// The telemetry files `evoscale telemetry send` reads: JSON lines or CSV.
//
// Besides TelemetrySample's own fields, a file may use the earlier format's, in their units:
// `timestamp` (unix seconds) for `time`, and `latency_ms` (milliseconds) for
// `latency_seconds`. `time` itself may be unix seconds (a number) or RFC 3339 text
// ("2026-12-01T10:00:00Z"), in either format.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"
#include "service/cli/cli.h"

namespace evoscale::cli {
namespace {

using ::google::protobuf::Timestamp;
using ::google::protobuf::util::TimeUtil;

constexpr char kColumns[] =
    "workload, instance, container, time, cpu_cores, memory_bytes, gpu_utilization, "
    "gpu_memory_bytes, qps, latency_seconds, oom, cpu_request_cores; or the earlier timestamp "
    "(unix seconds) and "
    "latency_ms";

absl::StatusOr<Timestamp> TimeFromUnixSeconds(double seconds, absl::string_view field) {
  if (!std::isfinite(seconds) || seconds < TimeUtil::kTimestampMinSeconds ||
      seconds >= TimeUtil::kTimestampMaxSeconds) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %g is not a time in unix seconds", field, seconds));
  }
  const double whole = std::floor(seconds);
  Timestamp t;
  t.set_seconds(static_cast<int64_t>(whole));
  t.set_nanos(std::min(999999999, static_cast<int>(std::lround((seconds - whole) * 1e9))));
  return t;
}

// A CSV cell of `time`: unix seconds, or RFC 3339.
absl::StatusOr<Timestamp> ParseTime(absl::string_view cell) {
  double seconds;
  if (absl::SimpleAtod(cell, &seconds)) return TimeFromUnixSeconds(seconds, "time");
  Timestamp t;
  if (!TimeUtil::FromString(std::string(cell), &t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time: \"", cell,
                     "\" is neither unix seconds nor an RFC 3339 time (2026-12-01T10:00:00Z)"));
  }
  return t;
}

// The quantity a CSV column or JSON key gives: the earlier names stand for today's fields.
std::string FieldOf(const std::string& column) {
  if (column == "timestamp") return "time";
  if (column == "latency_ms" || column == "latencyMs") return "latency_seconds";
  return column;
}

// One JSON line. The earlier fields, and `time` as a number, are taken out of a flat object
// (every value a scalar, as a sample's are) before the rest is read as protobuf JSON; any
// other line goes to the protobuf reader whole, for its error.
absl::Status ParseJsonSample(absl::string_view line, v1::TelemetrySample* sample) {
  nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const bool flat =
      object.is_object() && std::all_of(object.begin(), object.end(),
                                        [](const nlohmann::json& v) { return v.is_primitive(); });
  std::optional<Timestamp> time;
  std::optional<double> latency_ms;
  if (flat) {
    if (object.contains("timestamp") && object.contains("time")) {
      return absl::InvalidArgumentError("time and timestamp: give one of them");
    }
    // `timestamp` is unix seconds; `time` is too when it is a number (else protobuf's).
    for (const std::string key : {"timestamp", "time"}) {
      auto it = object.find(key);
      if (it == object.end() || (key == "time" && !it->is_number())) continue;
      if (!it->is_number()) {
        return absl::InvalidArgumentError("timestamp: must be a number (unix seconds)");
      }
      absl::StatusOr<Timestamp> t = TimeFromUnixSeconds(it->get<double>(), key);
      if (!t.ok()) return t.status();
      time = *t;
      object.erase(it);
    }
    for (const char* key : {"latency_ms", "latencyMs"}) {
      auto it = object.find(key);
      if (it == object.end()) continue;
      if (!it->is_number()) {
        return absl::InvalidArgumentError(absl::StrCat(key, ": must be a number (milliseconds)"));
      }
      if (latency_ms.has_value() || object.contains("latency_seconds") ||
          object.contains("latencySeconds")) {
        return absl::InvalidArgumentError("latency_seconds and latency_ms: give one of them");
      }
      latency_ms = it->get<double>();
      object.erase(it);
    }
  }
  const std::string json = flat ? object.dump() : std::string(line);
  if (auto st = google::protobuf::util::JsonStringToMessage(json, sample); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a TelemetrySample: ", st.message().as_string()));
  }
  if (time.has_value()) *sample->mutable_time() = *time;
  if (latency_ms.has_value()) sample->set_latency_seconds(*latency_ms / 1000);
  return absl::OkStatus();
}

// The columns of a CSV header: TelemetrySample's scalar fields and the earlier names, each
// quantity once.
absl::StatusOr<std::vector<std::string>> ParseHeader(absl::string_view line) {
  std::vector<std::string> header;
  std::vector<std::string> fields;
  for (absl::string_view column : absl::StrSplit(line, ',')) {
    const std::string name(absl::StripAsciiWhitespace(column));
    const std::string field = FieldOf(name);
    const google::protobuf::FieldDescriptor* f =
        v1::TelemetrySample::descriptor()->FindFieldByName(field);
    if (f == nullptr || name == "latencyMs") {
      return absl::InvalidArgumentError(
          absl::StrCat("column \"", name, "\" is not a TelemetrySample field (", kColumns, ")"));
    }
    if (std::find(fields.begin(), fields.end(), field) != fields.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("column \"", name, "\": ", field, " is given twice"));
    }
    fields.push_back(field);
    header.push_back(name);
  }
  return header;
}

// One CSV cell into `sample`.
absl::Status SetCell(const std::string& column, absl::string_view cell,
                     v1::TelemetrySample* sample) {
  if (column == "workload") {
    sample->set_workload(std::string(cell));
  } else if (column == "instance") {
    sample->set_instance(std::string(cell));
  } else if (column == "container") {
    sample->set_container(std::string(cell));
  } else if (column == "oom") {
    if (cell != "true" && cell != "false" && cell != "1" && cell != "0") {
      return absl::InvalidArgumentError(absl::StrCat("oom: \"", cell, "\" is not true or false"));
    }
    sample->set_oom(cell == "true" || cell == "1");
  } else if (column == "time") {
    absl::StatusOr<Timestamp> t = ParseTime(cell);
    if (!t.ok()) return t.status();
    *sample->mutable_time() = *t;
  } else {
    double number = 0;
    if (!absl::SimpleAtod(cell, &number)) {
      return absl::InvalidArgumentError(absl::StrCat(column, ": \"", cell, "\" is not a number"));
    }
    if (column == "timestamp") {
      absl::StatusOr<Timestamp> t = TimeFromUnixSeconds(number, column);
      if (!t.ok()) return t.status();
      *sample->mutable_time() = *t;
    } else if (column == "latency_ms") {
      sample->set_latency_seconds(number / 1000);
    } else {  // a double field: ParseHeader let no other kind through
      const auto* f = v1::TelemetrySample::descriptor()->FindFieldByName(column);
      sample->GetReflection()->SetDouble(sample, f, number);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<v1::TelemetrySample>> ParseTelemetryText(
    absl::string_view text, absl::string_view source, const std::string& default_workload) {
  std::vector<v1::TelemetrySample> samples;
  std::vector<std::string> header;  // CSV columns; empty for JSON lines
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view content = absl::StripAsciiWhitespace(line);
    if (content.empty() || absl::StartsWith(content, "#")) continue;
    auto error = [&](const absl::Status& st) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": ", st.message()));
    };
    v1::TelemetrySample sample;
    if (header.empty() && absl::StartsWith(content, "{")) {
      if (absl::Status st = ParseJsonSample(content, &sample); !st.ok()) return error(st);
    } else if (header.empty()) {
      absl::StatusOr<std::vector<std::string>> columns = ParseHeader(content);
      if (!columns.ok()) return error(columns.status());
      header = *std::move(columns);
      continue;
    } else {
      std::vector<absl::string_view> cells = absl::StrSplit(content, ',');
      if (cells.size() != header.size()) {
        return error(absl::InvalidArgumentError(
            absl::StrCat(cells.size(), " values for ", header.size(), " columns")));
      }
      for (size_t i = 0; i < cells.size(); ++i) {
        const absl::string_view cell = absl::StripAsciiWhitespace(cells[i]);
        if (absl::Status st = SetCell(header[i], cell, &sample); !st.ok()) return error(st);
      }
    }
    if (sample.workload().empty()) {
      if (default_workload.empty()) {
        return error(absl::InvalidArgumentError("no workload (give the field, or --workload)"));
      }
      sample.set_workload(default_workload);
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace evoscale::cli
