// Plain-text output of the CLI: numbers, tables, parameters and metrics. See format.h.

#include "service/cli/format.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

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

namespace {

// True when YAML would read `text`, written plain, as something other than this string: a
// number, a boolean, null, or nothing.
bool NeedsQuotes(absl::string_view text) {
  if (text.empty()) return true;
  double number;
  if (absl::SimpleAtod(text, &number)) return true;
  const std::string lower = absl::AsciiStrToLower(text);
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}) {
    if (lower == word) return true;
  }
  return false;
}

void EmitYaml(const nlohmann::ordered_json& value, YAML::Emitter& out) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key << key << YAML::Value;
        EmitYaml(item, out);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::ordered_json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& item : value) EmitYaml(item, out);
      out << YAML::EndSeq;
      break;
    case nlohmann::ordered_json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      if (NeedsQuotes(text)) out << YAML::DoubleQuoted;
      out << text;
      break;
    }
    case nlohmann::ordered_json::value_t::null:
      out << YAML::Null;
      break;
    default:  // numbers and booleans: JSON's spelling is YAML's
      out << value.dump();
      break;
  }
}

}  // namespace

absl::StatusOr<std::string> JsonToYaml(absl::string_view json) {
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return absl::InvalidArgumentError("JsonToYaml: not JSON");
  YAML::Emitter out;
  EmitYaml(value, out);
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace evoscale::cli
