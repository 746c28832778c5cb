// The evoscale command line: parsing, the commands, and their output.

#include "service/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "load_model/replay.h"
#include "service/cli/kubernetes.h"

namespace evoscale::cli {
namespace {

using v1::StudyService;

// Marks a Status that carries a failed RPC (exit code 1) rather than a usage error (2).
constexpr absl::string_view kRpcErrorPayload = "type.evoscale.dev/evoscale.cli.RpcError";

// The most a deadline may be; keeps the chrono arithmetic far from overflow.
constexpr double kMaxTimeoutSeconds = 24 * 3600;

// The most results one page may hold (the API's limit for page_size and suggestion_count).
constexpr int64_t kMaxPageSize = 1000;

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

// ---- Command-line parsing ------------------------------------------------------------------

struct FlagInfo {
  absl::string_view name;
  bool takes_value;
};

// Every flag any command knows. Which command accepts which is in kCommands below.
constexpr FlagInfo kKnownFlags[] = {
    // Global.
    {"server", true},
    {"token", true},
    {"timeout", true},
    {"json", false},
    {"help", false},
    // Per command.
    {"file", true},
    {"name", true},
    {"state", true},
    {"page-size", true},
    {"count", true},
    {"client-id", true},
    {"step", true},
    {"infeasible", true},
    {"policy", true},
    {"kind", true},
    {"target-utilization", true},
    {"min-replicas", true},
    {"max-replicas", true},
    {"output", true},
    {"prometheus-url", true},
    {"trace", true},
    {"path", true},
};

const FlagInfo* FindFlag(absl::string_view name) {
  for (const FlagInfo& flag : kKnownFlags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

// "-5" and "-.5" are arguments (a negative value), not flags.
bool LooksLikeNegativeNumber(absl::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && (absl::ascii_isdigit(arg[1]) || arg[1] == '.');
}

absl::StatusOr<double> ParseTimeout(absl::string_view text) {
  double seconds;
  if (!absl::SimpleAtod(text, &seconds) || !(seconds > 0) || seconds > kMaxTimeoutSeconds) {
    return UsageError(
        absl::StrCat("flag --timeout: \"", text, "\" is not a number of seconds in (0, 86400]"));
  }
  return seconds;
}

absl::StatusOr<int64_t> ParseIntFlag(absl::string_view flag, absl::string_view text, int64_t min,
                                     int64_t max) {
  int64_t value;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return UsageError(absl::StrCat("flag --", flag, ": \"", text, "\" is not an integer in [", min,
                                   ", ", max, "]"));
  }
  return value;
}

// ---- Commands ------------------------------------------------------------------------------

// One run of one command: its arguments and where it sends RPCs and output.
class Invocation {
 public:
  Invocation(const GlobalOptions& global, const Environment& env, StudyService::StubInterface& stub,
             std::vector<std::string> args, const std::map<std::string, std::string>& flags,
             std::ostream& out, v1::AutoscalerService::StubInterface* autoscaler = nullptr)
      : global_(global),
        env_(env),
        stub_(stub),
        autoscaler_(autoscaler),
        args_(std::move(args)),
        flags_(flags),
        out_(out) {}

  const GlobalOptions& global() const { return global_; }
  const Environment& env() const { return env_; }
  StudyService::StubInterface& stub() const { return stub_; }
  v1::AutoscalerService::StubInterface& autoscaler() const { return *autoscaler_; }
  const std::vector<std::string>& args() const { return args_; }
  std::ostream& out() const { return out_; }

  // The value of a command flag, or nullptr when it was not given.
  const std::string* flag(absl::string_view name) const {
    auto it = flags_.find(std::string(name));
    return it == flags_.end() ? nullptr : &it->second;
  }

  // Calls `rpc` (a lambda taking the ClientContext) with the deadline and the token set.
  template <typename Rpc>
  absl::Status Call(absl::string_view rpc_name, Rpc rpc) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(global_.timeout_seconds)));
    if (!global_.token.empty()) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", global_.token));
    }
    grpc::Status status = rpc(&context);
    return status.ok() ? absl::OkStatus() : RpcError(rpc_name, status);
  }

  // Prints `message` as one line of protobuf JSON.
  absl::Status PrintJson(const google::protobuf::Message& message) const {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;  // scripts see every field, even false/0
    std::string json;
    google::protobuf::util::Status status =
        google::protobuf::util::MessageToJsonString(message, &json, options);
    if (!status.ok()) return absl::InternalError(status.message().ToString());
    out_ << json << "\n";
    return absl::OkStatus();
  }

 private:
  const GlobalOptions& global_;
  const Environment& env_;
  StudyService::StubInterface& stub_;
  v1::AutoscalerService::StubInterface* const autoscaler_;  // not owned
  const std::vector<std::string> args_;  // positional arguments after the command words
  const std::map<std::string, std::string>& flags_;
  std::ostream& out_;
};

