// The study commands: study create, list, get, delete, state and optimal (StudyService).

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/util/time_util.h"
#include "service/cli/arguments.h"
#include "service/cli/cli.h"
#include "service/cli/command.h"
#include "service/cli/format.h"
#include "service/cli/validators.h"

namespace evoscale::cli {
namespace {

using Rows = std::vector<std::vector<std::string>>;

CLI::Validator StudyStateName() {
  return EnumName([](const std::string& text) {
    return ParseProtoEnum<v1::Study::State>(
        [](const std::string& name, v1::Study::State* state) {
          return v1::Study::State_Parse(name, state);
        },
        v1::Study::STATE_UNSPECIFIED, "study state", "active, inactive or completed", text);
  });
}

std::string StudyState(v1::Study::State state) {
  return state == v1::Study::STATE_UNSPECIFIED ? "-" : v1::Study::State_Name(state);
}

std::vector<std::string> StudyRow(const v1::Study& study) {
  return {study.name(), study.display_name(), StudyState(study.state()),
          absl::StrCat(study.trial_count()), absl::StrCat(study.completed_trial_count())};
}

absl::Status PrintStudies(const Invocation& invocation,
                          const google::protobuf::RepeatedPtrField<v1::Study>& studies) {
  Rows rows;
  for (const v1::Study& study : studies) rows.push_back(StudyRow(study));
  invocation.out() << FormatTable({"NAME", "DISPLAY_NAME", "STATE", "TRIALS", "COMPLETED"}, rows);
  return absl::OkStatus();
}

absl::Status PrintStudy(const Invocation& invocation, const v1::Study& study) {
  if (invocation.global().structured()) return invocation.PrintMessage(study);
  google::protobuf::RepeatedPtrField<v1::Study> one;
  *one.Add() = study;
  return PrintStudies(invocation, one);
}

// ---- study get's summary: one "key:" row per line ----

// The study itself and its metrics.
Rows StudyRows(const v1::Study& study) {
  const v1::StudySpec& spec = study.spec();
  Rows rows = {
      {"name:", study.name()},
      {"display_name:", study.display_name()},
      {"state:", StudyState(study.state())},
      {"created:", study.has_create_time()
                       ? google::protobuf::util::TimeUtil::ToString(study.create_time())
                       : ""},
      {"trials:",
       absl::StrCat(study.trial_count(), " (", study.completed_trial_count(), " completed)")},
      {"max_trials:", spec.max_trials() == 0 ? "unlimited" : absl::StrCat(spec.max_trials())},
      {"algorithm:", spec.algorithm().algorithm() == v1::AlgorithmSpec::ALGORITHM_UNSPECIFIED
                         ? "GENETIC (default)"
                         : v1::AlgorithmSpec::Algorithm_Name(spec.algorithm().algorithm())},
  };
  if (spec.budget_core_seconds() > 0) {
    rows.push_back({"budget:", absl::StrCat(FormatNumber(spec.budget_core_seconds()),
                                            " core-seconds: spent ",
                                            FormatNumber(study.spent_core_seconds()), ", left ",
                                            FormatNumber(study.remaining_core_seconds()))});
  } else if (study.spent_core_seconds() > 0) {
    rows.push_back({"spent:", absl::StrCat(FormatNumber(study.spent_core_seconds()),
                                           " core-seconds (no budget)")});
  }
  for (const v1::MetricSpec& metric : spec.metrics()) {
    std::string text = absl::StrCat(metric.name(), " ", v1::MetricSpec::Goal_Name(metric.goal()));
    if (metric.has_safety_threshold()) {
      absl::StrAppend(&text, " (threshold ", FormatNumber(metric.safety_threshold()), ")");
    }
    rows.push_back({"metric:", text});
  }
  return rows;
}

// "lr double [0.0001, 0.1] LOG": the name, the values it takes and its scale.
std::string ParameterText(const v1::ParameterSpec& parameter) {
  std::string text = parameter.name();
  switch (parameter.parameter_value_spec_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      absl::StrAppend(&text, " double [", FormatNumber(parameter.double_spec().min()), ", ",
                      FormatNumber(parameter.double_spec().max()), "]");
      break;
    case v1::ParameterSpec::kIntegerSpec:
      absl::StrAppend(&text, " integer [", parameter.integer_spec().min(), ", ",
                      parameter.integer_spec().max(), "]");
      break;
    case v1::ParameterSpec::kDiscreteSpec:
      absl::StrAppend(&text, " discrete {",
                      absl::StrJoin(parameter.discrete_spec().values(), ", ",
                                    [](std::string* out, double v) {
                                      absl::StrAppend(out, FormatNumber(v));
                                    }),
                      "}");
      break;
    case v1::ParameterSpec::kCategoricalSpec:
      absl::StrAppend(&text, " categorical {",
                      absl::StrJoin(parameter.categorical_spec().values(), ", "), "}");
      break;
    case v1::ParameterSpec::PARAMETER_VALUE_SPEC_NOT_SET:
      break;
  }
  if (parameter.scale() != v1::ParameterSpec::SCALE_TYPE_UNSPECIFIED) {
    absl::StrAppend(&text, " ", v1::ParameterSpec::ScaleType_Name(parameter.scale()));
  }
  return text;
}

// A parameter, and below it, indented, the children it makes active ("when PARENT in {...}").
void AddParameterRows(const v1::ParameterSpec& parameter, const std::string& indent,
                      const std::string& when, Rows& rows) {
  rows.push_back({"parameter:", absl::StrCat(indent, ParameterText(parameter), when)});
  for (const auto& child : parameter.children()) {
    std::vector<std::string> values(child.parent_categorical_values().begin(),
                                    child.parent_categorical_values().end());
    for (double v : child.parent_discrete_values()) values.push_back(FormatNumber(v));
    for (int64_t v : child.parent_int_values()) values.push_back(absl::StrCat(v));
    AddParameterRows(
        child.parameter_spec(), indent + "  ",
        absl::StrCat(" when ", parameter.name(), " in {", absl::StrJoin(values, ", "), "}"), rows);
  }
}

void AddEarlyStoppingRow(const v1::StudySpec& spec, Rows& rows) {
  const v1::EarlyStoppingSpec& es = spec.early_stopping();
  const bool cost_aware_default = es.policy() == v1::EarlyStoppingSpec::POLICY_UNSPECIFIED &&
                                  spec.budget_core_seconds() > 0 && es.max_step() >= 1;
  if (!spec.has_early_stopping() ||
      (es.policy() == v1::EarlyStoppingSpec::POLICY_UNSPECIFIED && !cost_aware_default)) {
    return;
  }
  std::string text = cost_aware_default ? std::string("COST_AWARE (default with a budget)")
                                        : v1::EarlyStoppingSpec::Policy_Name(es.policy());
  if (es.max_step() > 0) absl::StrAppend(&text, ", max_step ", es.max_step());
  if (es.min_steps() > 0) absl::StrAppend(&text, ", min_steps ", es.min_steps());
  if (es.min_trials() > 0) absl::StrAppend(&text, ", min_trials ", es.min_trials());
  if (es.policy() == v1::EarlyStoppingSpec::ASHA) {
    absl::StrAppend(&text, ", min_resource ", es.min_resource(), ", reduction_factor ",
                    FormatNumber(es.reduction_factor()));
  }
  rows.push_back({"early_stopping:", text});
}

// A managed study's command and parallelism, and the resources its trials start with.
void AddTrialTemplateRows(const v1::StudySpec& spec, Rows& rows) {
  if (!spec.has_trial_template()) return;
  const v1::TrialTemplate& tt = spec.trial_template();
  if (!tt.command().empty()) {
    rows.push_back({"command:", absl::StrJoin({tt.command(), absl::StrJoin(tt.args(), " ")}, " ")});
    rows.push_back({"managed:", absl::StrCat(std::max(1, tt.parallel_trials()),
                                             " at once, priority ", tt.priority())});
  }
  const v1::ResourceRequest& r = tt.resources();
  if (r.cpu_cores() > 0 || r.memory_bytes() > 0 || r.gpus() > 0) {
    rows.push_back({"resources:", absl::StrCat("cpu ", FormatNumber(r.cpu_cores()), ", memory ",
                                               Mebibytes(r.memory_bytes()), ", gpus ", r.gpus(),
                                               tt.fixed_resources()   ? " (fixed)"
                                               : tt.command().empty() ? ""
                                                                      : " (until right-sized)")});
  }
}

// ---- The commands ----

void DefineStudyCreate(CLI::App& command, CommandArguments& arguments) {
  command
      .add_option("-f,--file", arguments.file,
                  "a Study or a bare StudySpec, as protobuf JSON or the same in YAML")
      ->type_name("FILE")
      ->required();
  command.add_option("--name", arguments.display_name, "the display name (default: the file's)")
      ->type_name("DISPLAY_NAME");
}

absl::Status RunStudyCreate(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<v1::Study> study = LoadStudyFile(arguments.file);
  if (!study.ok()) return study.status();
  if (arguments.display_name.has_value()) study->set_display_name(*arguments.display_name);

  v1::CreateStudyRequest request;
  *request.mutable_study() = *std::move(study);
  v1::Study created;
  if (absl::Status s = invocation.Unary("CreateStudy", &StudyStub::CreateStudy, request, &created);
      !s.ok()) {
    return s;
  }
  return PrintStudy(invocation, created);
}

absl::Status RunStudyList(const Invocation& invocation) {
  v1::ListStudiesResponse all;
  absl::Status listed = ListAllPages(
      "ListStudies",
      [&](const std::string& token, v1::ListStudiesResponse* page) {
        v1::ListStudiesRequest request;
        request.set_page_size(kMaxPageSize);
        request.set_page_token(token);
        return invocation.Unary("ListStudies", &StudyStub::ListStudies, request, page);
      },
      &all);
  if (!listed.ok()) return listed;
  if (invocation.global().structured()) return invocation.PrintMessage(all);
  return PrintStudies(invocation, all.studies());
}

absl::Status RunStudyGet(const Invocation& invocation) {
  absl::StatusOr<std::string> name = NormalizeStudyName(invocation.arguments().study);
  if (!name.ok()) return name.status();
  v1::GetStudyRequest request;
  request.set_name(*name);
  v1::Study study;
  if (absl::Status s = invocation.Unary("GetStudy", &StudyStub::GetStudy, request, &study);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(study);

  // A readable summary of the study and its search space; --json shows everything.
  Rows rows = StudyRows(study);
  for (const v1::ParameterSpec& parameter : study.spec().parameters()) {
    AddParameterRows(parameter, "", "", rows);
  }
  AddEarlyStoppingRow(study.spec(), rows);
  AddTrialTemplateRows(study.spec(), rows);
  // FormatTable with the first row as its "header": a two-column key/value block.
  std::vector<std::string> first = rows.front();
  rows.erase(rows.begin());
  invocation.out() << FormatTable(first, rows);
  return absl::OkStatus();
}

absl::Status RunStudyDelete(const Invocation& invocation) {
  absl::StatusOr<std::string> name = NormalizeStudyName(invocation.arguments().study);
  if (!name.ok()) return name.status();
  v1::DeleteStudyRequest request;
  request.set_name(*name);
  v1::DeleteStudyResponse response;
  if (absl::Status s = invocation.Unary("DeleteStudy", &StudyStub::DeleteStudy, request, &response);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(response);
  invocation.out() << "deleted " << *name << "\n";
  return absl::OkStatus();
}

void DefineStudyState(CLI::App& command, CommandArguments& arguments) {
  DefineStudy(command, arguments);
  command.add_option("STATE", arguments.study_state, "active, inactive or completed")
      ->type_name("")
      ->required()
      ->transform(StudyStateName());
}

absl::Status RunStudyState(const Invocation& invocation) {
  absl::StatusOr<std::string> name = NormalizeStudyName(invocation.arguments().study);
  if (!name.ok()) return name.status();
  v1::SetStudyStateRequest request;
  request.set_name(*name);
  request.set_state(invocation.arguments().study_state);
  v1::Study study;
  if (absl::Status s =
          invocation.Unary("SetStudyState", &StudyStub::SetStudyState, request, &study);
      !s.ok()) {
    return s;
  }
  return PrintStudy(invocation, study);
}

absl::Status RunStudyOptimal(const Invocation& invocation) {
  absl::StatusOr<std::string> parent = NormalizeStudyName(invocation.arguments().study);
  if (!parent.ok()) return parent.status();
  v1::ListOptimalTrialsRequest request;
  request.set_parent(*parent);
  v1::ListOptimalTrialsResponse response;
  if (absl::Status s =
          invocation.Unary("ListOptimalTrials", &StudyStub::ListOptimalTrials, request, &response);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(response);
  return PrintTrials(invocation, response.optimal_trials());
}

}  // namespace

std::vector<Command> StudyCommands() {
  return {
      {"study create", "-f FILE [--name DISPLAY_NAME]",
       "Create a study from a JSON or YAML file holding a Study or a bare StudySpec.",
       DefineStudyCreate, RunStudyCreate},
      {"study list", "", "List all studies.", DefineNothing, RunStudyList},
      {"study get", "STUDY", "Show a study and its search space.", DefineStudy, RunStudyGet},
      {"study delete", "STUDY", "Delete a study and its trials.", DefineStudy, RunStudyDelete},
      {"study state", "STUDY active|inactive|completed", "Set a study's state.", DefineStudyState,
       RunStudyState},
      {"study optimal", "STUDY", "List the study's optimal (Pareto-front) trials.", DefineStudy,
       RunStudyOptimal},
  };
}

}  // namespace evoscale::cli
