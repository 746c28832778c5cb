// The workload commands: workload put, list and get, and recommend (AutoscalerService).

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "service/cli/command.h"
#include "service/cli/format.h"
#include "service/cli/kubernetes.h"
#include "service/cli/validators.h"

namespace evoscale::cli {
namespace {

// The most replicas `workload put` accepts for --min-replicas and --max-replicas.
constexpr int64_t kMaxReplicas = 100000;

CLI::Validator Utilization() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value;
        if (absl::SimpleAtod(text, &value) && value > 0 && value <= 1) return "";
        return absl::StrCat("\"", text, "\" is not in (0, 1]");
      },
      "");
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

void DefineWorkload(CLI::App& command, CommandArguments& arguments) {
  command.add_option("NAME", arguments.workload, "the workload's name, e.g. default/ranker")
      ->type_name("")
      ->required();
}

// A flag of `workload put` that sets one Workload field through `set` and records the field
// as given, so that RunWorkloadPut changes only what the line names.
template <typename T>
CLI::Option* AddWorkloadFlag(CLI::App& command, CommandArguments& arguments, const char* flag,
                             const char* field, void (v1::Workload::*set)(T),
                             const std::string& help) {
  v1::Workload* workload = &arguments.workload_settings;
  std::set<std::string>* given = &arguments.workload_flags;
  return command.add_option_function<T>(
      flag,
      [workload, given, set, field](T value) {
        (workload->*set)(value);
        given->insert(field);
      },
      help);
}

void DefineWorkloadPut(CLI::App& command, CommandArguments& arguments) {
  DefineWorkload(command, arguments);
  AddWorkloadFlag(command, arguments, "--policy", "policy", &v1::Workload::set_policy,
                  "evoscale (default), vpa or hpa")
      ->type_name("POLICY")
      ->transform(WorkloadPolicyName());
  AddWorkloadFlag(command, arguments, "--kind", "kind", &v1::Workload::set_kind,
                  "serving (default) or training")
      ->type_name("KIND")
      ->transform(WorkloadKindName());
  AddWorkloadFlag(command, arguments, "--target-utilization", "target_utilization",
                  &v1::Workload::set_target_utilization,
                  "the utilization replicas are sized for, in (0, 1]")
      ->type_name("X")
      ->check(Utilization());
  AddWorkloadFlag(command, arguments, "--min-replicas", "min_replicas",
                  &v1::Workload::set_min_replicas, "the fewest replicas to recommend")
      ->type_name("N")
      ->check(IntegerIn(0, kMaxReplicas));
  AddWorkloadFlag(command, arguments, "--max-replicas", "max_replicas",
                  &v1::Workload::set_max_replicas, "the most replicas to recommend")
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
      {"--startup-delay-seconds", "startup_delay_seconds", &v1::Workload::set_startup_delay_seconds,
       0, 86400, true, "how long a new replica takes to serve (evoscale forecasts that far ahead)"},
      {"--demand-quantile", "demand_quantile", &v1::Workload::set_demand_quantile, 0, 1, false,
       "replicas cover this quantile of the demand forecast's errors (evoscale; 0: 0.75)"},
  };
  for (const auto& n : numbers) {
    AddWorkloadFlag(command, arguments, n.flag, n.field, n.set, n.help)
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
  if (has("demand_quantile")) w->set_demand_quantile(given.demand_quantile());
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

}  // namespace

std::vector<Command> WorkloadCommands() {
  return {
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
  };
}

}  // namespace evoscale::cli