struct Command {
  absl::string_view name;      // the command words, "study create"
  absl::string_view synopsis;  // arguments and flags after the name
  absl::string_view summary;
  std::vector<absl::string_view> flags;  // command flags it accepts
  absl::Status (*run)(const Invocation&);
};

absl::Status CheckArgCount(const Invocation& invocation, size_t min, size_t max,
                           absl::string_view synopsis) {
  const auto& args = invocation.args();
  if (args.size() < min) return UsageError(absl::StrCat("missing arguments; expected ", synopsis));
  if (args.size() > max) {
    return UsageError(absl::StrCat("unexpected argument \"", args[max], "\"; expected ", synopsis));
  }
  return absl::OkStatus();
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
  std::vector<std::vector<std::string>> rows;
  for (const v1::Study& study : studies) rows.push_back(StudyRow(study));
  invocation.out() << FormatTable({"NAME", "DISPLAY_NAME", "STATE", "TRIALS", "COMPLETED"}, rows);
  return absl::OkStatus();
}

absl::Status PrintStudy(const Invocation& invocation, const v1::Study& study) {
  if (invocation.global().json) return invocation.PrintJson(study);
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

absl::Status PrintTrials(const Invocation& invocation,
                         const google::protobuf::RepeatedPtrField<v1::Trial>& trials) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Trial& trial : trials) {
    rows.push_back({trial.name(), TrialState(trial), FormatParameters(trial), TrialMetrics(trial)});
  }
  invocation.out() << FormatTable({"NAME", "STATE", "PARAMETERS", "METRICS"}, rows);
  return absl::OkStatus();
}

absl::Status PrintTrial(const Invocation& invocation, const v1::Trial& trial) {
  if (invocation.global().json) return invocation.PrintJson(trial);
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

absl::Status RunStudyCreate(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 0, 0, "-f FILE"); !s.ok()) return s;
  const std::string* file = invocation.flag("file");
  if (file == nullptr) return UsageError("-f FILE is required");
  absl::StatusOr<v1::Study> study = LoadStudyFile(*file);
  if (!study.ok()) return study.status();
  if (const std::string* name = invocation.flag("name")) study->set_display_name(*name);

  v1::CreateStudyRequest request;
  *request.mutable_study() = *std::move(study);
  v1::Study created;
  if (absl::Status s = invocation.Call("CreateStudy",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().CreateStudy(context, request,
                                                                              &created);
                                       });
      !s.ok()) {
    return s;
  }
  return PrintStudy(invocation, created);
}

absl::Status RunStudyList(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 0, 0, "no arguments"); !s.ok()) return s;
  v1::ListStudiesResponse all;
  absl::Status listed = ListAllPages(
      "ListStudies",
      [&](const std::string& token, v1::ListStudiesResponse* page) {
        v1::ListStudiesRequest request;
        request.set_page_size(kMaxPageSize);
        request.set_page_token(token);
        return invocation.Call("ListStudies", [&](grpc::ClientContext* context) {
          return invocation.stub().ListStudies(context, request, page);
        });
      },
      &all);
  if (!listed.ok()) return listed;
  if (invocation.global().json) return invocation.PrintJson(all);
  return PrintStudies(invocation, all.studies());
}

