#include "service/study/internal/names.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "service/study/study_limits.h"

namespace evoscale::service::internal {
namespace {

// Canonical decimal: at most 18 digits, so that it fits an int64_t.
absl::StatusOr<int64_t> ParseId(absl::string_view s) {
  int64_t id;
  if (s.empty() || s.size() > 18 || s[0] == '0' ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(s, &id)) {
    return absl::InvalidArgumentError("");
  }
  return id;
}

}  // namespace

absl::StatusOr<int64_t> ParseStudyName(absl::string_view name, absl::string_view field) {
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "studies/")) {
    if (absl::StatusOr<int64_t> id = ParseId(rest); id.ok()) return *id;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: malformed study name \"%s\"; want studies/{id}", field, name));
}

absl::StatusOr<std::pair<int64_t, int64_t>> ParseTrialName(absl::string_view name,
                                                           absl::string_view field) {
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "studies/")) {
    size_t slash = rest.find('/');
    if (slash != absl::string_view::npos) {
      absl::StatusOr<int64_t> study = ParseId(rest.substr(0, slash));
      absl::string_view t = rest.substr(slash);
      if (study.ok() && absl::ConsumePrefix(&t, "/trials/")) {
        if (absl::StatusOr<int64_t> trial = ParseId(t); trial.ok()) {
          return std::make_pair(*study, *trial);
        }
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: malformed trial name \"%s\"; want studies/{id}/trials/{id}", field, name));
}

absl::StatusOr<int> PageSize(int32_t page_size) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrFormat("page_size: %d must be in [0, %d]", page_size, kMaxPageSize));
  }
  return page_size == 0 ? kDefaultPageSize : page_size;
}

absl::StatusOr<int64_t> PageStart(absl::string_view token) {
  if (token.empty()) return 0;
  int64_t last;
  if (!absl::SimpleAtoi(token, &last) || last <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("page_token: malformed token \"%s\"", token));
  }
  return last;
}

absl::Status NotFoundStudy(int64_t id) {
  return absl::NotFoundError(absl::StrFormat("study \"studies/%d\" not found", id));
}

}  // namespace evoscale::service::internal
