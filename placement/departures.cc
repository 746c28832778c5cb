#include "placement/departures.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace evoscale::placement {
namespace {

constexpr int kLowestRank = 3;

// Where a pod of the trace stands.
struct PodState {
  PodRequest request;
  int rank = 0;      // PriorityRank, or 0 for all without priorities
  int arrival = 0;   // position in arrival order
  int node = -1;     // while running
  GpuMask gpus = 0;  // while running
  int64_t epoch = 0;  // bumped by each placement and eviction: stale departures are skipped
  int64_t first_placed = -1;
};

// A scheduled departure.
struct Departure {
  int64_t time;
  int pod;
  int64_t epoch;
  bool operator>(const Departure& other) const {
    return std::tie(time, pod) > std::tie(other.time, other.pod);
  }
};

// Victims on one node and what evicting them costs.
struct Eviction {
  int node = -1;
  std::vector<int> victims;
  int64_t cost = 0;  // GPU-milli x seconds left
  int tie_rank = 0;

  bool BetterThan(const Eviction& other) const {
    return std::make_tuple(victims.size(), cost, tie_rank) <
           std::make_tuple(other.victims.size(), other.cost, other.tie_rank);
  }
};

using Shape = std::tuple<int64_t, int64_t, int, int, bool, uint32_t>;

Shape ShapeOf(const PodRequest& pod) {
  return {pod.cpu_milli, pod.memory_mib, pod.num_gpus, pod.gpu_milli, pod.any_model,
          pod.model_mask};
}

// The nearest-rank percentile of sorted `values`.
double Percentile(const std::vector<int64_t>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::max<size_t>(rank, 1) - 1]);
}

absl::Status CheckTimes(const std::vector<PodSpec>& pods) {
  if (pods.empty()) return absl::InvalidArgumentError("no pods to replay");
  for (const PodSpec& pod : pods) {
    if (pod.creation_time < 0 || pod.deletion_time < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pod \"", pod.name, "\": no ", pod.creation_time < 0 ? "creation_time" : "deletion_time"));
    }
    if (pod.deletion_time < pod.creation_time) {
      return absl::InvalidArgumentError(absl::StrCat("pod \"", pod.name, "\": deletion_time ",
                                                     pod.deletion_time, " < creation_time ",
                                                     pod.creation_time));
    }
  }
  return absl::OkStatus();
}

class DeparturesReplay {
 public:
  DeparturesReplay(Cluster cluster, const std::vector<PodSpec>& pods,
                   const DeparturesOptions& options)
      : cluster_(std::move(cluster)),
        specs_(pods),
        options_(options),
        fragmentation_(TypicalPods(pods, cluster_, options.typical)),
        running_on_node_(cluster_.nodes().size()) {
    policy_ = options.policy == PolicyKind::kEvoscale
                  ? MakeEvoscalePolicy(fragmentation_, options.evoscale)
                  : MakeBaselinePolicy(options.policy, fragmentation_, options.seed);
    arrivals_.resize(pods.size());
    for (size_t i = 0; i < pods.size(); ++i) arrivals_[i] = static_cast<int>(i);
    std::stable_sort(arrivals_.begin(), arrivals_.end(), [&](int a, int b) {
      return pods[a].creation_time < pods[b].creation_time;
    });
    states_.resize(pods.size());
    for (size_t k = 0; k < arrivals_.size(); ++k) {
      PodState& state = states_[arrivals_[k]];
      state.request = cluster_.Resolve(pods[arrivals_[k]]);
      state.rank = options.priorities ? PriorityRank(pods[arrivals_[k]].qos) : 0;
      state.arrival = static_cast<int>(k);
    }
  }

  DeparturesReport Run();

 private:
  bool preemption() const { return options_.priorities && options_.preemption; }
  void Arrive(int pod, int64_t now);
  void DepartAt(int64_t now);
  void Retry(int64_t now);
  bool TryPlace(int pod, int64_t now);
  void Bind(int pod, const Placement& placement, int64_t now);
  void Evict(int pod, int64_t now);
  std::optional<Eviction> FindEviction(int pod, int64_t now) const;
  std::optional<Eviction> OneVictim(int pod, int64_t now) const;
  std::optional<Eviction> GreedyVictims(int pod, int node, int64_t now) const;
  int64_t CostOf(int pod, int64_t now) const {
    return states_[pod].request.TotalGpuMilli() * (specs_[pod].deletion_time - now);
  }
  DeparturesReport Finish(int64_t end_time);

  // Constant after construction.
  Cluster cluster_;
  const std::vector<PodSpec>& specs_;
  const DeparturesOptions options_;
  const FragmentationModel fragmentation_;
  std::unique_ptr<Policy> policy_;
  std::vector<int> arrivals_;  // pod indices by creation_time, then trace order
  // The simulation's state.
  std::vector<PodState> states_;
  std::vector<std::vector<int>> running_on_node_;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<Departure>> departures_;
  std::set<std::pair<int, int>> pending_;  // (rank, arrival)
  int64_t preemptions_ = 0;
  int64_t evicted_pods_ = 0;
  int64_t evicted_gpu_milli_seconds_ = 0;
};