absl::Status RunStudyGet(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "STUDY"); !s.ok()) return s;
  absl::StatusOr<std::string> name = NormalizeStudyName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  v1::GetStudyRequest request;
  request.set_name(*name);
  v1::Study study;
  if (absl::Status s = invocation.Call("GetStudy",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().GetStudy(context, request,
                                                                           &study);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(study);

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
  for (const v1::ParameterSpec& parameter : spec.parameters()) {
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
    if (!parameter.children().empty()) {
      absl::StrAppend(&text, " (", parameter.children_size(), " conditional children)");
    }
    rows.push_back({"parameter:", text});
  }
  // FormatTable with the first row as its "header": a two-column key/value block.
  std::vector<std::string> first = rows.front();
  rows.erase(rows.begin());
  invocation.out() << FormatTable(first, rows);
  return absl::OkStatus();
}

absl::Status RunStudyDelete(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "STUDY"); !s.ok()) return s;
  absl::StatusOr<std::string> name = NormalizeStudyName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  v1::DeleteStudyRequest request;
  request.set_name(*name);
  v1::DeleteStudyResponse response;
  if (absl::Status s = invocation.Call("DeleteStudy",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().DeleteStudy(context, request,
                                                                              &response);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(response);
  invocation.out() << "deleted " << *name << "\n";
  return absl::OkStatus();
}

absl::Status RunStudyState(const Invocation& invocation) {
  constexpr absl::string_view kSynopsis = "STUDY active|inactive|completed";
  if (absl::Status s = CheckArgCount(invocation, 2, 2, kSynopsis); !s.ok()) return s;
  absl::StatusOr<std::string> name = NormalizeStudyName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  v1::Study::State state;
  if (!v1::Study::State_Parse(absl::AsciiStrToUpper(invocation.args()[1]), &state) ||
      state == v1::Study::STATE_UNSPECIFIED) {
    return UsageError(absl::StrCat("unknown state \"", invocation.args()[1],
                                   "\"; expected active, inactive or completed"));
  }
  v1::SetStudyStateRequest request;
  request.set_name(*name);
  request.set_state(state);
  v1::Study study;
  if (absl::Status s = invocation.Call("SetStudyState",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().SetStudyState(context, request,
                                                                                &study);
                                       });
      !s.ok()) {
    return s;
  }
  return PrintStudy(invocation, study);
}

absl::Status RunTrialsList(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "STUDY"); !s.ok()) return s;
  absl::StatusOr<std::string> parent = NormalizeStudyName(invocation.args()[0]);
  if (!parent.ok()) return parent.status();
  v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED;
  if (const std::string* text = invocation.flag("state")) {
    if (!v1::Trial::State_Parse(absl::AsciiStrToUpper(*text), &state) ||
        state == v1::Trial::STATE_UNSPECIFIED) {
      return UsageError(absl::StrCat(
          "flag --state: unknown trial state \"", *text,
          "\"; expected requested, active, stopping, succeeded, infeasible or failed"));
    }
  }
  int64_t page_size = 0;  // the server's default
  if (const std::string* text = invocation.flag("page-size")) {
    absl::StatusOr<int64_t> parsed = ParseIntFlag("page-size", *text, 1, kMaxPageSize);
    if (!parsed.ok()) return parsed.status();
    page_size = *parsed;
  }
  v1::ListTrialsResponse all;
  absl::Status listed = ListAllPages(
      "ListTrials",
      [&](const std::string& token, v1::ListTrialsResponse* page) {
        v1::ListTrialsRequest request;
        request.set_parent(*parent);
        request.set_state(state);
        request.set_page_size(static_cast<int32_t>(page_size));
        request.set_page_token(token);
        return invocation.Call("ListTrials", [&](grpc::ClientContext* context) {
          return invocation.stub().ListTrials(context, request, page);
        });
      },
      &all);
  if (!listed.ok()) return listed;
  if (invocation.global().json) return invocation.PrintJson(all);
  return PrintTrials(invocation, all.trials());
}

