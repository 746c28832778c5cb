// The replay command: a trace through an autoscaling policy, offline (load_model/replay.h);
// the one command that calls no server.

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "load_model/replay.h"
#include "service/cli/command.h"
#include "service/cli/format.h"
#include "service/cli/validators.h"

namespace evoscale::cli {
namespace {

void DefineReplay(CLI::App& command, CommandArguments& arguments) {
  load_model::ReplayOptions& replay = arguments.replay;
  command.add_option("--trace", replay.trace, "bitbrains, alibaba-genai or azure-llm")
      ->type_name("TRACE")
      ->required()
      ->transform(
          EnumName([](const std::string& name) { return load_model::ParseTraceKind(name); }));
  command.add_option("--path", replay.path, "the trace's file or folder")
      ->type_name("PATH")
      ->required();
  command.add_option("--policy", replay.policy, "evoscale (default), vpa or hpa")
      ->type_name("POLICY")
      ->transform(EnumName([](const std::string& name) { return load_model::ParsePolicy(name); }));
  command
      .add_option_function<std::string>(
          "--startup-delay",
          [&replay](const std::string& value) {
            absl::Duration delay;
            if (!absl::ParseDuration(value, &delay) || delay < absl::ZeroDuration() ||
                delay == absl::InfiniteDuration()) {
              throw CLI::ValidationError(
                  "--startup-delay",
                  absl::StrCat("\"", value, "\" is not a duration >= 0 such as 3m or 90s"));
            }
            replay.startup_delay = delay;
          },
          "replica traces: new replicas serve this long after a scale-up (e.g. 3m)")
      ->type_name("DURATION");
}

absl::Status RunReplay(const Invocation& invocation) {
  absl::StatusOr<load_model::ReplayReport> report =
      load_model::Replay(invocation.arguments().replay);
  if (!report.ok()) return UsageError(report.status().message());
  if (invocation.global().structured()) return invocation.PrintJsonText(report->ToJson());
  std::vector<std::vector<std::string>> rows;
  if (report->replica_trace) {
    rows = {{"replica_hours", FormatNumber(report->replica_hours)},
            {"minutes_over_target", FormatNumber(report->minutes_over_target)},
            {"scaling_actions", absl::StrCat(report->scaling_actions)},
            {"relative_slack_replicas", FormatNumber(report->relative_slack_replicas)}};
  } else {
    rows = {{"relative_slack_cpu (sum over series)", FormatNumber(report->relative_slack_cpu_sum)},
            {"relative_slack_memory (sum over series)",
             FormatNumber(report->relative_slack_memory_sum)},
            {"oom_events", absl::StrCat(report->oom_events)},
            {"underprovisioned_fraction", FormatNumber(report->underprovisioned_fraction)},
            {"changes", absl::StrCat(report->changes)}};
  }
  rows.push_back({"scored samples", absl::StrCat(report->samples)});
  invocation.out() << "policy " << report->policy << " on " << report->trace << "\n"
                   << FormatTable({"FIGURE", "VALUE"}, rows);
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> ReplayCommands() {
  return {
      {"replay",
       "--trace bitbrains|alibaba-genai|azure-llm --path PATH [--policy evoscale|vpa|hpa] "
       "[--startup-delay DURATION]",
       "Replay a trace through an autoscaling policy, offline, and report slack, OOMs and "
       "replica-hours.",
       DefineReplay, RunReplay},
  };
}

}  // namespace evoscale::cli
