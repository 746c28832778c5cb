// The checks on flag values that several evoscale commands use; private to service/cli/.
//
// Each CLI::Validator returns "" for a good value and otherwise what is wrong with it; CLI11
// puts the flag's name in front ("--count: ..."). EnumName also rewrites a name into the
// number of the enum value it names, which CLI11 then stores in the enum field. A check that
// only one flag makes (--timeout's, --target-utilization's, a noun's own enum) sits beside
// that flag instead. The checks of positional values (NormalizeStudyName, ValidateTrialName,
// ParseMetric) are in arguments.h.

#ifndef EVOSCALE_SERVICE_CLI_VALIDATORS_H_
#define EVOSCALE_SERVICE_CLI_VALIDATORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/cli/command.h"

namespace evoscale::cli {

// An integer in [min, max]: `"0" is not an integer in [1, 1000]`.
CLI::Validator IntegerIn(int64_t min, int64_t max);

// A number in [lo, hi) (or [lo, hi] with `closed`): `"2" is not in [0, 0.5]`.
CLI::Validator NumberIn(double lo, double hi, bool closed);

// Not "": `what` is the value's name in the message, "the address is empty".
CLI::Validator NotEmpty(absl::string_view what);

// One of `choices`; `expected` words the error: `"xml" is not table, json or yaml`.
CLI::Validator OneOf(std::vector<std::string> choices, absl::string_view expected);

// `parse` turns a name into an enum value or a Status whose message says what is wrong.
template <typename Parse>
CLI::Validator EnumName(Parse parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        auto value = parse(text);
        if (!value.ok()) return std::string(value.status().message());
        text = absl::StrCat(static_cast<int>(*value));
        return "";
      },
      "");
}

// Reads a protobuf enum's value names in any case ("succeeded" for SUCCEEDED), not its
// unspecified value; `kind` and `expected` word the error:
// `unknown trial state "x"; expected requested, active, ...`.
template <typename Enum>
absl::StatusOr<Enum> ParseProtoEnum(bool (*parse)(const std::string&, Enum*), Enum unspecified,
                                    absl::string_view kind, absl::string_view expected,
                                    const std::string& text) {
  Enum value;
  if (!parse(absl::AsciiStrToUpper(text), &value) || value == unspecified) {
    return UsageError(absl::StrCat("unknown ", kind, " \"", text, "\"; expected ", expected));
  }
  return value;
}

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_VALIDATORS_H_
