// The telemetry files `evoscale telemetry send` reads: JSON lines or CSV.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "google/protobuf/util/json_util.h"
#include "service/cli/cli.h"

namespace evoscale::cli {

absl::StatusOr<std::vector<v1::TelemetrySample>> ParseTelemetryText(
    absl::string_view text, absl::string_view source, const std::string& default_workload) {
  std::vector<v1::TelemetrySample> samples;
  std::vector<std::string> header;  // CSV columns; empty for JSON lines
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view content = absl::StripAsciiWhitespace(line);
    if (content.empty() || absl::StartsWith(content, "#")) continue;
    const std::string where = absl::StrCat(source, ":", line_number);
    v1::TelemetrySample sample;
    if (header.empty() && absl::StartsWith(content, "{")) {
      if (auto st = google::protobuf::util::JsonStringToMessage(std::string(content), &sample);
          !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": not a TelemetrySample: ", st.message().as_string()));
      }
    } else if (header.empty()) {
      for (absl::string_view column : absl::StrSplit(content, ',')) {
        const std::string name(absl::StripAsciiWhitespace(column));
        if (v1::TelemetrySample::descriptor()->FindFieldByName(name) == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": column \"", name,
                           "\" is not a TelemetrySample field (workload, instance, "
                           "timestamp, cpu_cores, memory_bytes, gpu_utilization, "
                           "gpu_memory_bytes, qps, latency_ms, oom)"));
        }
        header.push_back(name);
      }
      continue;
    } else {
      std::vector<absl::string_view> cells = absl::StrSplit(content, ',');
      if (cells.size() != header.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", cells.size(), " values for ", header.size(), " columns"));
      }
      for (size_t i = 0; i < cells.size(); ++i) {
        const absl::string_view cell = absl::StripAsciiWhitespace(cells[i]);
        const std::string& field = header[i];
        double number = 0;
        if (field == "workload") {
          sample.set_workload(std::string(cell));
        } else if (field == "instance") {
          sample.set_instance(std::string(cell));
        } else if (field == "oom") {
          if (cell != "true" && cell != "false" && cell != "1" && cell != "0") {
            return absl::InvalidArgumentError(
                absl::StrCat(where, ": oom: \"", cell, "\" is not true or false"));
          }
          sample.set_oom(cell == "true" || cell == "1");
        } else if (!absl::SimpleAtod(cell, &number)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": ", field, ": \"", cell, "\" is not a number"));
        } else {
          const auto* f = v1::TelemetrySample::descriptor()->FindFieldByName(field);
          sample.GetReflection()->SetDouble(&sample, f, number);
        }
      }
    }
    if (sample.workload().empty()) {
      if (default_workload.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": no workload (give the field, or --workload)"));
      }
      sample.set_workload(default_workload);
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace evoscale::cli
