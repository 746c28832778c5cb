// Trace replay: feeds a trace through an autoscaling policy online (at each step the policy
// has seen only earlier samples) and measures what the recommendations would have cost.
// This is what `evoscale replay` runs.
#ifndef EVOSCALE_LOAD_MODEL_REPLAY_H_
#define EVOSCALE_LOAD_MODEL_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "load_model/evoscale_policy.h"
#include "load_model/hpa.h"
#include "load_model/recommender.h"
#include "load_model/traces.h"
#include "load_model/vpa.h"

namespace evoscale::load_model {

// Binding names: "bitbrains", "alibaba-genai", "azure-llm".
enum class TraceKind { kBitbrains, kAlibabaGenAi, kAzureLlm };
absl::StatusOr<TraceKind> ParseTraceKind(std::string_view name);
std::string_view TraceKindName(TraceKind kind);
// Bitbrains is a per-VM (vertical) trace; the others are replica (horizontal) traces.
bool IsReplicaTrace(TraceKind kind);

struct ReplayOptions {
  TraceKind trace = TraceKind::kBitbrains;
  std::string path;  // Bitbrains: a VM file or the directory of them; Alibaba: the directory;
                     // Azure: the CSV file or its directory.
  Policy policy = Policy::kEvoscale;

  // Vertical traces: samples before first + warmup feed the policy but are not scored.
  absl::Duration warmup = absl::Hours(24);
  // Replica traces: the utilisation target (per replica) shared by every policy, and the
  // replica range.
  double target_utilization = 0.6;
  int min_replicas = 1;
  int max_replicas = 10000;
  // Replica traces: a replica added by a scaling decision serves only this long after it
  // (model loading; GPU inference replicas take minutes) and is paid for from the decision.
  // The evoscale policy is told it (it forecasts that far ahead); 0 = replicas serve at once.
  absl::Duration startup_delay = absl::ZeroDuration();

  // Policy settings; the replay overrides their target/min/max with the fields above.
  VpaOptions vpa;
  HpaOptions hpa;
  EvoscaleResourceOptions evoscale_resources;
  EvoscaleReplicaOptions evoscale_replicas;
  AzureLlmOptions azure;
};

// Results for one series (one VM, or the one replicated workload).
struct SeriesReport {
  std::string name;
  int64_t samples = 0;  // Scored samples/steps.
  // Vertical: mean over samples of max(0, (request - usage) / request).
  double relative_slack_cpu = 0;
  double relative_slack_memory = 0;
  int64_t oom_events = 0;                // Samples with memory usage above the memory limit.
  int64_t underprovisioned_samples = 0;  // Vertical: CPU usage above the CPU limit
                                         // (throttled); replicas: utilisation above the target.
  // Vertical, requests apart from limits (equal to the request figures when limit =
  // request): the same slack measured on the limit, and samples whose usage exceeded the
  // request (but not necessarily the limit: the node is overcommitted, not the container).
  double relative_slack_cpu_limit = 0;
  double relative_slack_memory_limit = 0;
  int64_t cpu_over_request_samples = 0;
  int64_t memory_over_request_samples = 0;
  int64_t changes = 0;                   // Recommendation changes (scaling actions).
  // Replica traces.
  double relative_slack_replicas = 0;    // Mean of max(0, (replicas - demand) / replicas).
  double replica_hours = 0;
  double minutes_over_target = 0;
  int64_t scaling_actions = 0;
};

struct ReplayReport {
  std::string policy;
  std::string trace;
  bool replica_trace = false;
  int64_t samples = 0;  // Scored, over all series.
  // Means over series of the per-series figures (vertical traces only).
  double relative_slack_cpu = 0;
  double relative_slack_memory = 0;
  // Sums over series (the "summed over VMs" figures).
  double relative_slack_cpu_sum = 0;
  double relative_slack_memory_sum = 0;
  int64_t oom_events = 0;
  double underprovisioned_fraction = 0;  // Underprovisioned samples / scored samples.
  int64_t changes = 0;
  // Vertical, sums over series of the limit slacks, and fractions of scored samples over
  // their request.
  double relative_slack_cpu_limit_sum = 0;
  double relative_slack_memory_limit_sum = 0;
  double cpu_over_request_fraction = 0;
  double memory_over_request_fraction = 0;
  // Replica traces.
  double relative_slack_replicas = 0;
  double replica_hours = 0;
  double minutes_over_target = 0;
  int64_t scaling_actions = 0;
  std::vector<SeriesReport> series;

  // One JSON object: policy, trace, relative_slack_cpu, relative_slack_memory, oom_events,
  // underprovisioned_fraction, changes, replica_hours, minutes_over_target, scaling_actions
  // (fields that do not apply to the trace are null), the sums, the limit and over-request
  // figures, and "series": [...].
  std::string ToJson() const;
};

// Reads the trace and replays it. INVALID_ARGUMENT for a policy that does not apply to the
// trace (vpa on a replica trace, hpa on a per-VM trace); NOT_FOUND / INVALID_ARGUMENT from
// the readers. Cost: linear in the trace (about a second for the ten Bitbrains VMs).
absl::StatusOr<ReplayReport> Replay(const ReplayOptions& options);

// The replay loops on data already in memory (for tests, benches and services).
// Every VM with a fresh recommender for `options.policy`, summed as Replay reports them
// (policy and trace named; the policy must have a resource recommender).
ReplayReport ReplayVms(const std::vector<VmTrace>& vms, const ReplayOptions& options);
SeriesReport ReplayVm(const VmTrace& vm, ResourceRecommender& recommender,
                      absl::Duration warmup);
// Every step drives the policy; only steps at or after `scored_from` (and before
// `scored_until`) are scored, so that a held-out part of a trace can be reported from the
// same online run. With a `startup_delay`, replicas a decision adds serve from the first
// step that starts at least that long after it; until then they are paid for (replica-hours)
// but serve nothing (utilisation and minutes over target count ready replicas only). A
// decision to remove replicas cancels starting ones first (the newest), then stops ready
// ones at once. The policy is told the replicas that served the last step in its sample and
// every replica, starting or ready, as the current count (what a Deployment's spec holds).
SeriesReport ReplayReplicas(const ReplicaTrace& trace, ReplicaRecommender& recommender,
                            double target_utilization, int min_replicas, int max_replicas,
                            absl::Time scored_from = absl::InfinitePast(),
                            absl::Time scored_until = absl::InfiniteFuture(),
                            absl::Duration startup_delay = absl::ZeroDuration());

// The recommenders Replay uses for `options.policy`; nullptr where the policy does not
// apply (vpa has no replica recommender, hpa no resource recommender).
std::unique_ptr<ResourceRecommender> MakeResourceRecommender(const ReplayOptions& options);
std::unique_ptr<ReplicaRecommender> MakeReplicaRecommender(const ReplayOptions& options);

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_REPLAY_H_
