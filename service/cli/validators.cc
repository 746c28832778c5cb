// The checks on flag values that several nouns share (CLI11 validators). See validators.h.

#include "service/cli/validators.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace evoscale::cli {

CLI::Validator IntegerIn(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value;
        if (absl::SimpleAtoi(text, &value) && value >= min && value <= max) return "";
        return absl::StrCat("\"", text, "\" is not an integer in [", min, ", ", max, "]");
      },
      "");
}

CLI::Validator NumberIn(double lo, double hi, bool closed) {
  return CLI::Validator(
      [lo, hi, closed](std::string& text) -> std::string {
        double value;
        if (absl::SimpleAtod(text, &value) && value >= lo && (closed ? value <= hi : value < hi)) {
          return "";
        }
        return absl::StrFormat("\"%s\" is not in [%g, %g%s", text, lo, hi, closed ? "]" : ")");
      },
      "");
}

CLI::Validator NotEmpty(absl::string_view what) {
  return CLI::Validator(
      [what = std::string(what)](std::string& text) -> std::string {
        return text.empty() ? absl::StrCat(what, " is empty") : "";
      },
      "");
}

CLI::Validator OneOf(std::vector<std::string> choices, absl::string_view expected) {
  return CLI::Validator(
      [choices = std::move(choices), expected = std::string(expected)](std::string& text) {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return std::string();
        return absl::StrCat("\"", text, "\" is not ", expected);
      },
      "");
}

}  // namespace evoscale::cli
