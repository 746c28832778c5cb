#include "trainer_adapter/internal/slurm_text.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace evoscale::trainer_adapter::internal {

std::map<std::string, std::string> ParseSlurmRecord(absl::string_view line) {
  std::map<std::string, std::string> record;
  std::string key, value;
  auto flush = [&] {
    if (!key.empty()) record.emplace(key, value);  // emplace: the first wins
  };
  for (absl::string_view word :
       absl::StrSplit(line, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    // A key is a word of letters, digits, '/' and ':' before '=' (TRES names hold neither '='
    // nor spaces, so "TRES=cpu=1,mem=100M" is one key "TRES").
    bool is_key = eq != absl::string_view::npos && eq > 0;
    for (size_t i = 0; is_key && i < eq; ++i) {
      const char c = word[i];
      is_key =
          absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '/' || c == ':' || c == '_';
    }
    if (is_key) {
      flush();
      key = std::string(word.substr(0, eq));
      value = std::string(word.substr(eq + 1));
    } else if (!key.empty()) {
      absl::StrAppend(&value, " ", word);
    }
  }
  flush();
  return record;
}

std::vector<std::map<std::string, std::string>> JobCompRecords(absl::string_view file,
                                                               absl::string_view job_id) {
  std::vector<std::map<std::string, std::string>> out;
  const std::string prefix = absl::StrCat("JobId=", job_id, " ");
  for (absl::string_view line : absl::StrSplit(file, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, prefix)) continue;
    out.push_back(ParseSlurmRecord(line));
  }
  return out;
}

absl::StatusOr<int64_t> ParseSlurmMemory(absl::string_view text) {
  absl::string_view digits = text;
  int64_t unit = 1 << 20;  // Slurm's default unit is the megabyte
  if (!digits.empty() && absl::ascii_isalpha(static_cast<unsigned char>(digits.back()))) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K':
        unit = int64_t{1} << 10;
        break;
      case 'M':
        unit = int64_t{1} << 20;
        break;
      case 'G':
        unit = int64_t{1} << 30;
        break;
      case 'T':
        unit = int64_t{1} << 40;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("memory \"", text, "\": unknown unit"));
    }
    digits.remove_suffix(1);
  }
  int64_t amount = 0;
  if (!absl::SimpleAtoi(digits, &amount) || amount < 0) {
    return absl::InvalidArgumentError(absl::StrCat("memory \"", text, "\": not a size"));
  }
  return amount * unit;
}

}  // namespace evoscale::trainer_adapter::internal
