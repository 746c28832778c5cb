// The values of the positional arguments several evoscale commands take: study and trial
// names, and METRIC=VALUE. Pure functions, safe from any thread; cli.h includes this header,
// which is part of its contract. Their errors are InvalidArgument, a usage error (exit 2).

#ifndef EVOSCALE_SERVICE_CLI_ARGUMENTS_H_
#define EVOSCALE_SERVICE_CLI_ARGUMENTS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::cli {

// "7" -> "studies/7"; "studies/7" stays. InvalidArgument for anything else (empty, a trial
// name, extra path segments).
absl::StatusOr<std::string> NormalizeStudyName(absl::string_view name);

// A full trial name "studies/{s}/trials/{t}" (returned unchanged), or "{s}/{t}" (returned as
// the full name). InvalidArgument for anything else.
absl::StatusOr<std::string> ValidateTrialName(absl::string_view name);

// Parses "metric=value" into its name and value. InvalidArgument naming the argument when
// the '=' or the name is missing or the value is not a finite number, e.g.
// `metric "loss=abc": value is not a number`.
absl::StatusOr<std::pair<std::string, double>> ParseMetric(absl::string_view arg);

// ParseMetric() over all of `args`; a metric named twice is an error.
absl::StatusOr<std::map<std::string, double>> ParseMetrics(const std::vector<std::string>& args);

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_ARGUMENTS_H_