absl::Status RunSuggest(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "STUDY"); !s.ok()) return s;
  absl::StatusOr<std::string> parent = NormalizeStudyName(invocation.args()[0]);
  if (!parent.ok()) return parent.status();
  int64_t count = 1;
  if (const std::string* text = invocation.flag("count")) {
    absl::StatusOr<int64_t> parsed = ParseIntFlag("count", *text, 1, kMaxPageSize);
    if (!parsed.ok()) return parsed.status();
    count = *parsed;
  }
  std::string client_id =
      invocation.env().hostname.empty() ? "cli" : absl::StrCat("cli-", invocation.env().hostname);
  if (const std::string* text = invocation.flag("client-id")) {
    if (text->empty()) return UsageError("flag --client-id: the id is empty");
    client_id = *text;
  }
  v1::SuggestTrialsRequest request;
  request.set_parent(*parent);
  request.set_suggestion_count(static_cast<int32_t>(count));
  request.set_client_id(client_id);
  v1::SuggestTrialsResponse response;
  if (absl::Status s = invocation.Call("SuggestTrials",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().SuggestTrials(context, request,
                                                                                &response);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(response);
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

absl::Status RunMeasure(const Invocation& invocation) {
  constexpr absl::string_view kSynopsis = "TRIAL --step N METRIC=VALUE...";
  if (absl::Status s = CheckArgCount(invocation, 2, std::numeric_limits<size_t>::max(), kSynopsis);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  const std::string* step_text = invocation.flag("step");
  if (step_text == nullptr) return UsageError("--step N is required");
  absl::StatusOr<int64_t> step =
      ParseIntFlag("step", *step_text, 0, std::numeric_limits<int64_t>::max());
  if (!step.ok()) return step.status();
  absl::StatusOr<std::map<std::string, double>> metrics = ParseMetrics(
      std::vector<std::string>(invocation.args().begin() + 1, invocation.args().end()));
  if (!metrics.ok()) return metrics.status();

  v1::AddTrialMeasurementRequest request;
  request.set_trial_name(*name);
  request.mutable_measurement()->set_step(*step);
  request.mutable_measurement()->mutable_metrics()->insert(metrics->begin(), metrics->end());
  v1::Trial trial;
  if (absl::Status s = invocation.Call("AddTrialMeasurement",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().AddTrialMeasurement(
                                             context, request, &trial);
                                       });
      !s.ok()) {
    return s;
  }
  return PrintTrial(invocation, trial);
}

absl::Status RunComplete(const Invocation& invocation) {
  constexpr absl::string_view kSynopsis = "TRIAL [METRIC=VALUE...] | TRIAL --infeasible REASON";
  if (absl::Status s = CheckArgCount(invocation, 1, std::numeric_limits<size_t>::max(), kSynopsis);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  v1::CompleteTrialRequest request;
  request.set_name(*name);
  if (const std::string* reason = invocation.flag("infeasible")) {
    if (invocation.args().size() > 1) {
      return UsageError("give either metrics or --infeasible REASON, not both");
    }
    if (reason->empty()) return UsageError("flag --infeasible: the reason is empty");
    request.set_trial_infeasible(true);
    request.set_infeasible_reason(*reason);
  } else {
    // No metrics: the server takes the latest intermediate measurement as the final one.
    absl::StatusOr<std::map<std::string, double>> metrics = ParseMetrics(
        std::vector<std::string>(invocation.args().begin() + 1, invocation.args().end()));
    if (!metrics.ok()) return metrics.status();
    if (!metrics->empty()) {
      request.mutable_final_measurement()->mutable_metrics()->insert(metrics->begin(),
                                                                     metrics->end());
    }
  }
  v1::Trial trial;
  if (absl::Status s = invocation.Call("CompleteTrial",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().CompleteTrial(context, request,
                                                                                &trial);
                                       });
      !s.ok()) {
    return s;
  }
  return PrintTrial(invocation, trial);
}

absl::Status RunStop(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "TRIAL"); !s.ok()) return s;
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  v1::StopTrialRequest request;
  request.set_name(*name);
  v1::Trial trial;
  if (absl::Status s = invocation.Call("StopTrial",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().StopTrial(context, request,
                                                                            &trial);
                                       });
      !s.ok()) {
    return s;
  }
  return PrintTrial(invocation, trial);
}

