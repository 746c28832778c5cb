// Plain-text output of the CLI: numbers, tables, parameters and metrics.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"
#include "service/cli/cli.h"

namespace evoscale::cli {

std::string FormatNumber(double value) { return absl::StrFormat("%g", value); }

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  auto cell = [](const std::vector<std::string>& row, size_t column) -> absl::string_view {
    if (column >= row.size() || row[column].empty()) return "-";
    return row[column];
  };
  size_t columns = header.size();
  for (const auto& row : rows) columns = std::max(columns, row.size());
  std::vector<size_t> width(columns, 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], cell(row, c).size());
  };
  measure(header);
  for (const auto& row : rows) measure(row);

  std::string text;
  auto append = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      absl::string_view value = cell(row, c);
      line.append(value.data(), value.size());
      if (c + 1 < columns) line.append(width[c] - value.size() + 2, ' ');
    }
    // The last cells may be shorter than their column; never leave trailing blanks.
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&text, line, "\n");
  };
  append(header);
  for (const auto& row : rows) append(row);
  return text;
}

std::string FormatParameters(const v1::Trial& trial) {
  if (trial.parameters().empty()) return "-";
  std::vector<std::string> parts;
  parts.reserve(trial.parameters_size());
  for (const v1::Parameter& parameter : trial.parameters()) {
    std::string value;
    switch (parameter.value_case()) {
      case v1::Parameter::kDoubleValue:
        value = FormatNumber(parameter.double_value());
        break;
      case v1::Parameter::kIntValue:
        value = absl::StrCat(parameter.int_value());
        break;
      case v1::Parameter::kStringValue:
        value = parameter.string_value();
        break;
      case v1::Parameter::VALUE_NOT_SET:
        value = "?";
        break;
    }
    parts.push_back(absl::StrCat(parameter.name(), "=", value));
  }
  return absl::StrJoin(parts, " ");
}

std::string FormatMetrics(const v1::Measurement& measurement) {
  if (measurement.metrics().empty()) return "-";
  // Protobuf maps have no stable order; sort for readable, reproducible output.
  std::vector<std::pair<std::string, double>> metrics(measurement.metrics().begin(),
                                                      measurement.metrics().end());
  std::sort(metrics.begin(), metrics.end());
  return absl::StrJoin(metrics, " ", [](std::string* out, const auto& metric) {
    absl::StrAppend(out, metric.first, "=", FormatNumber(metric.second));
  });
}

}  // namespace evoscale::cli
