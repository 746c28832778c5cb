// The values of the positional arguments several nouns take. See arguments.h.

#include "service/cli/arguments.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "service/cli/command.h"

namespace evoscale::cli {

absl::StatusOr<std::string> NormalizeStudyName(absl::string_view name) {
  absl::string_view id = name;
  if (absl::StartsWith(id, "studies/")) id.remove_prefix(absl::string_view("studies/").size());
  if (id.empty() || absl::StrContains(id, '/')) {
    return UsageError(absl::StrCat("study \"", name, "\": expected studies/ID or ID"));
  }
  return absl::StrCat("studies/", id);
}

absl::StatusOr<std::string> ValidateTrialName(absl::string_view name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '/');
  // "S/T" is short for studies/S/trials/T (a trial id alone is ambiguous: ids are per study).
  if (parts.size() == 2 && !parts[0].empty() && !parts[1].empty() && parts[0] != "studies") {
    return absl::StrCat("studies/", parts[0], "/trials/", parts[1]);
  }
  if (parts.size() != 4 || parts[0] != "studies" || parts[1].empty() || parts[2] != "trials" ||
      parts[3].empty()) {
    return UsageError(absl::StrCat("trial \"", name,
                                   "\": expected a trial name studies/ID/trials/ID, or STUDY/TRIAL "
                                   "ids (1/3)"));
  }
  return std::string(name);
}

absl::StatusOr<std::pair<std::string, double>> ParseMetric(absl::string_view arg) {
  size_t eq = arg.find('=');
  if (eq == absl::string_view::npos) {
    return UsageError(absl::StrCat("metric \"", arg, "\": expected NAME=VALUE"));
  }
  absl::string_view name = arg.substr(0, eq);
  absl::string_view text = arg.substr(eq + 1);
  if (name.empty()) return UsageError(absl::StrCat("metric \"", arg, "\": the name is empty"));
  double value;
  if (!absl::SimpleAtod(text, &value) || std::isnan(value)) {
    return UsageError(absl::StrCat("metric \"", arg, "\": value is not a number"));
  }
  if (!std::isfinite(value)) {
    return UsageError(absl::StrCat("metric \"", arg, "\": value is not finite"));
  }
  return std::make_pair(std::string(name), value);
}

absl::StatusOr<std::map<std::string, double>> ParseMetrics(const std::vector<std::string>& args) {
  std::map<std::string, double> metrics;
  for (const std::string& arg : args) {
    absl::StatusOr<std::pair<std::string, double>> metric = ParseMetric(arg);
    if (!metric.ok()) return metric.status();
    if (!metrics.insert(*metric).second) {
      return UsageError(absl::StrCat("metric \"", metric->first, "\" given twice"));
    }
  }
  return metrics;
}

}  // namespace evoscale::cli