absl::Status RunShouldStop(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "TRIAL"); !s.ok()) return s;
  absl::StatusOr<std::string> name = ValidateTrialName(invocation.args()[0]);
  if (!name.ok()) return name.status();
  v1::CheckTrialEarlyStoppingStateRequest request;
  request.set_trial_name(*name);
  v1::CheckTrialEarlyStoppingStateResponse response;
  if (absl::Status s = invocation.Call("CheckTrialEarlyStoppingState",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().CheckTrialEarlyStoppingState(
                                             context, request, &response);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(response);
  invocation.out() << (response.should_stop() ? "true" : "false") << "\n";
  return absl::OkStatus();
}

absl::Status RunOptimal(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "STUDY"); !s.ok()) return s;
  absl::StatusOr<std::string> parent = NormalizeStudyName(invocation.args()[0]);
  if (!parent.ok()) return parent.status();
  v1::ListOptimalTrialsRequest request;
  request.set_parent(*parent);
  v1::ListOptimalTrialsResponse response;
  if (absl::Status s = invocation.Call("ListOptimalTrials",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.stub().ListOptimalTrials(
                                             context, request, &response);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(response);
  return PrintTrials(invocation, response.optimal_trials());
}

// ---- Autoscaler commands -------------------------------------------------------------------

absl::StatusOr<v1::Workload> GetWorkloadRpc(const Invocation& invocation, const std::string& name) {
  v1::GetWorkloadRequest request;
  request.set_name(name);
  v1::Workload workload;
  absl::Status s = invocation.Call("GetWorkload", [&](grpc::ClientContext* context) {
    return invocation.autoscaler().GetWorkload(context, request, &workload);
  });
  if (!s.ok()) return s;
  return workload;
}

std::vector<std::string> WorkloadRow(const v1::Workload& w) {
  return {w.name(), v1::Workload::Policy_Name(w.policy()), v1::Workload::Kind_Name(w.kind()),
          absl::StrCat(w.sample_count())};
}

absl::Status RunWorkloadPut(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "NAME"); !s.ok()) return s;
  v1::PutWorkloadRequest request;
  v1::Workload* w = request.mutable_workload();
  w->set_name(invocation.args()[0]);
  if (const std::string* policy = invocation.flag("policy")) {
    v1::Workload::Policy p;
    if (!v1::Workload::Policy_Parse(absl::AsciiStrToUpper(*policy), &p)) {
      return UsageError(absl::StrCat("flag --policy: \"", *policy, "\" is not evoscale, vpa or hpa"));
    }
    w->set_policy(p);
  }
  if (const std::string* kind = invocation.flag("kind")) {
    v1::Workload::Kind k;
    if (!v1::Workload::Kind_Parse(absl::AsciiStrToUpper(*kind), &k)) {
      return UsageError(absl::StrCat("flag --kind: \"", *kind, "\" is not serving or training"));
    }
    w->set_kind(k);
  }
  if (const std::string* t = invocation.flag("target-utilization")) {
    double v;
    if (!absl::SimpleAtod(*t, &v) || !(v > 0 && v <= 1)) {
      return UsageError(absl::StrCat("flag --target-utilization: \"", *t, "\" is not in (0, 1]"));
    }
    w->set_target_utilization(v);
  }
  for (const auto& [flag, setter] :
       {std::pair<const char*, void (v1::Workload::*)(int32_t)>{"min-replicas",
                                                                &v1::Workload::set_min_replicas},
        {"max-replicas", &v1::Workload::set_max_replicas}}) {
    if (const std::string* v = invocation.flag(flag)) {
      absl::StatusOr<int64_t> n = ParseIntFlag(flag, *v, 0, 100000);
      if (!n.ok()) return n.status();
      (w->*setter)(static_cast<int32_t>(*n));
    }
  }
  v1::Workload out;
  if (absl::Status s = invocation.Call("PutWorkload",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.autoscaler().PutWorkload(
                                             context, request, &out);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(out);
  invocation.out() << FormatTable({"NAME", "POLICY", "KIND", "SAMPLES"}, {WorkloadRow(out)});
  return absl::OkStatus();
}

absl::Status RunWorkloadList(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 0, 0, ""); !s.ok()) return s;
  v1::ListWorkloadsRequest request;
  v1::ListWorkloadsResponse response;
  if (absl::Status s = invocation.Call("ListWorkloads",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.autoscaler().ListWorkloads(
                                             context, request, &response);
                                       });
      !s.ok()) {
    return s;
  }
  if (invocation.global().json) return invocation.PrintJson(response);
  std::vector<std::vector<std::string>> rows;
  for (const v1::Workload& w : response.workloads()) rows.push_back(WorkloadRow(w));
  invocation.out() << FormatTable({"NAME", "POLICY", "KIND", "SAMPLES"}, rows);
  return absl::OkStatus();
}

absl::Status RunWorkloadGet(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "NAME"); !s.ok()) return s;
  absl::StatusOr<v1::Workload> w = GetWorkloadRpc(invocation, invocation.args()[0]);
  if (!w.ok()) return w.status();
  if (invocation.global().json) return invocation.PrintJson(*w);
  invocation.out() << FormatTable({"NAME", "POLICY", "KIND", "SAMPLES"}, {WorkloadRow(*w)});
  return absl::OkStatus();
}

