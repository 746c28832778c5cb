// Command-line and JSON-config parsing for evoscale-trainer (flag names: DESIGN.md, "Trainer
// protocol", plus the extras listed in kTrainerUsage).
#ifndef EVOSCALE_TRAINER_FLAGS_H_
#define EVOSCALE_TRAINER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer {

extern const char kTrainerUsage[];

struct ParsedFlags {
  TrainerConfig config;
  bool help = false;
};

// Parses argv[1..] with CLI11: "--name value", "--name=value", bare "--resume"/"--help" (or
// "--resume=true|false|1|0"); '-' in a name may be spelled '_'; a repeated flag keeps its last
// value. "--config FILE" reads a JSON object whose keys are flag names (without dashes) and whose
// values are strings, integers, numbers or booleans as the flag takes, or for --hidden and
// --min-count-slots an array (or the command line's string); flags given on the command line
// override it. INVALID_ARGUMENT names the flag (or config key) and the value; NOT_FOUND for a
// missing config file.
absl::StatusOr<ParsedFlags> ParseTrainerFlags(const std::vector<std::string>& args);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_FLAGS_H_
