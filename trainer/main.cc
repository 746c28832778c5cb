// evoscale-trainer: flags in, JSON lines out (trainer.h; the protocol: trainer/PROTOCOL.md).
#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/flags.h"
#include "trainer/protocol.h"
#include "trainer/stop_request.h"
#include "trainer/trainer.h"

int main(int argc, char** argv) {
  using namespace evoscale::trainer;
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ParsedFlags> parsed = ParseTrainerFlags(args);
  auto sink = [](std::string_view line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  };
  if (!parsed.ok()) {
    std::fprintf(stderr, "evoscale-trainer: %s\n%s", std::string(parsed.status().message()).c_str(),
                 kTrainerUsage);
    sink(ErrorLine(parsed.status()));
    return 2;
  }
  if (parsed->help) {
    std::fputs(kTrainerUsage, stdout);
    return 0;
  }
  // SIGTERM (a stop or a preemption): checkpoint at the end of the step, then exit.
  struct sigaction on_term = {};
  on_term.sa_handler = [](int) { RequestStop(); };
  sigemptyset(&on_term.sa_mask);
  sigaction(SIGTERM, &on_term, nullptr);
  absl::Status status = RunTrainer(parsed->config, sink);
  if (!status.ok()) {
    std::fprintf(stderr, "evoscale-trainer: %s\n", std::string(status.message()).c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}