absl::Status RunRecommend(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 1, 1, "WORKLOAD"); !s.ok()) return s;
  std::string output = invocation.global().json ? "json" : "table";
  if (const std::string* o = invocation.flag("output")) output = *o;
  if (output != "json" && output != "yaml" && output != "table") {
    return UsageError(absl::StrCat("flag -o: \"", output, "\" is not table, json or yaml"));
  }
  v1::GetRecommendationRequest request;
  request.set_workload(invocation.args()[0]);
  v1::Recommendation rec;
  if (absl::Status s = invocation.Call("GetRecommendation",
                                       [&](grpc::ClientContext* context) {
                                         return invocation.autoscaler().GetRecommendation(
                                             context, request, &rec);
                                       });
      !s.ok()) {
    return s;
  }
  if (output == "json") return invocation.PrintJson(rec);
  if (output == "yaml") {
    absl::StatusOr<v1::Workload> w = GetWorkloadRpc(invocation, rec.workload());
    if (!w.ok()) return w.status();
    KubernetesOptions options;
    if (const std::string* url = invocation.flag("prometheus-url")) options.prometheus_url = *url;
    invocation.out() << RecommendationYaml(*w, rec, options);
    return absl::OkStatus();
  }
  auto row = [](const char* what, const v1::ResourceBounds& b, bool cpu) {
    auto q = [&](double v) { return cpu ? CpuQuantity(v) : MemoryQuantity(v); };
    return std::vector<std::string>{what, q(b.lower_bound()), q(b.target()), q(b.upper_bound())};
  };
  std::vector<std::vector<std::string>> rows = {row("cpu", rec.cpu_cores(), true),
                                                row("memory", rec.memory_bytes(), false)};
  if (rec.has_gpu_memory_bytes()) rows.push_back(row("gpu_memory", rec.gpu_memory_bytes(), false));
  invocation.out() << FormatTable({"RESOURCE", "LOWER", "TARGET", "UPPER"}, rows)
                   << "replicas: " << rec.replicas() << "  confidence: "
                   << FormatNumber(rec.confidence()) << "  policy: " << rec.policy() << "\n"
                   << rec.explanation() << "\n";
  return absl::OkStatus();
}

absl::Status RunReplay(const Invocation& invocation) {
  if (absl::Status s = CheckArgCount(invocation, 0, 0, ""); !s.ok()) return s;
  const std::string* trace = invocation.flag("trace");
  const std::string* path = invocation.flag("path");
  if (trace == nullptr) return UsageError("flag --trace: required (bitbrains, alibaba-genai, azure-llm)");
  if (path == nullptr) return UsageError("flag --path: required (the trace file or folder)");
  load_model::ReplayOptions options;
  absl::StatusOr<load_model::TraceKind> kind = load_model::ParseTraceKind(*trace);
  if (!kind.ok()) return UsageError(absl::StrCat("flag --trace: ", kind.status().message()));
  options.trace = *kind;
  options.path = *path;
  const std::string policy_name =
      invocation.flag("policy") != nullptr ? *invocation.flag("policy") : "evoscale";
  absl::StatusOr<load_model::Policy> policy = load_model::ParsePolicy(policy_name);
  if (!policy.ok()) return UsageError(absl::StrCat("flag --policy: ", policy.status().message()));
  options.policy = *policy;
  absl::StatusOr<load_model::ReplayReport> report = load_model::Replay(options);
  if (!report.ok()) return UsageError(absl::StrCat("replay: ", report.status().message()));
  if (invocation.global().json) {
    invocation.out() << report->ToJson() << "\n";
    return absl::OkStatus();
  }
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
      {"study create",
       "-f FILE [--name DISPLAY_NAME]",
       "Create a study from a JSON or YAML file holding a Study or a bare StudySpec.",
       {"file", "name"},
       RunStudyCreate},
      {"study list", "", "List all studies.", {}, RunStudyList},
      {"study get", "STUDY", "Show a study and its search space.", {}, RunStudyGet},
      {"study delete", "STUDY", "Delete a study and its trials.", {}, RunStudyDelete},
      {"study state", "STUDY active|inactive|completed", "Set a study's state.", {}, RunStudyState},
      {"trials list",
       "STUDY [--state STATE] [--page-size N]",
       "List a study's trials (all pages), optionally only those in STATE.",
       {"state", "page-size"},
       RunTrialsList},
      {"suggest",
       "STUDY [--count N] [--client-id ID]",
       "Ask for N trials to run (default 1) as client ID (default cli-HOSTNAME).",
       {"count", "client-id"},
       RunSuggest},
      {"measure",
       "TRIAL --step N METRIC=VALUE...",
       "Report an intermediate measurement of a trial.",
       {"step"},
       RunMeasure},
      {"complete",
       "TRIAL [METRIC=VALUE...] | TRIAL --infeasible REASON",
       "Complete a trial with final metrics (default: its latest measurement) or as infeasible.",
       {"infeasible"},
       RunComplete},
      {"stop", "TRIAL", "Ask for a trial to stop.", {}, RunStop},
      {"should-stop",
       "TRIAL",
       "Print whether a trial should stop early: true or false.",
       {},
       RunShouldStop},
      {"optimal", "STUDY", "List the study's optimal (Pareto-front) trials.", {}, RunOptimal},
      {"workload put",
       "NAME [--policy evoscale|vpa|hpa] [--kind serving|training] [--target-utilization X] "
       "[--min-replicas N] [--max-replicas N]",
       "Create or update an autoscaled workload.",
       {"policy", "kind", "target-utilization", "min-replicas", "max-replicas"},
       RunWorkloadPut},
      {"workload list", "", "List autoscaled workloads.", {}, RunWorkloadList},
      {"workload get", "NAME", "Show a workload.", {}, RunWorkloadGet},
      {"recommend",
       "WORKLOAD [-o table|json|yaml] [--prometheus-url URL]",
       "Show a workload's recommendation; -o yaml prints a VerticalPodAutoscaler and a KEDA "
       "ScaledObject.",
       {"output", "prometheus-url"},
       RunRecommend},
      {"replay",
       "--trace bitbrains|alibaba-genai|azure-llm --path PATH [--policy evoscale|vpa|hpa]",
       "Replay a trace through an autoscaling policy, offline, and report slack, OOMs and "
       "replica-hours.",
       {"trace", "path", "policy"},
       RunReplay},
  };
  return *kCommands;
}

