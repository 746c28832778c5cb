// The evoscale command line: parsing (CLI11), the commands, and their output.

#include "service/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "evoscale/v1/admin.grpc.pb.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "load_model/replay.h"
#include "service/cli/kubernetes.h"
#include "service/common/paths.h"
#include "service/common/pem.h"

namespace evoscale::cli {
namespace {

using v1::StudyService;
using StudyStub = v1::StudyService::StubInterface;
using AutoscalerStub = v1::AutoscalerService::StubInterface;
using AdminStub = v1::AdminService::StubInterface;

// Marks a Status that carries a failed RPC (exit code 1) rather than a usage error (2).
constexpr absl::string_view kRpcErrorPayload = "type.evoscale.dev/evoscale.cli.RpcError";

// The most a deadline may be; keeps the chrono arithmetic far from overflow.
constexpr double kMaxTimeoutSeconds = 24 * 3600;

// The most results one page may hold (the API's limit for page_size and suggestion_count).
constexpr int64_t kMaxPageSize = 1000;

// The most replicas `workload put` accepts for --min-replicas and --max-replicas.
constexpr int64_t kMaxReplicas = 100000;

absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::Status RpcError(absl::string_view rpc, const grpc::Status& status) {
  // gRPC and Abseil status codes are the same numbers.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  absl::Status error(
      code, absl::StrCat(rpc, ": ", absl::StatusCodeToString(code), ": ", status.error_message()));
  error.SetPayload(kRpcErrorPayload, absl::Cord(rpc));
  return error;
}

bool IsRpcError(const absl::Status& status) {
  return status.GetPayload(kRpcErrorPayload).has_value();
}

// ---- Flag values ---------------------------------------------------------------------------
//
// CLI11 validators. Each returns "" for a good value and otherwise what is wrong with it;
// CLI11 puts the flag's name in front ("--count: ..."). The transforms also rewrite a name
// into the number of the enum value it names, which CLI11 then stores in the enum field.

CLI::Validator IntegerIn(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value;
        if (absl::SimpleAtoi(text, &value) && value >= min && value <= max) return "";
        return absl::StrCat("\"", text, "\" is not an integer in [", min, ", ", max, "]");
      },
      "");
}

CLI::Validator TimeoutSeconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double seconds;
        if (absl::SimpleAtod(text, &seconds) && seconds > 0 && seconds <= kMaxTimeoutSeconds) {
          return "";
        }
        return absl::StrCat("\"", text, "\" is not a number of seconds in (0, ", kMaxTimeoutSeconds,
                            "]");
      },
      "");
}

CLI::Validator Utilization() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value;
        if (absl::SimpleAtod(text, &value) && value > 0 && value <= 1) return "";
        return absl::StrCat("\"", text, "\" is not in (0, 1]");
      },
      "");
}

// A number in [lo, hi) (or [lo, hi] with `closed`).
CLI::Validator NumberIn(double lo, double hi, bool closed) {
  return CLI::Validator(
      [lo, hi, closed](std::string& text) -> std::string {
        double value;
        if (absl::SimpleAtod(text, &value) && value >= lo && (closed ? value <= hi : value < hi)) {
          return "";
        }
        return absl::StrFormat("\"%s\" is not in [%g, %g%s", text, lo, hi, closed ? "]" : ")");
      },
      "");
}

// `what` is the value's name in the message: "the address is empty".
CLI::Validator NotEmpty(absl::string_view what) {
  return CLI::Validator(
      [what = std::string(what)](std::string& text) -> std::string {
        return text.empty() ? absl::StrCat(what, " is empty") : "";
      },
      "");
}

// `expected` words the error: "table, json or yaml".
CLI::Validator OneOf(std::vector<std::string> choices, absl::string_view expected) {
  return CLI::Validator(
      [choices = std::move(choices), expected = std::string(expected)](std::string& text) {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return std::string();
        return absl::StrCat("\"", text, "\" is not ", expected);
      },
      "");
}

// `parse` turns a name into an enum value or a Status whose message says what is wrong.
template <typename Parse>
CLI::Validator EnumName(Parse parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        auto value = parse(text);
        if (!value.ok()) return std::string(value.status().message());
        text = absl::StrCat(static_cast<int>(*value));
        return "";
      },
      "");
}

// Reads a protobuf enum's value names in any case ("succeeded" for SUCCEEDED), not its
// unspecified value; `kind` and `expected` word the error.
template <typename Enum>
absl::StatusOr<Enum> ParseProtoEnum(bool (*parse)(const std::string&, Enum*), Enum unspecified,
                                    absl::string_view kind, absl::string_view expected,
                                    const std::string& text) {
  Enum value;
  if (!parse(absl::AsciiStrToUpper(text), &value) || value == unspecified) {
    return UsageError(absl::StrCat("unknown ", kind, " \"", text, "\"; expected ", expected));
  }
  return value;
}

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

CLI::Validator StudyStateName() {
  return EnumName([](const std::string& text) {
    return ParseProtoEnum<v1::Study::State>(
        [](const std::string& name, v1::Study::State* state) {
          return v1::Study::State_Parse(name, state);
        },
        v1::Study::STATE_UNSPECIFIED, "study state", "active, inactive or completed", text);
  });
}

CLI::Validator WorkloadPolicyName() {
  return EnumName([](const std::string& text) {
    return ParseProtoEnum<v1::Workload::Policy>(
        [](const std::string& name, v1::Workload::Policy* policy) {
          return v1::Workload::Policy_Parse(name, policy);
        },
        v1::Workload::POLICY_UNSPECIFIED, "policy", "evoscale, vpa or hpa", text);
  });
}

CLI::Validator WorkloadKindName() {
  return EnumName([](const std::string& text) {
    return ParseProtoEnum<v1::Workload::Kind>(
        [](const std::string& name, v1::Workload::Kind* kind) {
          return v1::Workload::Kind_Parse(name, kind);
        },
        v1::Workload::KIND_UNSPECIFIED, "kind", "serving or training", text);
  });
}

// ---- Commands ------------------------------------------------------------------------------

// One run of one command: its arguments and where it sends RPCs and output.
class Invocation {
 public:
  Invocation(const CommandLine& line, const Environment& env, StudyService::StubInterface& stub,
             v1::AutoscalerService::StubInterface& autoscaler,
             v1::AdminService::StubInterface& admin, std::ostream& out)
      : line_(line), env_(env), stub_(stub), autoscaler_(autoscaler), admin_(admin), out_(out) {}