DeparturesReport DeparturesReplay::Run() {
  size_t next = 0;
  int64_t now = 0;
  while (next < arrivals_.size() || !departures_.empty()) {
    const bool depart =
        !departures_.empty() &&
        (next == arrivals_.size() ||
         departures_.top().time <= specs_[arrivals_[next]].creation_time);
    if (depart) {
      now = departures_.top().time;
      DepartAt(now);
      Retry(now);
    } else {
      now = specs_[arrivals_[next]].creation_time;
      Arrive(arrivals_[next++], now);
    }
  }
  return Finish(now);
}

void DeparturesReplay::Arrive(int pod, int64_t now) {
  if (!TryPlace(pod, now)) pending_.insert({states_[pod].rank, states_[pod].arrival});
}

// Every departure at `now`; skips those of pods evicted since they were scheduled.
void DeparturesReplay::DepartAt(int64_t now) {
  while (!departures_.empty() && departures_.top().time == now) {
    const Departure departure = departures_.top();
    departures_.pop();
    PodState& state = states_[departure.pod];
    if (departure.epoch != state.epoch || state.node < 0) continue;
    cluster_.Unbind(state.request, {state.node, state.gpus});
    std::vector<int>& running = running_on_node_[state.node];
    running.erase(std::find(running.begin(), running.end(), departure.pod));
    state.node = -1;
  }
}

// The pending queue in (rank, arrival) order; a shape that failed is not tried again until an
// eviction frees room (only higher or equal ranks came before it, so later pods of the shape
// have no more to evict).
void DeparturesReplay::Retry(int64_t now) {
  absl::flat_hash_set<Shape> failed;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const int pod = arrivals_[it->second];
    if (specs_[pod].deletion_time <= now) {
      it = pending_.erase(it);
      continue;
    }
    const Shape shape = ShapeOf(states_[pod].request);
    const int64_t evicted_before = evicted_pods_;
    if (!failed.contains(shape) && TryPlace(pod, now)) {
      it = pending_.erase(it);
    } else {
      failed.insert(shape);
      ++it;
    }
    if (evicted_pods_ != evicted_before) failed.clear();
  }
}

bool DeparturesReplay::TryPlace(int pod, int64_t now) {
  const PodRequest& request = states_[pod].request;
  if (std::optional<Placement> placement = policy_->Place(cluster_, request)) {
    Bind(pod, *placement, now);
    return true;
  }
  if (!preemption() || states_[pod].rank == kLowestRank) return false;
  std::optional<Eviction> eviction = FindEviction(pod, now);
  if (!eviction) return false;
  for (int victim : eviction->victims) Evict(victim, now);
  ++preemptions_;
  Bind(pod, {eviction->node, BestFitGpus(cluster_.node(eviction->node), request)}, now);
  return true;
}

void DeparturesReplay::Bind(int pod, const Placement& placement, int64_t now) {
  PodState& state = states_[pod];
  cluster_.Bind(state.request, placement);
  state.node = placement.node;
  state.gpus = placement.gpus;
  ++state.epoch;
  if (state.first_placed < 0) state.first_placed = now;
  running_on_node_[placement.node].push_back(pod);
  departures_.push({specs_[pod].deletion_time, pod, state.epoch});
}

void DeparturesReplay::Evict(int pod, int64_t now) {
  PodState& state = states_[pod];
  cluster_.Unbind(state.request, {state.node, state.gpus});
  std::vector<int>& running = running_on_node_[state.node];
  running.erase(std::find(running.begin(), running.end(), pod));
  state.node = -1;
  ++state.epoch;
  ++evicted_pods_;
  evicted_gpu_milli_seconds_ += CostOf(pod, now);
  pending_.insert({state.rank, state.arrival});
}

std::optional<Eviction> DeparturesReplay::FindEviction(int pod, int64_t now) const {
  if (std::optional<Eviction> one = OneVictim(pod, now)) return one;
  std::optional<Eviction> best;
  for (int node = 0; node < static_cast<int>(cluster_.nodes().size()); ++node) {
    std::optional<Eviction> candidate = GreedyVictims(pod, node, now);
    if (candidate && (!best || candidate->BetterThan(*best))) best = std::move(candidate);
  }
  return best;
}

// The cheapest single lower-class pod whose eviction makes room, over every node.
std::optional<Eviction> DeparturesReplay::OneVictim(int pod, int64_t now) const {
  const PodState& state = states_[pod];
  std::optional<Eviction> best;
  for (int node = 0; node < static_cast<int>(cluster_.nodes().size()); ++node) {
    for (int victim : running_on_node_[node]) {
      const PodState& other = states_[victim];
      if (other.rank <= state.rank) continue;
      if (!Fits(WithoutPod(cluster_.node(node), other.request, other.gpus), state.request)) {
        continue;
      }
      Eviction candidate{node, {victim}, CostOf(victim, now), cluster_.tie_rank(node)};
      if (!best || candidate.BetterThan(*best)) best = std::move(candidate);
    }
  }
  return best;
}