// Command groups whose first word alone is not a command.
constexpr absl::string_view kGroups[] = {"study", "trials", "workload"};

// The command named by the first words of `words`, and how many words its name has.
std::optional<std::pair<const Command*, size_t>> FindCommand(
    const std::vector<std::string>& words) {
  for (const Command& command : Commands()) {
    std::vector<absl::string_view> name = absl::StrSplit(command.name, ' ');
    if (words.size() < name.size()) continue;
    if (std::equal(name.begin(), name.end(), words.begin())) {
      return std::make_pair(&command, name.size());
    }
  }
  return std::nullopt;
}

std::string SubcommandsOf(absl::string_view group) {
  std::vector<absl::string_view> names;
  for (const Command& command : Commands()) {
    std::pair<absl::string_view, absl::string_view> words =
        absl::StrSplit(command.name, absl::MaxSplits(' ', 1));
    if (words.first == group) names.push_back(words.second);
  }
  return absl::StrJoin(names, ", ");
}

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const Environment& env) {
  std::map<std::string, std::string> flags;
  CommandLine line;
  bool positional_only = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (positional_only || arg.size() < 2 || arg[0] != '-' || LooksLikeNegativeNumber(arg)) {
      line.words.push_back(arg);
      continue;
    }
    if (arg == "--") {
      positional_only = true;
      continue;
    }
    std::string name;
    std::optional<std::string> value;
    if (absl::StartsWith(arg, "--")) {
      absl::string_view rest = absl::string_view(arg).substr(2);
      if (size_t eq = rest.find('='); eq != absl::string_view::npos) {
        name = std::string(rest.substr(0, eq));
        value = std::string(rest.substr(eq + 1));
      } else {
        name = std::string(rest);
      }
    } else if (arg == "-f") {
      name = "file";
    } else if (arg == "-h") {
      name = "help";
    } else if (arg == "-o") {
      name = "output";
    } else {
      return UsageError(absl::StrCat("unknown flag ", arg));
    }
    const FlagInfo* info = FindFlag(name);
    if (info == nullptr) return UsageError(absl::StrCat("unknown flag --", name));
    if (info->takes_value && !value.has_value()) {
      if (i + 1 >= args.size()) return UsageError(absl::StrCat("flag --", name, " needs a value"));
      value = args[++i];
    } else if (!info->takes_value && value.has_value()) {
      return UsageError(absl::StrCat("flag --", name, " takes no value"));
    }
    if (!flags.emplace(name, value.value_or("")).second) {
      return UsageError(absl::StrCat("flag --", name, " given twice"));
    }
  }

  GlobalOptions& global = line.global;
  if (!env.server.empty()) global.server = env.server;
  global.token = env.token;
  for (auto& [name, value] : flags) {
    if (name == "server") {
      if (value.empty()) return UsageError("flag --server: the address is empty");
      global.server = value;
    } else if (name == "token") {
      global.token = value;
    } else if (name == "timeout") {
      absl::StatusOr<double> seconds = ParseTimeout(value);
      if (!seconds.ok()) return seconds.status();
      global.timeout_seconds = *seconds;
    } else if (name == "json") {
      global.json = true;
    } else if (name == "help") {
      global.help = true;
    } else {
      line.flags.emplace(name, std::move(value));
    }
  }
  return line;
}

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
  if (parts.size() != 4 || parts[0] != "studies" || parts[1].empty() || parts[2] != "trials" ||
      parts[3].empty()) {
    return UsageError(
        absl::StrCat("trial \"", name, "\": expected a trial name studies/ID/trials/ID"));
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
      "Commands:\n";
  for (const Command& command : Commands()) {
    absl::StrAppend(&text, "  ", command.name, command.synopsis.empty() ? "" : " ",
                    command.synopsis, "\n      ", command.summary, "\n");
  }
  absl::StrAppend(
      &text,
      "  help\n"
      "      Print this text.\n"
      "\n"
      "STUDY is a study name, studies/ID, or just its ID; TRIAL is a trial name,\n"
      "studies/ID/trials/ID.\n"
      "\n"
      "Global flags (anywhere on the line):\n"
      "  --server HOST:PORT  evoscaled's gRPC address (default $EVOSCALE_SERVER, else ",
      kDefaultServer,
      ")\n"
      "  --token TOKEN       bearer token sent with every call (default "
      "$EVOSCALE_TOKEN)\n"
      "  --json              print results as protobuf JSON, one message a line\n"
      "  --timeout SECONDS   deadline of each call (default ",
      FormatNumber(kDefaultTimeoutSeconds),
      ")\n"
      "  -h, --help          print this text\n"
      "\n"
      "Exit status: 0 success, 1 the server returned an error, 2 bad usage or input.\n");
  return text;
}

