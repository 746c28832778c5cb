// Command-line and JSON-config parsing for evoscale-trainer (flag names: DESIGN.md, "Trainer
// protocol", plus the extras listed in kTrainerUsage).
#ifndef EVOSCALE_TRAINER_FLAGS_H_
#define EVOSCALE_TRAINER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/trainer.h"

namespace evoscale::trainer {

extern const char kTrainerUsage[];

struct ParsedFlags {
  TrainerConfig config;
  bool help = false;
};

// Parses argv[1..]: "--name value", "--name=value", bare "--resume"/"--help". "--config FILE"
// reads a flat JSON object whose keys are flag names (without dashes; '_' or '-') first, so
// flags given on the command line override it. INVALID_ARGUMENT names the flag and the value;
// NOT_FOUND for a missing config file.
absl::StatusOr<ParsedFlags> ParseTrainerFlags(const std::vector<std::string>& args);

// Parses a flat JSON object {"key": number|string|bool|[numbers]} into key/value strings
// (arrays become comma-separated). INVALID_ARGUMENT with the offset on bad syntax.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseFlatJson(
    absl::string_view text);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_FLAGS_H_