// On one node: lower-class pods, largest request first, until the pod fits; then each victim,
// dearest first, put back if the pod still fits without evicting it.
std::optional<Eviction> DeparturesReplay::GreedyVictims(int pod, int node, int64_t now) const {
  const PodState& state = states_[pod];
  const NodeState& start = cluster_.node(node);
  if (state.request.UsesGpu() &&
      (start.num_gpus < state.request.num_gpus || !ModelAllowed(start, state.request))) {
    return std::nullopt;
  }
  std::vector<int> lower;
  for (int victim : running_on_node_[node]) {
    if (states_[victim].rank > state.rank) lower.push_back(victim);
  }
  std::stable_sort(lower.begin(), lower.end(), [&](int a, int b) {
    const PodRequest& x = states_[a].request;
    const PodRequest& y = states_[b].request;
    return std::make_pair(x.TotalGpuMilli(), x.cpu_milli) >
           std::make_pair(y.TotalGpuMilli(), y.cpu_milli);
  });
  Eviction eviction{node, {}, 0, cluster_.tie_rank(node)};
  NodeState freed = start;
  for (int victim : lower) {
    if (Fits(freed, state.request)) break;
    freed = WithoutPod(freed, states_[victim].request, states_[victim].gpus);
    eviction.victims.push_back(victim);
  }
  if (!Fits(freed, state.request)) return std::nullopt;
  std::stable_sort(eviction.victims.begin(), eviction.victims.end(),
                   [&](int a, int b) { return CostOf(a, now) > CostOf(b, now); });
  for (size_t i = 0; i < eviction.victims.size();) {
    const PodState& victim = states_[eviction.victims[i]];
    const NodeState kept = WithPod(freed, victim.request, victim.gpus);
    if (Fits(kept, state.request)) {
      freed = kept;
      eviction.victims.erase(eviction.victims.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  for (int victim : eviction.victims) eviction.cost += CostOf(victim, now);
  return eviction;
}

DeparturesReport DeparturesReplay::Finish(int64_t end_time) {
  DeparturesReport report;
  report.policy = std::string(PolicyKindName(options_.policy));
  report.priorities = options_.priorities;
  report.preemption = preemption();
  report.nodes = static_cast<int64_t>(cluster_.nodes().size());
  report.total_gpus = cluster_.total_gpus();
  report.pods = static_cast<int64_t>(specs_.size());
  std::vector<int64_t> ls_delays;
  for (size_t pod = 0; pod < specs_.size(); ++pod) {
    const PodState& state = states_[pod];
    const bool ls = specs_[pod].qos == QosClass::kLatencySensitive;
    report.ls_pods += ls ? 1 : 0;
    if (state.first_placed < 0) continue;
    ++report.placed_pods;
    const int64_t delay = state.first_placed - specs_[pod].creation_time;
    report.delayed_pods += delay > 0 ? 1 : 0;
    if (ls) ls_delays.push_back(delay);
  }
  std::sort(ls_delays.begin(), ls_delays.end());
  report.never_placed_pods = report.pods - report.placed_pods;
  report.ls_placed_pods = static_cast<int64_t>(ls_delays.size());
  report.ls_delay_median_seconds = Percentile(ls_delays, 0.5);
  report.ls_delay_p99_seconds = Percentile(ls_delays, 0.99);
  report.preemptions = preemptions_;
  report.evicted_pods = evicted_pods_;
  report.evicted_gpu_hours =
      static_cast<double>(evicted_gpu_milli_seconds_) / (kMilliPerGpu * 3600.0);
  report.end_time = end_time;
  return report;
}

}  // namespace

int PriorityRank(QosClass qos) {
  switch (qos) {
    case QosClass::kLatencySensitive:
      return 0;
    case QosClass::kGuaranteed:
      return 1;
    case QosClass::kBurstable:
      return 2;
    case QosClass::kBestEffort:
    case QosClass::kUnspecified:
      return kLowestRank;
  }
  return kLowestRank;
}

absl::StatusOr<DeparturesReport> ReplayDepartures(const std::vector<NodeSpec>& nodes,
                                                  const std::vector<PodSpec>& pods,
                                                  const DeparturesOptions& options) {
  if (absl::Status times = CheckTimes(pods); !times.ok()) return times;
  absl::StatusOr<Cluster> cluster = Cluster::Create(nodes);
  if (!cluster.ok()) return cluster.status();
  DeparturesReplay replay(*std::move(cluster), pods, options);
  return replay.Run();
}

}  // namespace evoscale::placement