  const GlobalOptions& global() const { return line_.global; }
  const CommandArguments& arguments() const { return line_.arguments; }
  const Environment& env() const { return env_; }
  StudyService::StubInterface& stub() const { return stub_; }
  v1::AutoscalerService::StubInterface& autoscaler() const { return autoscaler_; }
  v1::AdminService::StubInterface& admin() const { return admin_; }
  std::ostream& out() const { return out_; }

  // Calls `rpc` (a lambda taking the ClientContext) with the deadline and the token set.
  template <typename Rpc>
  absl::Status Call(absl::string_view rpc_name, Rpc rpc) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(global().timeout_seconds)));
    if (!global().token.empty()) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", global().token));
    }
    grpc::Status status = rpc(&context);
    return status.ok() ? absl::OkStatus() : RpcError(rpc_name, status);
  }

  // Calls the unary RPC `rpc` of the stub its type names (Call's deadline and token).
  template <typename Stub, typename Request, typename Response>
  absl::Status Unary(absl::string_view rpc_name,
                     grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
                     const Request& request, Response* response) const {
    Stub* stub;
    if constexpr (std::is_same_v<Stub, StudyStub>) {
      stub = &stub_;
    } else if constexpr (std::is_same_v<Stub, AutoscalerStub>) {
      stub = &autoscaler_;
    } else {
      static_assert(std::is_same_v<Stub, AdminStub>);
      stub = &admin_;
    }
    return Call(rpc_name, [&](grpc::ClientContext* context) {
      return (stub->*rpc)(context, request, response);
    });
  }

  // Prints `message` as -o asks: one line of protobuf JSON, or a YAML document.
  absl::Status PrintMessage(const google::protobuf::Message& message) const {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;  // scripts see every field, even false/0
    std::string json;
    google::protobuf::util::Status status =
        google::protobuf::util::MessageToJsonString(message, &json, options);
    if (!status.ok()) return absl::InternalError(status.message().ToString());
    return PrintJsonText(json);
  }

  // Prints JSON text as -o asks (yaml: converted, as a YAML document).
  absl::Status PrintJsonText(const std::string& json) const {
    if (global().output != "yaml") {
      out_ << json << "\n";
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> yaml = JsonToYaml(json);
    if (!yaml.ok()) return absl::InternalError(yaml.status().message());
    out_ << "---\n" << *yaml;
    return absl::OkStatus();
  }

 private:
  const CommandLine& line_;
  const Environment& env_;
  StudyService::StubInterface& stub_;
  v1::AutoscalerService::StubInterface& autoscaler_;
  v1::AdminService::StubInterface& admin_;
  std::ostream& out_;
};

struct Command {
  absl::string_view name;      // the command words, "study create"
  absl::string_view synopsis;  // arguments and flags after the name
  absl::string_view summary;
  // Declares the command's positional arguments and flags on its CLI11 subcommand, bound to
  // the fields of `arguments` they fill.
  void (*define)(CLI::App& command, CommandArguments& arguments);
  absl::Status (*run)(const Invocation&);
  bool short_form = false;  // an older spelling of another command: listed apart in the usage
};

std::string StudyState(v1::Study::State state) {
  return state == v1::Study::STATE_UNSPECIFIED ? "-" : v1::Study::State_Name(state);
}

std::vector<std::string> StudyRow(const v1::Study& study) {
  return {study.name(), study.display_name(), StudyState(study.state()),
          absl::StrCat(study.trial_count()), absl::StrCat(study.completed_trial_count())};
}

