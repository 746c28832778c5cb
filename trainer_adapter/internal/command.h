// Runs a short command (a Slurm client: sbatch, squeue, scontrol, scancel) to its end and
// captures what it printed. Used by the Slurm runner, and by the tests' Slurm cluster fixture.
#ifndef EVOSCALE_TRAINER_ADAPTER_INTERNAL_COMMAND_H_
#define EVOSCALE_TRAINER_ADAPTER_INTERNAL_COMMAND_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace evoscale::trainer_adapter::internal {

struct CommandResult {
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;
  std::string out;  // all of stdout
  std::string err;  // all of stderr
};

// Runs argv (argv[0] searched in PATH) with this process's environment plus `env`, stdin from
// /dev/null, and waits for it. INVALID_ARGUMENT for an empty argv; NOT_FOUND when the program
// cannot be run; DEADLINE_EXCEEDED (after killing it) when it runs longer than `timeout`.
// A non-zero exit is not an error here: the caller reads exit_code. Thread-safe.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env = {},
                                         absl::Duration timeout = absl::Seconds(30));

// This process's environment, NAME -> value.
std::map<std::string, std::string> ProcessEnvironment();

// What execve takes for `argv` and `env`, built before fork (after it the child makes only
// async-signal-safe calls). The pointer arrays end with nullptr and point into the strings,
// so the object is neither copied nor moved.
struct ExecStrings {
  ExecStrings(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  ExecStrings(const ExecStrings&) = delete;
  ExecStrings& operator=(const ExecStrings&) = delete;

  std::vector<std::string> arg_strings;  // argv, as given
  std::vector<std::string> env_strings;  // "NAME=value"
  std::vector<char*> argv;
  std::vector<char*> envp;
};

// "sbatch --parsable ... (exit 1): sbatch: error: ..." for error messages.
std::string DescribeFailure(const std::vector<std::string>& argv, const CommandResult& result);

}  // namespace evoscale::trainer_adapter::internal

#endif  // EVOSCALE_TRAINER_ADAPTER_INTERNAL_COMMAND_H_
