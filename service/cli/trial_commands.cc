// The trial commands: trial list, get, suggest, measure, complete, stop, should-stop and
// delete (StudyService), and the trials table that study optimal prints too.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "service/cli/arguments.h"
#include "service/cli/cli.h"
#include "service/cli/command.h"
#include "service/cli/format.h"
#include "service/cli/validators.h"

namespace evoscale::cli {
namespace {

CLI::Validator TrialStateName() {
  return EnumName([](const std::string& text) {
    return ParseProtoEnum<v1::Trial::State>(
        [](const std::string& name, v1::Trial::State* state) {
          return v1::Trial::State_Parse(name, state);
        },
        v1::Trial::STATE_UNSPECIFIED, "trial state",
        "requested, active, stopping, succeeded, stopped, infeasible or failed", text);
  });
}

// What a trial's METRICS column shows: the final measurement, else the latest one.
std::string TrialMetrics(const v1::Trial& trial) {
  if (!trial.final_measurement().metrics().empty()) {
    return FormatMetrics(trial.final_measurement());
  }
  if (trial.measurements().empty()) return "-";
  const v1::Measurement& last = *trial.measurements().rbegin();
  return absl::StrCat("step ", last.step(), ": ", FormatMetrics(last));
}

std::string TrialState(const v1::Trial& trial) {
  if (trial.state() == v1::Trial::STATE_UNSPECIFIED) return "-";
  if (trial.state() == v1::Trial::INFEASIBLE && !trial.infeasible_reason().empty()) {
    return absl::StrCat("INFEASIBLE (", trial.infeasible_reason(), ")");
  }
  return v1::Trial::State_Name(trial.state());
}

std::string Cores(double cores) { return cores > 0 ? absl::StrFormat("%.2g", cores) : "-"; }

absl::Status PrintTrial(const Invocation& invocation, const v1::Trial& trial) {
  if (invocation.global().structured()) return invocation.PrintMessage(trial);
  google::protobuf::RepeatedPtrField<v1::Trial> one;
  *one.Add() = trial;
  return PrintTrials(invocation, one);
}

void DefineTrial(CLI::App& command, CommandArguments& arguments) {
  command.add_option("TRIAL", arguments.trial, "a trial name, studies/ID/trials/ID")
      ->type_name("")
      ->required();
}

void DefineTrialList(CLI::App& command, CommandArguments& arguments) {
  DefineStudy(command, arguments);
  command
      .add_option("--state", arguments.trial_state,
                  "only trials in this state: requested, active, stopping, succeeded, "
                  "stopped, infeasible or failed")
      ->type_name("STATE")
      ->transform(TrialStateName());
  command.add_option("--page-size", arguments.page_size, "trials per call (default: the server's)")
      ->type_name("N")
      ->check(IntegerIn(1, kMaxPageSize));
}

absl::Status RunTrialList(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<std::string> parent = NormalizeStudyName(arguments.study);
  if (!parent.ok()) return parent.status();
  v1::ListTrialsResponse all;
  absl::Status listed = ListAllPages(
      "ListTrials",
      [&](const std::string& token, v1::ListTrialsResponse* page) {
        v1::ListTrialsRequest request;
        request.set_parent(*parent);
        request.set_state(arguments.trial_state);
        request.set_page_size(arguments.page_size);
        request.set_page_token(token);
        return invocation.Unary("ListTrials", &StudyStub::ListTrials, request, page);
      },
      &all);
  if (!listed.ok()) return listed;
  if (invocation.global().structured()) return invocation.PrintMessage(all);
  return PrintTrials(invocation, all.trials());
}

void DefineTrialSuggest(CLI::App& command, CommandArguments& arguments) {
  DefineStudy(command, arguments);
  command.add_option("--count", arguments.count, "how many trials to ask for (default 1)")
      ->type_name("N")
      ->check(IntegerIn(1, kMaxPageSize));
  command
      .add_option("--client-id", arguments.client_id,
                  "the worker the trials are for (default: one of this process's own, "
                  "cli-HOSTNAME-PID-NONCE)")
      ->type_name("ID")
      ->check(NotEmpty("the id"));
}

absl::Status RunTrialSuggest(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<std::string> parent = NormalizeStudyName(arguments.study);
  if (!parent.ok()) return parent.status();
  std::string client_id = arguments.client_id;
  if (client_id.empty()) client_id = DefaultClientId(invocation.env());
  v1::SuggestTrialsRequest request;
  request.set_parent(*parent);
  request.set_suggestion_count(arguments.count);
  request.set_client_id(client_id);
  v1::SuggestTrialsResponse response;
  if (absl::Status s =
          invocation.Unary("SuggestTrials", &StudyStub::SuggestTrials, request, &response);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(response);
  if (response.trials().empty()) {
    invocation.out() << "no trials suggested; " << *parent << " is "
                     << v1::Study::State_Name(response.study_state()) << "\n";
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Trial& trial : response.trials()) {
    rows.push_back({trial.name(), FormatParameters(trial)});
  }
  invocation.out() << FormatTable({"NAME", "PARAMETERS"}, rows);
  return absl::OkStatus();
}

void DefineTrialMeasure(CLI::App& command, CommandArguments& arguments) {
  DefineTrial(command, arguments);
  command.add_option("METRIC=VALUE", arguments.metrics, "the measured metrics, e.g. loss=0.25")
      ->type_name("")
      ->required();
  command.add_option("--step", arguments.step, "the training step measured")
      ->type_name("N")
      ->required()
      ->check(IntegerIn(0, std::numeric_limits<int64_t>::max()));
}

absl::Status RunTrialMeasure(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<std::string> name = ValidateTrialName(arguments.trial);
  if (!name.ok()) return name.status();
  absl::StatusOr<std::map<std::string, double>> metrics = ParseMetrics(arguments.metrics);
  if (!metrics.ok()) return metrics.status();

  v1::AddTrialMeasurementRequest request;
  request.set_trial_name(*name);
  request.mutable_measurement()->set_step(arguments.step);
  request.mutable_measurement()->mutable_metrics()->insert(metrics->begin(), metrics->end());
  v1::Trial trial;
  if (absl::Status s =
          invocation.Unary("AddTrialMeasurement", &StudyStub::AddTrialMeasurement, request, &trial);
      !s.ok()) {
    return s;
  }
  return PrintTrial(invocation, trial);
}

void DefineTrialComplete(CLI::App& command, CommandArguments& arguments) {
  DefineTrial(command, arguments);
  command
      .add_option("METRIC=VALUE", arguments.metrics,
                  "the final metrics (default: the trial's latest measurement)")
      ->type_name("");
  command
      .add_option("--infeasible", arguments.infeasible_reason,
                  "complete the trial as infeasible, for this reason")
      ->type_name("REASON")
      ->check(NotEmpty("the reason"));
}

absl::Status RunTrialComplete(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<std::string> name = ValidateTrialName(arguments.trial);
  if (!name.ok()) return name.status();
  v1::CompleteTrialRequest request;
  request.set_name(*name);
  if (arguments.infeasible_reason.has_value()) {
    if (!arguments.metrics.empty()) {
      return UsageError("give either metrics or --infeasible REASON, not both");
    }
    request.set_trial_infeasible(true);
    request.set_infeasible_reason(*arguments.infeasible_reason);
  } else {
    // No metrics: the server takes the latest intermediate measurement as the final one.
    absl::StatusOr<std::map<std::string, double>> metrics = ParseMetrics(arguments.metrics);
    if (!metrics.ok()) return metrics.status();
    if (!metrics->empty()) {
      request.mutable_final_measurement()->mutable_metrics()->insert(metrics->begin(),
                                                                     metrics->end());
    }
  }
  v1::Trial trial;
  if (absl::Status s =
          invocation.Unary("CompleteTrial", &StudyStub::CompleteTrial, request, &trial);
      !s.ok()) {
    return s;
  }
  return PrintTrial(invocation, trial);
}

absl::Status RunTrialStop(const Invocation& invocation) {
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.arguments().trial);
  if (!name.ok()) return name.status();
  v1::StopTrialRequest request;
  request.set_name(*name);
  v1::Trial trial;
  if (absl::Status s = invocation.Unary("StopTrial", &StudyStub::StopTrial, request, &trial);
      !s.ok()) {
    return s;
  }
  return PrintTrial(invocation, trial);
}

absl::Status RunTrialShouldStop(const Invocation& invocation) {
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.arguments().trial);
  if (!name.ok()) return name.status();
  v1::CheckTrialEarlyStoppingStateRequest request;
  request.set_trial_name(*name);
  v1::CheckTrialEarlyStoppingStateResponse response;
  if (absl::Status s =
          invocation.Unary("CheckTrialEarlyStoppingState", &StudyStub::CheckTrialEarlyStoppingState,
                           request, &response);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(response);
  invocation.out() << (response.should_stop() ? "true" : "false") << "\n";
  return absl::OkStatus();
}

absl::Status RunTrialGet(const Invocation& invocation) {
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.arguments().trial);
  if (!name.ok()) return name.status();
  v1::GetTrialRequest request;
  request.set_name(*name);
  v1::Trial trial;
  if (absl::Status s = invocation.Unary("GetTrial", &StudyStub::GetTrial, request, &trial);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(trial);
  google::protobuf::RepeatedPtrField<v1::Trial> one;
  *one.Add() = trial;
  if (absl::Status s = PrintTrials(invocation, one); !s.ok()) return s;
  // Below the row: what the row leaves out.
  if (!trial.infeasible_reason().empty()) {
    invocation.out() << "reason: " << trial.infeasible_reason() << "\n";
  }
  for (const v1::Measurement& m : trial.measurements()) {
    invocation.out() << "step " << m.step() << ": " << FormatMetrics(m) << "\n";
  }
  std::vector<std::pair<std::string, std::string>> metadata(trial.metadata().begin(),
                                                            trial.metadata().end());
  std::sort(metadata.begin(), metadata.end());
  for (const auto& [key, value] : metadata) {
    invocation.out() << "metadata " << key << ": " << value << "\n";
  }
  return absl::OkStatus();
}

absl::Status RunTrialDelete(const Invocation& invocation) {
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.arguments().trial);
  if (!name.ok()) return name.status();
  v1::DeleteTrialRequest request;
  request.set_name(*name);
  v1::DeleteTrialResponse response;
  if (absl::Status s = invocation.Unary("DeleteTrial", &StudyStub::DeleteTrial, request, &response);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(response);
  invocation.out() << "deleted " << *name << "\n";
  return absl::OkStatus();
}

}  // namespace

std::string DefaultClientId(const Environment& env) {
  std::string id = "cli";
  for (const std::string& part : {env.hostname, env.pid > 0 ? absl::StrCat(env.pid) : "",
                                  env.nonce}) {
    if (!part.empty()) absl::StrAppend(&id, "-", part);
  }
  return id;
}

absl::Status PrintTrials(const Invocation& invocation,
                         const google::protobuf::RepeatedPtrField<v1::Trial>& trials) {
  // Requested against used, for trials that carry a request or a usage (managed studies, or
  // a template's resources); ask/tell trials without either keep the short table.
  const bool sized = std::any_of(trials.begin(), trials.end(), [](const v1::Trial& t) {
    return t.resources().memory_bytes() > 0 || t.resources().cpu_cores() > 0 ||
           t.usage().wall_seconds() > 0 || t.usage().peak_memory_bytes() > 0;
  });
  // What each trial cost, for studies whose trials report elapsed time (every managed one).
  const bool costed = std::any_of(trials.begin(), trials.end(),
                                  [](const v1::Trial& t) { return t.core_seconds() > 0; });
  std::vector<std::vector<std::string>> rows;
  for (const v1::Trial& trial : trials) {
    rows.push_back({trial.name(), TrialState(trial), FormatParameters(trial), TrialMetrics(trial)});
    if (costed) rows.back().push_back(absl::StrFormat("%.2f", trial.core_seconds()));
    if (sized) {
      rows.back().push_back(absl::StrCat(Mebibytes(trial.resources().memory_bytes()), " / ",
                                         Mebibytes(trial.usage().peak_memory_bytes())));
      rows.back().push_back(absl::StrCat(Cores(trial.resources().cpu_cores()), " / ",
                                         Cores(trial.usage().mean_cpu_cores())));
    }
  }
  std::vector<std::string> header = {"NAME", "STATE", "PARAMETERS", "METRICS"};
  if (costed) header.push_back("CORE-SECONDS");
  if (sized) {
    header.push_back("MEMORY REQUESTED / PEAK");
    header.push_back("CPU REQUESTED / USED");
  }
  invocation.out() << FormatTable(header, rows);
  return absl::OkStatus();
}

std::vector<Command> TrialCommands() {
  return {
      {"trial list", "STUDY [--state STATE] [--page-size N]",
       "List a study's trials (all pages), optionally only those in STATE.", DefineTrialList,
       RunTrialList},
      {"trial get", "TRIAL", "Show a trial, its measurements and metadata.", DefineTrial,
       RunTrialGet},
      {"trial suggest", "STUDY [--count N] [--client-id ID]",
       "Ask for N trials to run (default 1) as client ID (default: this process's own).",
       DefineTrialSuggest, RunTrialSuggest},
      {"trial measure", "TRIAL --step N METRIC=VALUE...",
       "Report an intermediate measurement of a trial.", DefineTrialMeasure, RunTrialMeasure},
      {"trial complete", "TRIAL [METRIC=VALUE...] | TRIAL --infeasible REASON",
       "Complete a trial with final metrics (default: its latest measurement) or as infeasible; "
       "a trial asked to stop ends STOPPED.",
       DefineTrialComplete, RunTrialComplete},
      {"trial stop", "TRIAL", "Ask for a trial to stop.", DefineTrial, RunTrialStop},
      {"trial should-stop", "TRIAL", "Print whether a trial should stop early: true or false.",
       DefineTrial, RunTrialShouldStop},
      {"trial delete", "TRIAL", "Delete a trial (needs the admin role).", DefineTrial,
       RunTrialDelete},
  };
}

}  // namespace evoscale::cli