int Run(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
        std::ostream& err) {
  constexpr int kRpcFailed = 1;
  constexpr int kBadUsage = 2;
  absl::StatusOr<CommandLine> line = ParseCommandLine(args, env);
  if (!line.ok()) {
    err << "evoscale: " << line.status().message() << " (see evoscale help)\n";
    return kBadUsage;
  }
  const std::vector<std::string>& words = line->words;
  if (line->global.help || (!words.empty() && words[0] == "help")) {
    out << UsageText();
    return 0;
  }
  if (words.empty()) {
    err << UsageText();
    return kBadUsage;
  }
  std::optional<std::pair<const Command*, size_t>> found = FindCommand(words);
  if (!found.has_value()) {
    for (absl::string_view group : kGroups) {
      if (words[0] != group) continue;
      if (words.size() == 1) {
        err << "evoscale: " << group << ": missing subcommand (one of " << SubcommandsOf(group)
            << ")\n";
      } else {
        err << "evoscale: " << group << ": unknown subcommand \"" << words[1] << "\" (one of "
            << SubcommandsOf(group) << ")\n";
      }
      return kBadUsage;
    }
    err << "evoscale: unknown command \"" << words[0] << "\" (see evoscale help)\n";
    return kBadUsage;
  }
  const auto [command, name_words] = *found;
  for (const auto& [flag, value] : line->flags) {
    if (std::find(command->flags.begin(), command->flags.end(), flag) == command->flags.end()) {
      err << "evoscale: " << command->name << ": flag --" << flag
          << " does not apply (usage: evoscale " << command->name << " " << command->synopsis
          << ")\n";
      return kBadUsage;
    }
  }

  // The channel connects lazily, on the first call; commands check their arguments first.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(line->global.server, grpc::InsecureChannelCredentials());
  std::unique_ptr<StudyService::Stub> stub = StudyService::NewStub(channel);
  std::unique_ptr<v1::AutoscalerService::Stub> autoscaler = v1::AutoscalerService::NewStub(channel);
  Invocation invocation(line->global, env, *stub,
                        std::vector<std::string>(words.begin() + name_words, words.end()),
                        line->flags, out, autoscaler.get());
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
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) == 0) env.hostname = hostname;
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return Run(args, env, out, err);
}

}  // namespace evoscale::cli
