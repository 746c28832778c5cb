// Runs a short command (a Slurm client: sbatch, squeue, scontrol, scancel) to its end and
// captures what it printed. Used by the Slurm runner, and by the tests' Slurm cluster fixture.
#ifndef EVOSCALE_TRAINER_ADAPTER_INTERNAL_COMMAND_H_
#define EVOSCALE_TRAINER_ADAPTER_INTERNAL_COMMAND_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
// ProcessEnvironment and ExecStrings, declared here before there was a spawn.h: its users
// (the tests' Slurm cluster) still find them through this header.
#include "trainer_adapter/internal/spawn.h"

namespace evoscale::trainer_adapter::internal {

struct CommandResult {
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;
  std::string out;  // all of stdout
  std::string err;  // all of stderr
};

// Runs argv with this process's environment plus `env`, stdin from /dev/null, and waits for
// it (through Spawn, spawn.h: argv[0] is searched in the PATH of that environment, which is
// this process's unless `env` sets one). INVALID_ARGUMENT for an empty argv; NOT_FOUND when
// the program cannot be run; DEADLINE_EXCEEDED (after killing it) when it runs longer than
// `timeout`. A non-zero exit is not an error here: the caller reads exit_code. Thread-safe.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env = {},
                                         absl::Duration timeout = absl::Seconds(30));

// "sbatch --parsable ... (exit 1): sbatch: error: ..." for error messages.
std::string DescribeFailure(const std::vector<std::string>& argv, const CommandResult& result);

}  // namespace evoscale::trainer_adapter::internal

#endif  // EVOSCALE_TRAINER_ADAPTER_INTERNAL_COMMAND_H_