absl::Status PrintStudies(const Invocation& invocation,
                          const google::protobuf::RepeatedPtrField<v1::Study>& studies) {
  std::vector<std::vector<std::string>> rows;
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

// "512 MiB"; "-" for 0 (none requested, or nothing measured).
std::string Mebibytes(int64_t bytes) {
  return bytes > 0 ? absl::StrFormat("%.0f MiB", static_cast<double>(bytes) / (1 << 20)) : "-";
}

std::string Cores(double cores) { return cores > 0 ? absl::StrFormat("%.2g", cores) : "-"; }

absl::Status PrintTrials(const Invocation& invocation,
                         const google::protobuf::RepeatedPtrField<v1::Trial>& trials) {
  // Requested against used, for trials that carry a request or a usage (managed studies, or
  // a template's resources); ask/tell trials without either keep the short table.
  const bool sized = std::any_of(trials.begin(), trials.end(), [](const v1::Trial& t) {
    return t.resources().memory_bytes() > 0 || t.resources().cpu_cores() > 0 ||
           t.usage().wall_seconds() > 0 || t.usage().peak_memory_bytes() > 0;
  });
  std::vector<std::vector<std::string>> rows;
  for (const v1::Trial& trial : trials) {
    rows.push_back({trial.name(), TrialState(trial), FormatParameters(trial), TrialMetrics(trial)});
    if (sized) {
      rows.back().push_back(absl::StrCat(Mebibytes(trial.resources().memory_bytes()), " / ",
                                         Mebibytes(trial.usage().peak_memory_bytes())));
      rows.back().push_back(absl::StrCat(Cores(trial.resources().cpu_cores()), " / ",
                                         Cores(trial.usage().mean_cpu_cores())));
    }
  }
  std::vector<std::string> header = {"NAME", "STATE", "PARAMETERS", "METRICS"};
  if (sized) {
    header.push_back("MEMORY REQUESTED / PEAK");
    header.push_back("CPU REQUESTED / USED");
  }
  invocation.out() << FormatTable(header, rows);
  return absl::OkStatus();
}

absl::Status PrintTrial(const Invocation& invocation, const v1::Trial& trial) {
  if (invocation.global().structured()) return invocation.PrintMessage(trial);
  google::protobuf::RepeatedPtrField<v1::Trial> one;
  *one.Add() = trial;
  return PrintTrials(invocation, one);
}

// Follows next_page_token until the last page; `list` fetches one page into its response.
template <typename Response, typename ListPage>
absl::Status ListAllPages(absl::string_view rpc_name, ListPage list, Response* all) {
  std::string token;
  while (true) {
    Response page;
    if (absl::Status s = list(token, &page); !s.ok()) return s;
    all->MergeFrom(page);
    if (page.next_page_token().empty()) break;
    if (page.next_page_token() == token) {
      return RpcError(
          rpc_name, grpc::Status(grpc::StatusCode::INTERNAL, "the server repeated its page token"));
    }
    token = page.next_page_token();
  }
  all->clear_next_page_token();
  return absl::OkStatus();
}

// ---- Positional arguments shared by several commands ----

void DefineNothing(CLI::App&, CommandArguments&) {}

void DefineStudy(CLI::App& command, CommandArguments& arguments) {
  command.add_option("STUDY", arguments.study, "a study name, studies/ID, or just its ID")
      ->type_name("")
      ->required();
}

void DefineTrial(CLI::App& command, CommandArguments& arguments) {
  command.add_option("TRIAL", arguments.trial, "a trial name, studies/ID/trials/ID")
      ->type_name("")
      ->required();
}

void DefineWorkload(CLI::App& command, CommandArguments& arguments) {
  command.add_option("NAME", arguments.workload, "the workload's name, e.g. default/ranker")
      ->type_name("")
      ->required();
}

// ---- Study commands ----

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
  const v1::StudySpec& spec = study.spec();
  std::vector<std::vector<std::string>> rows = {
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
  for (const v1::MetricSpec& metric : spec.metrics()) {
    std::string text = absl::StrCat(metric.name(), " ", v1::MetricSpec::Goal_Name(metric.goal()));
    if (metric.has_safety_threshold()) {
      absl::StrAppend(&text, " (threshold ", FormatNumber(metric.safety_threshold()), ")");
    }
    rows.push_back({"metric:", text});
  }
  // Each parameter, and below it the children it makes active ("when PARENT in {...}").
  std::function<void(const v1::ParameterSpec&, const std::string&, const std::string&)>
      add_parameter = [&](const v1::ParameterSpec& parameter, const std::string& indent,
                          const std::string& when) {
        std::string text = indent + parameter.name();
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
        absl::StrAppend(&text, when);
        rows.push_back({"parameter:", text});
        for (const auto& child : parameter.children()) {
          std::vector<std::string> values(child.parent_categorical_values().begin(),
                                          child.parent_categorical_values().end());
          for (double v : child.parent_discrete_values()) values.push_back(FormatNumber(v));
          for (int64_t v : child.parent_int_values()) values.push_back(absl::StrCat(v));
          add_parameter(
              child.parameter_spec(), indent + "  ",
              absl::StrCat(" when ", parameter.name(), " in {", absl::StrJoin(values, ", "), "}"));
        }
      };
  for (const v1::ParameterSpec& parameter : spec.parameters()) add_parameter(parameter, "", "");
  if (spec.has_early_stopping() &&
      spec.early_stopping().policy() != v1::EarlyStoppingSpec::POLICY_UNSPECIFIED) {
    const v1::EarlyStoppingSpec& es = spec.early_stopping();
    std::string text = v1::EarlyStoppingSpec::Policy_Name(es.policy());
    if (es.min_steps() > 0) absl::StrAppend(&text, ", min_steps ", es.min_steps());
    if (es.min_trials() > 0) absl::StrAppend(&text, ", min_trials ", es.min_trials());
    if (es.policy() == v1::EarlyStoppingSpec::ASHA) {
      absl::StrAppend(&text, ", min_resource ", es.min_resource(), ", reduction_factor ",
                      FormatNumber(es.reduction_factor()));
    }
    rows.push_back({"early_stopping:", text});
  }
  if (spec.has_trial_template()) {
    const v1::TrialTemplate& tt = spec.trial_template();
    if (!tt.command().empty()) {
      rows.push_back(
          {"command:", absl::StrJoin({tt.command(), absl::StrJoin(tt.args(), " ")}, " ")});
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

// ---- Trial commands ----

void DefineTrialsList(CLI::App& command, CommandArguments& arguments) {
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

absl::Status RunTrialsList(const Invocation& invocation) {
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

void DefineSuggest(CLI::App& command, CommandArguments& arguments) {
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

absl::Status RunSuggest(const Invocation& invocation) {
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

void DefineMeasure(CLI::App& command, CommandArguments& arguments) {
  DefineTrial(command, arguments);
  command.add_option("METRIC=VALUE", arguments.metrics, "the measured metrics, e.g. loss=0.25")
      ->type_name("")
      ->required();
  command.add_option("--step", arguments.step, "the training step measured")
      ->type_name("N")
      ->required()
      ->check(IntegerIn(0, std::numeric_limits<int64_t>::max()));
}

absl::Status RunMeasure(const Invocation& invocation) {
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

void DefineComplete(CLI::App& command, CommandArguments& arguments) {
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

absl::Status RunComplete(const Invocation& invocation) {
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

absl::Status RunStop(const Invocation& invocation) {
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

absl::Status RunShouldStop(const Invocation& invocation) {
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

absl::Status RunOptimal(const Invocation& invocation) {
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

// ---- Autoscaler commands -------------------------------------------------------------------

absl::StatusOr<v1::Workload> GetWorkloadRpc(const Invocation& invocation, const std::string& name) {
  v1::GetWorkloadRequest request;
  request.set_name(name);
  v1::Workload workload;
  absl::Status s =
      invocation.Unary("GetWorkload", &AutoscalerStub::GetWorkload, request, &workload);
  if (!s.ok()) return s;
  return workload;
}

std::vector<std::string> WorkloadRow(const v1::Workload& w) {
  return {w.name(), v1::Workload::Policy_Name(w.policy()), v1::Workload::Kind_Name(w.kind()),
          absl::StrCat(w.sample_count())};
}

void DefineWorkloadPut(CLI::App& command, CommandArguments& arguments) {
  DefineWorkload(command, arguments);
  v1::Workload* workload = &arguments.workload_settings;
  std::set<std::string>* given = &arguments.workload_flags;
  command
      .add_option_function<v1::Workload::Policy>(
          "--policy",
          [workload, given](v1::Workload::Policy policy) {
            workload->set_policy(policy);
            given->insert("policy");
          },
          "evoscale (default), vpa or hpa")
      ->type_name("POLICY")
      ->transform(WorkloadPolicyName());
  command
      .add_option_function<v1::Workload::Kind>(
          "--kind",
          [workload, given](v1::Workload::Kind kind) {
            workload->set_kind(kind);
            given->insert("kind");
          },
          "serving (default) or training")
      ->type_name("KIND")
      ->transform(WorkloadKindName());
  command
      .add_option_function<double>(
          "--target-utilization",
          [workload, given](double utilization) {
            workload->set_target_utilization(utilization);
            given->insert("target_utilization");
          },
          "the utilization replicas are sized for, in (0, 1]")
      ->type_name("X")
      ->check(Utilization());
  command
      .add_option_function<int32_t>(
          "--min-replicas",
          [workload, given](int32_t replicas) {
            workload->set_min_replicas(replicas);
            given->insert("min_replicas");
          },
          "the fewest replicas to recommend")
      ->type_name("N")
      ->check(IntegerIn(0, kMaxReplicas));
  command
      .add_option_function<int32_t>(
          "--max-replicas",
          [workload, given](int32_t replicas) {
            workload->set_max_replicas(replicas);
            given->insert("max_replicas");
          },
          "the most replicas to recommend")
      ->type_name("N")
      ->check(IntegerIn(0, kMaxReplicas));
  const struct {
    const char* flag;
    const char* field;
    void (v1::Workload::*set)(double);
    double lo, hi;
    bool closed;
    const char* help;
  } numbers[] = {
      {"--oom-rate", "oom_rate", &v1::Workload::set_oom_rate, 0, 0.5, true,
       "target OOM kills per sample (evoscale; 0: the default 0.0004)"},
      {"--throttle-rate", "throttle_rate", &v1::Workload::set_throttle_rate, 0, 0.5, true,
       "target throttled samples per sample (evoscale; 0: not calibrated)"},
      {"--request-percentile", "request_percentile", &v1::Workload::set_request_percentile, 0, 1,
       false, "requests at this usage percentile under the limits (evoscale; 0: request = limit)"},
      {"--startup-delay-seconds", "startup_delay_seconds",
       &v1::Workload::set_startup_delay_seconds, 0, 86400, true,
       "how long a new replica takes to serve (evoscale forecasts that far ahead)"},
  };
  for (const auto& n : numbers) {
    command
        .add_option_function<double>(
            n.flag,
            [workload, given, set = n.set, field = n.field](double value) {
              (workload->*set)(value);
              given->insert(field);
            },
            n.help)
        ->type_name("X")
        ->check(NumberIn(n.lo, n.hi, n.closed));
  }
}

absl::Status RunWorkloadPut(const Invocation& invocation) {
  // An update, not a replacement: an existing workload keeps every setting not given here.
  v1::PutWorkloadRequest request;
  const CommandArguments& args = invocation.arguments();
  absl::StatusOr<v1::Workload> existing = GetWorkloadRpc(invocation, args.workload);
  if (!existing.ok() && !absl::IsNotFound(existing.status())) return existing.status();
  v1::Workload* w = request.mutable_workload();
  if (existing.ok()) {
    *w = *existing;
    w->clear_sample_count();  // read-only
  }
  const v1::Workload& given = args.workload_settings;
  auto has = [&](const char* field) { return args.workload_flags.contains(field); };
  if (has("policy")) w->set_policy(given.policy());
  if (has("kind")) w->set_kind(given.kind());
  if (has("target_utilization")) w->set_target_utilization(given.target_utilization());
  if (has("min_replicas")) w->set_min_replicas(given.min_replicas());
  if (has("max_replicas")) w->set_max_replicas(given.max_replicas());
  if (has("oom_rate")) w->set_oom_rate(given.oom_rate());
  if (has("throttle_rate")) w->set_throttle_rate(given.throttle_rate());
  if (has("request_percentile")) w->set_request_percentile(given.request_percentile());
  if (has("startup_delay_seconds")) w->set_startup_delay_seconds(given.startup_delay_seconds());
  w->set_name(args.workload);
  v1::Workload out;
  if (absl::Status s = invocation.Unary("PutWorkload", &AutoscalerStub::PutWorkload, request, &out);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(out);
  invocation.out() << FormatTable({"NAME", "POLICY", "KIND", "SAMPLES"}, {WorkloadRow(out)});
  return absl::OkStatus();
}

absl::Status RunWorkloadList(const Invocation& invocation) {
  v1::ListWorkloadsRequest request;
  v1::ListWorkloadsResponse response;
  if (absl::Status s =
          invocation.Unary("ListWorkloads", &AutoscalerStub::ListWorkloads, request, &response);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(response);
  std::vector<std::vector<std::string>> rows;
  for (const v1::Workload& w : response.workloads()) rows.push_back(WorkloadRow(w));
  invocation.out() << FormatTable({"NAME", "POLICY", "KIND", "SAMPLES"}, rows);
  return absl::OkStatus();
}

absl::Status RunWorkloadGet(const Invocation& invocation) {
  absl::StatusOr<v1::Workload> w = GetWorkloadRpc(invocation, invocation.arguments().workload);
  if (!w.ok()) return w.status();
  if (invocation.global().structured()) return invocation.PrintMessage(*w);
  invocation.out() << FormatTable({"NAME", "POLICY", "KIND", "SAMPLES"}, {WorkloadRow(*w)});
  return absl::OkStatus();
}

void DefineRecommend(CLI::App& command, CommandArguments& arguments) {
  command.add_option("WORKLOAD", arguments.workload, "the workload's name, e.g. default/ranker")
      ->type_name("")
      ->required();
  command
      .add_option("--prometheus-url", arguments.kubernetes.prometheus_url,
                  "where the ScaledObject's trigger reads evoscale's gauges")
      ->type_name("URL");
}

absl::Status RunRecommend(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  const std::string& output = invocation.global().output;
  v1::GetRecommendationRequest request;
  request.set_workload(arguments.workload);
  v1::Recommendation rec;
  if (absl::Status s =
          invocation.Unary("GetRecommendation", &AutoscalerStub::GetRecommendation, request, &rec);
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) return invocation.PrintMessage(rec);
  if (output == "kubernetes") {
    absl::StatusOr<v1::Workload> w = GetWorkloadRpc(invocation, rec.workload());
    if (!w.ok()) return w.status();
    invocation.out() << RecommendationYaml(*w, rec, arguments.kubernetes);
    return absl::OkStatus();
  }
  auto row = [](const char* what, const v1::ResourceBounds& b, bool cpu) {
    auto q = [&](double v) { return cpu ? CpuQuantity(v) : MemoryQuantity(v); };
    return std::vector<std::string>{what, q(b.lower_bound()), q(b.target()), q(b.upper_bound()),
                                    q(std::max(b.limit(), b.target()))};
  };
  std::vector<std::vector<std::string>> rows = {row("cpu", rec.cpu_cores(), true),
                                                row("memory", rec.memory_bytes(), false)};
  if (rec.has_gpu_memory_bytes()) rows.push_back(row("gpu_memory", rec.gpu_memory_bytes(), false));
  invocation.out() << FormatTable({"RESOURCE", "LOWER", "TARGET", "UPPER", "LIMIT"}, rows)
                   << "replicas: " << rec.replicas()
                   << "  confidence: " << FormatNumber(rec.confidence())
                   << "  policy: " << rec.policy() << "\n"
                   << rec.explanation() << "\n";
  return absl::OkStatus();
}

// ---- Admin ----

void DefineAdminBackup(CLI::App& command, CommandArguments& arguments) {
  command
      .add_option("PATH", arguments.file,
                  "where the study database goes (a new file); the telemetry database goes "
                  "beside it, as evoscaled names it (x.db -> x.telemetry.db)")
      ->type_name("")
      ->required();
}

// Receives the backup stream into PATH and its telemetry file: each written to a temporary
// name, fsync'ed, then renamed into place once whole, so a file under either name is complete.
absl::Status RunAdminBackup(const Invocation& invocation) {
  const std::string studies = invocation.arguments().file;
  const std::string telemetry = service::TelemetryPathFor(studies);
  for (const std::string& path : {studies, telemetry}) {
    if (access(path.c_str(), F_OK) == 0) {
      return UsageError(absl::StrCat("\"", path, "\" exists; a backup goes to new files"));
    }
  }
  struct Target {
    std::string path, partial;
    FILE* file = nullptr;
    int64_t size = -1;
  };
  std::map<int, Target> targets = {
      {v1::BackupChunk::STUDIES, {studies, studies + ".partial"}},
      {v1::BackupChunk::TELEMETRY, {telemetry, telemetry + ".partial"}}};
  absl::Status local;  // a local write error (the RPC is cancelled)
  absl::Status rpc = invocation.Call("Backup", [&](grpc::ClientContext* context) {
    std::unique_ptr<grpc::ClientReaderInterface<v1::BackupChunk>> reader =
        invocation.admin().Backup(context, v1::BackupRequest());
    v1::BackupChunk chunk;
    while (local.ok() && reader->Read(&chunk)) {
      auto it = targets.find(chunk.database());
      if (it == targets.end()) {
        local = absl::InternalError(absl::StrCat("backup: unknown database ", chunk.database()));
        break;
      }
      Target& t = it->second;
      if (t.file == nullptr) t.file = std::fopen(t.partial.c_str(), "wbx");
      if (t.file == nullptr ||
          std::fwrite(chunk.data().data(), 1, chunk.data().size(), t.file) != chunk.data().size()) {
        local = absl::InternalError(absl::StrCat("\"", t.partial, "\": ", std::strerror(errno)));
        break;
      }
      if (chunk.last()) t.size = chunk.size();
    }
    if (!local.ok()) context->TryCancel();
    return reader->Finish();
  });
  for (auto& [database, t] : targets) {
    if (t.file != nullptr) {
      const bool synced = std::fflush(t.file) == 0 && fsync(fileno(t.file)) == 0;
      if (std::fclose(t.file) != 0 || !synced) {
        if (local.ok())
          local = absl::InternalError(absl::StrCat("\"", t.partial, "\": ", std::strerror(errno)));
      }
    }
  }
  absl::Status status = !local.ok() ? local : rpc;
  if (status.ok()) {
    for (auto& [database, t] : targets) {
      if (t.size < 0) {
        status =
            absl::InternalError(absl::StrCat("backup: \"", t.path, "\" was not received whole"));
      }
    }
  }
  if (!status.ok()) {
    for (auto& [database, t] : targets) std::remove(t.partial.c_str());
    return status;
  }
  for (auto& [database, t] : targets) {
    if (std::rename(t.partial.c_str(), t.path.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("\"", t.path, "\": ", std::strerror(errno)));
    }
  }
  invocation.out() << "backup: " << studies << " (" << targets[v1::BackupChunk::STUDIES].size
                   << " bytes), " << telemetry << " (" << targets[v1::BackupChunk::TELEMETRY].size
                   << " bytes)\nrestore: stop evoscaled, then start it with --db " << studies
                   << "\n";
  return absl::OkStatus();
}

// ---- Telemetry ----

void DefineTelemetrySend(CLI::App& command, CommandArguments& arguments) {
  command
      .add_option("FILE", arguments.file,
                  "samples: JSON lines (a TelemetrySample each, e.g. {\"workload\":\"default/"
                  "ranker\",\"instance\":\"pod-1\",\"container\":\"server\",\"time\":"
                  "1700000000,\"cpu_cores\":1.5,\"memory_bytes\":2e9}; time in unix seconds or "
                  "RFC 3339) or CSV whose header names those fields")
      ->type_name("")
      ->required();
  command.add_option("--workload", arguments.workload, "the workload of samples that name none")
      ->type_name("NAME");
}

// Reads a telemetry file (ParseTelemetryText names it in errors).
absl::StatusOr<std::vector<v1::TelemetrySample>> ReadTelemetryFile(
    const std::string& path, const std::string& default_workload) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return UsageError(absl::StrCat("telemetry file \"", path, "\": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTelemetryText(text.str(), path, default_workload);
}

absl::Status RunTelemetrySend(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<std::vector<v1::TelemetrySample>> samples =
      ReadTelemetryFile(arguments.file, arguments.workload);
  if (!samples.ok()) return samples.status();
  constexpr size_t kBatch = 1000;
  v1::ReportTelemetryResponse response;
  if (absl::Status s = invocation.Call(
          "ReportTelemetry",
          [&](grpc::ClientContext* context) {
            std::unique_ptr<grpc::ClientWriterInterface<v1::TelemetryBatch>> writer =
                invocation.autoscaler().ReportTelemetry(context, &response);
            for (size_t i = 0; i < samples->size(); i += kBatch) {
              v1::TelemetryBatch batch;
              for (size_t j = i; j < std::min(samples->size(), i + kBatch); ++j) {
                *batch.add_samples() = (*samples)[j];
              }
              if (!writer->Write(batch)) break;  // the server ended the stream: Finish says why
            }
            writer->WritesDone();
            return writer->Finish();
          });
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) {
    if (absl::Status s = invocation.PrintMessage(response); !s.ok()) return s;
  } else {
    invocation.out() << "sent " << samples->size() << " samples: " << response.accepted()
                     << " accepted, " << response.rejected() << " rejected\n";
    for (const auto& [reason, n] : response.rejected_by_reason()) {
      invocation.out() << "  " << reason << ": " << n << "\n";
    }
    for (const std::string& error : response.errors()) invocation.out() << "  " << error << "\n";
  }
  if (response.rejected() > 0) {
    return RpcError("ReportTelemetry",
                    grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat(response.rejected(), " of ", samples->size(),
                                              " samples rejected")));
  }
  return absl::OkStatus();
}

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

const std::vector<Command>& Commands() {
  static const auto* const kCommands = new std::vector<Command>{
      {"study create", "-f FILE [--name DISPLAY_NAME]",
       "Create a study from a JSON or YAML file holding a Study or a bare StudySpec.",
       DefineStudyCreate, RunStudyCreate},
      {"study list", "", "List all studies.", DefineNothing, RunStudyList},
      {"study get", "STUDY", "Show a study and its search space.", DefineStudy, RunStudyGet},
      {"study delete", "STUDY", "Delete a study and its trials.", DefineStudy, RunStudyDelete},
      {"study state", "STUDY active|inactive|completed", "Set a study's state.", DefineStudyState,
       RunStudyState},
      {"study optimal", "STUDY", "List the study's optimal (Pareto-front) trials.", DefineStudy,
       RunOptimal},
      {"trial list", "STUDY [--state STATE] [--page-size N]",
       "List a study's trials (all pages), optionally only those in STATE.", DefineTrialsList,
       RunTrialsList},
      {"trial get", "TRIAL", "Show a trial, its measurements and metadata.", DefineTrial,
       RunTrialGet},
      {"trial suggest", "STUDY [--count N] [--client-id ID]",
       "Ask for N trials to run (default 1) as client ID (default: this process's own).",
       DefineSuggest, RunSuggest},
      {"trial measure", "TRIAL --step N METRIC=VALUE...",
       "Report an intermediate measurement of a trial.", DefineMeasure, RunMeasure},
      {"trial complete", "TRIAL [METRIC=VALUE...] | TRIAL --infeasible REASON",
       "Complete a trial with final metrics (default: its latest measurement) or as infeasible; "
       "a trial asked to stop ends STOPPED.",
       DefineComplete, RunComplete},
      {"trial stop", "TRIAL", "Ask for a trial to stop.", DefineTrial, RunStop},
      {"trial should-stop", "TRIAL", "Print whether a trial should stop early: true or false.",
       DefineTrial, RunShouldStop},
      {"trial delete", "TRIAL", "Delete a trial (needs the admin role).", DefineTrial,
       RunTrialDelete},
      // Short forms kept from earlier releases (scripts use them).
      {"suggest", "STUDY [--count N] [--client-id ID]", "Short for trial suggest.", DefineSuggest,
       RunSuggest, /*short_form=*/true},
      {"measure", "TRIAL --step N METRIC=VALUE...", "Short for trial measure.", DefineMeasure,
       RunMeasure, true},
      {"complete", "TRIAL [METRIC=VALUE...] | TRIAL --infeasible REASON",
       "Short for trial complete.", DefineComplete, RunComplete, true},
      {"stop", "TRIAL", "Short for trial stop.", DefineTrial, RunStop, true},
      {"should-stop", "TRIAL", "Short for trial should-stop.", DefineTrial, RunShouldStop, true},
      {"optimal", "STUDY", "Short for study optimal.", DefineStudy, RunOptimal, true},
      {"workload put",
       "NAME [--policy evoscale|vpa|hpa] [--kind serving|training] [--target-utilization X] "
       "[--min-replicas N] [--max-replicas N] [--oom-rate X] [--throttle-rate X] "
       "[--request-percentile X] [--startup-delay-seconds X]",
       "Create or update an autoscaled workload.", DefineWorkloadPut, RunWorkloadPut},
      {"workload list", "", "List autoscaled workloads.", DefineNothing, RunWorkloadList},
      {"workload get", "NAME", "Show a workload.", DefineWorkload, RunWorkloadGet},
      {"recommend", "WORKLOAD [-o table|json|yaml|kubernetes] [--prometheus-url URL]",
       "Show a workload's recommendation; -o kubernetes prints a VerticalPodAutoscaler and a "
       "KEDA ScaledObject.",
       DefineRecommend, RunRecommend},
      {"telemetry send", "FILE [--workload NAME]",
       "Send usage samples (JSON lines or CSV) to the autoscaler, e.g. to try it without a "
       "cluster.",
       DefineTelemetrySend, RunTelemetrySend},
      {"admin backup", "PATH",
       "Copy evoscaled's databases while it serves (a consistent snapshot) into PATH and "
       "its telemetry file; needs the admin role.",
       DefineAdminBackup, RunAdminBackup},
      {"replay",
       "--trace bitbrains|alibaba-genai|azure-llm --path PATH [--policy evoscale|vpa|hpa] "
       "[--startup-delay DURATION]",
       "Replay a trace through an autoscaling policy, offline, and report slack, OOMs and "
       "replica-hours.",
       DefineReplay, RunReplay},
  };
  return *kCommands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

// The commands of a group ("study"): "create, list, get, delete, state".
std::string SubcommandsOf(absl::string_view group) {
  std::vector<absl::string_view> names;
  for (const Command& command : Commands()) {
    std::pair<absl::string_view, absl::string_view> words =
        absl::StrSplit(command.name, absl::MaxSplits(' ', 1));
    if (words.first == group) names.push_back(words.second);
  }
  return absl::StrJoin(names, ", ");
}

// ---- Command-line parsing ------------------------------------------------------------------

void DefineGlobalFlags(CLI::App& app, GlobalOptions& global) {
  app.add_option("--server", global.server,
                 absl::StrCat("evoscaled's gRPC address (default $EVOSCALE_SERVER, else ",
                              kDefaultServer, ")"))
      ->type_name("HOST:PORT")
      ->check(NotEmpty("the address"));
  app.add_option("--token", global.token,
                 "bearer token sent with every call (default $EVOSCALE_TOKEN)")
      ->type_name("TOKEN");
  app.add_option("--tls-ca", global.tls_ca,
                 "connect with TLS, trusting this PEM CA (default $EVOSCALE_TLS_CA)")
      ->type_name("FILE");
  app.add_option("--tls-cert", global.tls_cert, "this client's PEM certificate (mutual TLS)")
      ->type_name("FILE");
  app.add_option("--tls-key", global.tls_key, "the PEM key of --tls-cert")->type_name("FILE");
  app.add_option("-o,--output", global.output,
                 "table (default), json, yaml, or kubernetes (recommend: a VerticalPodAutoscaler "
                 "and a KEDA ScaledObject)")
      ->type_name("FORMAT")
      ->check(OneOf({"table", "json", "yaml", "kubernetes"}, "table, json, yaml or kubernetes"));
  app.add_flag_callback(
      "--json", [&global] { global.output = "json"; }, "short for -o json");
  app.add_flag("--version", global.version, "print the version and exit");
  app.add_option(
         "--timeout", global.timeout_seconds,
         absl::StrCat("deadline of each call (default ", FormatNumber(kDefaultTimeoutSeconds), ")"))
      ->type_name("SECONDS")
      ->check(TimeoutSeconds());
}

// The CLI11 subcommand `name` of `parent`, made on first use.
CLI::App* Subcommand(CLI::App& parent, const std::string& name, const std::string& summary) {
  std::vector<CLI::App*> existing =
      parent.get_subcommands([&name](CLI::App* sub) { return sub->get_name() == name; });
  if (!existing.empty()) return existing.front();
  return parent.add_subcommand(name, summary)
      ->footer("Global flags (--server, --token, -o/--json, --timeout): see evoscale help.");
}

// The subcommand the parse reached: the deepest one given, or `root` when there was none.
const CLI::App& Reached(const CLI::App& root) {
  const CLI::App* app = &root;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return *app;
}

// The words that name `app` below the root: "study create"; "" for the root.
std::string CommandWords(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::App* a = &app; a->get_parent() != nullptr; a = a->get_parent()) {
    words.insert(words.begin(), a->get_name());
  }
  return absl::StrJoin(words, " ");
}

// Whether `app` or any of its subcommands has the flag `name` ("--step", "-f").
bool DefinesFlag(CLI::App& app, const std::string& name) {
  if (app.get_option_no_throw(name) != nullptr) return true;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (DefinesFlag(*sub, name)) return true;
  }
  return false;
}

// "-x", "--x=1"; not "-" alone or a negative number ("-5", "-.5").
bool LooksLikeFlag(absl::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && !absl::ascii_isdigit(arg[1]) && arg[1] != '.';
}

// What was wrong with arguments nothing took, e.g. `unknown flag --bogus`.
std::string DescribeExtras(CLI::App& root, const CLI::App& reached) {
  const std::vector<std::string> extras = root.remaining(/*recurse=*/true);
  if (auto flag = std::find_if(extras.begin(), extras.end(), LooksLikeFlag); flag != extras.end()) {
    const std::string name = flag->substr(0, flag->find('='));
    return DefinesFlag(root, name) ? absl::StrCat("flag ", name, " does not apply")
                                   : absl::StrCat("unknown flag ", name);
  }
  if (extras.empty()) return "unexpected arguments";
  if (&reached == &root) return absl::StrCat("unknown command \"", extras.front(), "\"");
  if (FindCommand(CommandWords(reached)) == nullptr) {
    return absl::StrCat("unknown subcommand \"", extras.front(), "\"");
  }
  return absl::StrCat("unexpected argument \"", extras.front(), "\"");
}

// The message for a command line CLI11 refused: the command it reached, what was wrong
// (CLI11's words, which name the flag or argument, or ours for unexpected arguments), and
// where to look for the right usage.
std::string ParseErrorMessage(CLI::App& root, const CLI::ParseError& error) {
  const CLI::App& reached = Reached(root);
  const std::string problem = dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr
                                  ? DescribeExtras(root, reached)
                                  : std::string(error.what());
  const std::string words = CommandWords(reached);
  if (words.empty()) return absl::StrCat(problem, " (see evoscale help)");
  if (const Command* command = FindCommand(words)) {
    return absl::StrCat(words, ": ", problem, " (usage: evoscale ", words,
                        command->synopsis.empty() ? "" : " ", command->synopsis, ")");
  }
  return absl::StrCat(words, ": ", problem, " (one of ", SubcommandsOf(words), ")");
}

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const Environment& env) {
  CommandLine line;
  if (!env.server.empty()) line.global.server = env.server;
  line.global.token = env.token;
  line.global.tls_ca = env.tls_ca;

  CLI::App root("evoscale: the command-line client of evoscaled", "evoscale");
  root.fallthrough();             // global flags after the command, too; inherited
  root.require_subcommand(0, 1);  // one command; inherited by the groups
  DefineGlobalFlags(root, line.global);
  for (const Command& command : Commands()) {
    std::vector<std::string> words = absl::StrSplit(command.name, ' ');
    CLI::App* parent = &root;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      parent = Subcommand(*parent, words[i], absl::StrCat("Commands: ", SubcommandsOf(words[i])));
    }
    command.define(*Subcommand(*parent, words.back(), std::string(command.summary)),
                   line.arguments);
  }
  // The plural nouns are the same groups (kubectl takes both: `get study`, `get studies`).
  for (const auto& [noun, plural] : {std::pair<const char*, const char*>{"study", "studies"},
                                     {"trial", "trials"},
                                     {"workload", "workloads"}}) {
    Subcommand(root, noun, "")->alias(plural);
  }
  // `help` ignores what follows it, as the usage covers every command.
  Subcommand(root, "help", "Print the usage of every command.")->fallthrough(false)->allow_extras();

  try {
    root.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them reversed
  } catch (const CLI::CallForHelp&) {
    // The root's help() is the help of the (sub)command reached.
    line.help = &Reached(root) == &root ? UsageText() : root.help();
    return line;
  } catch (const CLI::ParseError& error) {
    return UsageError(ParseErrorMessage(root, error));
  }
  const std::string words = CommandWords(Reached(root));
  if (line.global.version) {
    line.help = VersionText();
    return line;
  }
  if (line.global.output == "kubernetes" && words != "recommend") {
    return UsageError(absl::StrCat(words.empty() ? "" : absl::StrCat(words, ": "),
                                   "-o kubernetes: only recommend prints Kubernetes objects "
                                   "(use table, json or yaml)"));
  }
  if (words == "help") {
    line.help = UsageText();
  } else if (!words.empty() && FindCommand(words) == nullptr) {
    return UsageError(
        absl::StrCat(words, ": missing subcommand (one of ", SubcommandsOf(words), ")"));
  } else {
    line.command = words;
  }
  return line;
}

namespace {

// Plaintext, or TLS trusting --tls-ca (with this client's certificate for mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const GlobalOptions& global) {
  if (global.tls_ca.empty()) {
    if (!global.tls_cert.empty() || !global.tls_key.empty()) {
      return UsageError("--tls-cert and --tls-key need --tls-ca (TLS)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (global.tls_cert.empty() != global.tls_key.empty()) {
    return UsageError("--tls-cert and --tls-key go together: give both");
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [flag, path, pem] :
       {std::tuple{"--tls-ca", &global.tls_ca, &ssl.pem_root_certs},
        std::tuple{"--tls-cert", &global.tls_cert, &ssl.pem_cert_chain},
        std::tuple{"--tls-key", &global.tls_key, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    // INVALID_ARGUMENT, naming the flag and file: a usage error (exit 2).
    absl::StatusOr<std::string> text = service::ReadPemFile(flag, *path);
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  return grpc::SslCredentials(ssl);
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

std::string VersionText() { return absl::StrCat("evoscale ", EVOSCALE_VERSION, "\n"); }

absl::StatusOr<std::string> NormalizeStudyName(absl::string_view name) {
  absl::string_view id = name;
  if (absl::StartsWith(id, "studies/")) id.remove_prefix(absl::string_view("studies/").size());
  if (id.empty() || absl::StrContains(id, '/')) {
    return UsageError(absl::StrCat("study \"", name, "\": expected studies/ID or ID"));
  }
  return absl::StrCat("studies/", id);
}

absl::StatusOr<std::string> ValidateTrialName(absl::string_view name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '/');
  // "S/T" is short for studies/S/trials/T (a trial id alone is ambiguous: ids are per study).
  if (parts.size() == 2 && !parts[0].empty() && !parts[1].empty() && parts[0] != "studies") {
    return absl::StrCat("studies/", parts[0], "/trials/", parts[1]);
  }
  if (parts.size() != 4 || parts[0] != "studies" || parts[1].empty() || parts[2] != "trials" ||
      parts[3].empty()) {
    return UsageError(absl::StrCat("trial \"", name,
                                   "\": expected a trial name studies/ID/trials/ID, or STUDY/TRIAL "
                                   "ids (1/3)"));
  }
  return std::string(name);
}

absl::StatusOr<std::pair<std::string, double>> ParseMetric(absl::string_view arg) {
  size_t eq = arg.find('=');
  if (eq == absl::string_view::npos) {
    return UsageError(absl::StrCat("metric \"", arg, "\": expected NAME=VALUE"));
  }
  absl::string_view name = arg.substr(0, eq);
  absl::string_view text = arg.substr(eq + 1);
  if (name.empty()) return UsageError(absl::StrCat("metric \"", arg, "\": the name is empty"));
  double value;
  if (!absl::SimpleAtod(text, &value) || std::isnan(value)) {
    return UsageError(absl::StrCat("metric \"", arg, "\": value is not a number"));
  }
  if (!std::isfinite(value)) {
    return UsageError(absl::StrCat("metric \"", arg, "\": value is not finite"));
  }
  return std::make_pair(std::string(name), value);
}

absl::StatusOr<std::map<std::string, double>> ParseMetrics(const std::vector<std::string>& args) {
  std::map<std::string, double> metrics;
  for (const std::string& arg : args) {
    absl::StatusOr<std::pair<std::string, double>> metric = ParseMetric(arg);
    if (!metric.ok()) return metric.status();
    if (!metrics.insert(*metric).second) {
      return UsageError(absl::StrCat("metric \"", metric->first, "\" given twice"));
    }
  }
  return metrics;
}

std::string UsageText() {
  std::string text =
      "usage: evoscale [GLOBAL FLAGS] COMMAND [ARGUMENTS]\n"
      "\n"
      "Commands (the nouns take their plural too: studies, trials, workloads):\n";
  std::vector<absl::string_view> short_forms;
  for (const Command& command : Commands()) {
    if (command.short_form) {
      short_forms.push_back(command.name);
      continue;
    }
    absl::StrAppend(&text, "  ", command.name, command.synopsis.empty() ? "" : " ",
                    command.synopsis, "\n      ", command.summary, "\n");
  }
  absl::StrAppend(&text, "  ", absl::StrJoin(short_forms, ", "),
                  "\n      Short for trial suggest, ..., and study optimal.\n");
  absl::StrAppend(&text,
                  "  help\n"
                  "      Print this text.\n"
                  "\n"
                  "STUDY is a study name, studies/ID, or just its ID; TRIAL is a trial name,\n"
                  "studies/ID/trials/ID, or the two ids, STUDY/TRIAL (1/3).\n"
                  "\n"
                  "Global flags (anywhere on the line):\n"
                  "  --server HOST:PORT  evoscaled's gRPC address (default $EVOSCALE_SERVER, else ",
                  kDefaultServer,
                  ")\n"
                  "  --token TOKEN       bearer token sent with every call (default "
                  "$EVOSCALE_TOKEN)\n"
                  "  --tls-ca FILE       connect with TLS trusting this PEM CA (default "
                  "$EVOSCALE_TLS_CA);\n"
                  "                      --tls-cert FILE --tls-key FILE: a client certificate\n"
                  "  -o, --output FORMAT table (default); json (protobuf JSON, one message a\n"
                  "                      line; --json is short for it); yaml; kubernetes\n"
                  "                      (recommend only)\n"
                  "  --version           print the version\n"
                  "  --timeout SECONDS   deadline of each call (default ",
                  FormatNumber(kDefaultTimeoutSeconds),
                  ")\n"
                  "  -h, --help          print this text; after a command, that command's flags\n"
                  "\n"
                  "Exit status: 0 success, 1 the server returned an error or could not be reached\n"
                  "(UNAVAILABLE), 2 bad usage or input.\n");
  return text;
}

int Run(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
        std::ostream& err) {
  constexpr int kRpcFailed = 1;
  constexpr int kBadUsage = 2;
  absl::StatusOr<CommandLine> line = ParseCommandLine(args, env);
  if (!line.ok()) {
    err << "evoscale: " << line.status().message() << "\n";
    return kBadUsage;
  }
  if (!line->help.empty()) {
    out << line->help;
    return 0;
  }
  const Command* command = FindCommand(line->command);
  if (command == nullptr) {  // no command given
    err << UsageText();
    return kBadUsage;
  }

  // The channel connects lazily, on the first call; commands check their arguments first.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(line->global);
  if (!credentials.ok()) {
    err << "evoscale: " << credentials.status().message() << "\n";
    return kBadUsage;
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(line->global.server, *credentials);
  std::unique_ptr<StudyService::Stub> stub = StudyService::NewStub(channel);
  std::unique_ptr<v1::AutoscalerService::Stub> autoscaler = v1::AutoscalerService::NewStub(channel);
  std::unique_ptr<v1::AdminService::Stub> admin = v1::AdminService::NewStub(channel);
  Invocation invocation(*line, env, *stub, *autoscaler, *admin, out);
  absl::Status status = command->run(invocation);
  out.flush();
  if (status.ok()) return 0;
  if (IsRpcError(status)) {
    err << "evoscale: " << status.message() << "\n";
    return kRpcFailed;
  }
  err << "evoscale: " << command->name << ": " << status.message() << "\n";
  return kBadUsage;
}

int Main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  Environment env;
  env.server = GetEnv("EVOSCALE_SERVER");
  env.token = GetEnv("EVOSCALE_TOKEN");
  env.tls_ca = GetEnv("EVOSCALE_TLS_CA");
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) == 0) env.hostname = hostname;
  env.pid = getpid();
  std::random_device random;
  env.nonce = absl::StrFormat("%08x", random());
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return Run(args, env, out, err);
}

}  // namespace evoscale::cli
