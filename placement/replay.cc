#include "placement/replay.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace evoscale::placement {
namespace {

// What the replay records after each pod.
struct Event {
  int bucket;  // arrived% rounded half to even, as Python's round()
  double allocated_percent;
  double fragmentation_amount;
  double fragmentation_ratio;
  int64_t failed_pods;
  double gpu_utilization_stddev;
  double cpu_utilization_stddev;
};

// The population standard deviation of the nodes' shares in use, kept as sums so that a bind
// updates it in O(1).
class Spread {
 public:
  explicit Spread(size_t nodes) : shares_(nodes, -1) {}
  // `share` in [0, 1]; a node never set does not count.
  void Set(size_t node, double share) {
    double& old = shares_[node];
    if (old >= 0) {
      sum_ -= old;
      sum_squares_ -= old * old;
    } else {
      ++count_;
    }
    old = share;
    sum_ += share;
    sum_squares_ += share * share;
  }
  // Percentage points.
  double StddevPercent() const {
    if (count_ == 0) return 0;
    const double mean = sum_ / static_cast<double>(count_);
    return 100 * std::sqrt(std::max(0.0, sum_squares_ / static_cast<double>(count_) - mean * mean));
  }

 private:
  std::vector<double> shares_;
  double sum_ = 0;
  double sum_squares_ = 0;
  int64_t count_ = 0;
};

double GpuShareInUse(const NodeState& node) {
  const double capacity = static_cast<double>(node.num_gpus) * kMilliPerGpu;
  return 1 - static_cast<double>(node.GpuMilliLeft()) / capacity;
}

double CpuShareInUse(const NodeState& node);

// A node's shares in use, into the spreads (GPU over the nodes with GPUs, CPU over all).
void SetShares(const NodeState& node, size_t index, Spread& gpu, Spread& cpu) {
  if (node.num_gpus > 0) gpu.Set(index, GpuShareInUse(node));
  cpu.Set(index, CpuShareInUse(node));
}

double CpuShareInUse(const NodeState& node) {
  return node.cpu_capacity > 0 ? 1 - static_cast<double>(node.cpu_left) /
                                         static_cast<double>(node.cpu_capacity)
                               : 0;
}

// The mean over `events` whose bucket is in [low, high]; nullopt when there are none.
std::optional<ReplayPoint> MeanOf(const std::vector<Event>& events, int low, int high) {
  ReplayPoint point;
  int64_t count = 0;
  for (const Event& event : events) {
    if (event.bucket < low || event.bucket > high) continue;
    ++count;
    point.allocated_percent += event.allocated_percent;
    point.fragmentation_amount += event.fragmentation_amount;
    point.fragmentation_ratio += event.fragmentation_ratio;
    point.failed_pods = event.failed_pods;
    point.gpu_utilization_stddev += event.gpu_utilization_stddev;
    point.cpu_utilization_stddev += event.cpu_utilization_stddev;
  }
  if (count == 0) return std::nullopt;
  point.allocated_percent /= static_cast<double>(count);
  point.unallocated_percent = 100 - point.allocated_percent;
  point.fragmentation_amount /= static_cast<double>(count);
  point.fragmentation_ratio /= static_cast<double>(count);
  point.gpu_utilization_stddev /= static_cast<double>(count);
  point.cpu_utilization_stddev /= static_cast<double>(count);
  return point;
}

std::vector<ReplayPoint> Points(const std::vector<Event>& events) {
  std::vector<ReplayPoint> points;
  if (events.empty()) return points;
  const int last = events.back().bucket;  // arrival only grows
  for (int percent = 0; percent <= last; ++percent) {
    std::optional<ReplayPoint> point = MeanOf(events, percent, percent);
    if (!point) point = MeanOf(events, percent - 1, percent + 1);
    if (!point) continue;
    point->arrived_percent = percent;
    points.push_back(*point);
  }
  return points;
}

std::unique_ptr<Policy> MakePolicy(const PlacementReplayOptions& options,
                                   const FragmentationModel& fragmentation) {
  if (options.policy == PolicyKind::kEvoscale) {
    return MakeEvoscalePolicy(fragmentation, options.evoscale);
  }
  return MakeBaselinePolicy(options.policy, fragmentation, options.seed);
}

// The simulator's node order for ties: nodes sorted by name get a random permutation.
absl::Status SetRandomTieRanks(const std::vector<NodeSpec>& nodes, Cluster& cluster, Rng& rng) {
  std::vector<int> by_name(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) by_name[i] = static_cast<int>(i);
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](int a, int b) { return nodes[a].name < nodes[b].name; });
  std::vector<int> ranks(nodes.size());
  for (size_t i = 0; i < by_name.size(); ++i) ranks[by_name[i]] = static_cast<int>(i);
  for (size_t i = ranks.size(); i > 1; --i) std::swap(ranks[i - 1], ranks[rng.Below(i)]);
  // A permutation of a permutation: cannot fail.
  return cluster.SetTieRanks(std::move(ranks));
}

}  // namespace

std::optional<ReplayPoint> PlacementReport::PointAt(int percent) const {
  for (const ReplayPoint& point : points) {
    if (point.arrived_percent == percent) return point;
  }
  return std::nullopt;
}

std::vector<PodSpec> TunedWorkload(std::vector<PodSpec> pods, int64_t total_gpus, double tune,
                                   Rng& rng) {
  std::stable_sort(pods.begin(), pods.end(),
                   [](const PodSpec& a, const PodSpec& b) { return a.name < b.name; });
  const std::vector<PodSpec> originals = pods;
  for (size_t i = pods.size(); i > 1; --i) std::swap(pods[i - 1], pods[rng.Below(i)]);
  int64_t total = 0;
  for (const PodSpec& pod : pods) total += pod.TotalGpuMilli();
  const double target = tune * static_cast<double>(total_gpus * kMilliPerGpu);
  while (static_cast<double>(total) > target && !pods.empty()) {
    const size_t index = rng.Below(pods.size());
    total -= pods[index].TotalGpuMilli();
    pods.erase(pods.begin() + static_cast<std::ptrdiff_t>(index));
  }
  if (static_cast<double>(total) >= target || originals.empty()) return pods;
  for (int64_t copy = 0;; ++copy) {
    PodSpec pod = originals[rng.Below(originals.size())];
    // The simulator's rule: the next pod's milli per GPU (not its total) must fit.
    if (static_cast<double>(total + pod.gpu_milli) > target) break;
    total += pod.TotalGpuMilli();
    pod.name = absl::StrCat(pod.name, "-tuned-", copy);
    pods.push_back(std::move(pod));
  }
  return pods;
}

absl::StatusOr<PlacementReport> ReplayPlacement(const std::vector<NodeSpec>& nodes,
                                                const std::vector<PodSpec>& pods,
                                                const PlacementReplayOptions& options) {
  if (!(options.tune > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("tune ", options.tune, ": must be > 0"));
  }
  if (pods.empty()) return absl::InvalidArgumentError("no pods to replay");
  absl::StatusOr<Cluster> cluster = Cluster::Create(nodes);
  if (!cluster.ok()) return cluster.status();
  if (cluster->total_gpus() == 0) return absl::InvalidArgumentError("the cluster has no GPUs");

  // The metric's typical pods are always the simulator's; the policy's may be weighted.
  const FragmentationModel metric(TypicalPods(pods, *cluster));
  const FragmentationModel weighted(TypicalPods(pods, *cluster, options.typical));
  std::unique_ptr<Policy> policy = MakePolicy(options, weighted);

  Rng rng(options.seed);
  const std::vector<PodSpec> workload =
      TunedWorkload(pods, cluster->total_gpus(), options.tune, rng);
  if (absl::Status ranked = SetRandomTieRanks(nodes, *cluster, rng); !ranked.ok()) return ranked;

  PlacementReport report;
  report.policy = std::string(PolicyKindName(options.policy));
  if (options.policy == PolicyKind::kEvoscale) {
    report.secondary = std::string(SecondaryName(options.evoscale.secondary));
  }
  report.seed = options.seed;
  report.tune = options.tune;
  report.nodes = static_cast<int64_t>(nodes.size());
  report.total_gpus = cluster->total_gpus();
  report.original_pods = static_cast<int64_t>(pods.size());
  report.submitted_pods = static_cast<int64_t>(workload.size());

  std::vector<double> node_fragmentation;
  double fragmentation = 0;
  Spread gpu_spread(cluster->nodes().size());
  Spread cpu_spread(cluster->nodes().size());
  for (size_t i = 0; i < cluster->nodes().size(); ++i) {
    node_fragmentation.push_back(metric.Amount(cluster->node(static_cast<int>(i))));
    fragmentation += node_fragmentation.back();
    SetShares(cluster->node(static_cast<int>(i)), i, gpu_spread, cpu_spread);
  }
  const double capacity_milli = static_cast<double>(cluster->total_gpus() * kMilliPerGpu);
  std::vector<Event> events;
  events.reserve(workload.size());
  for (const PodSpec& spec : workload) {
    const PodRequest pod = cluster->Resolve(spec);
    report.submitted_gpu_milli += pod.TotalGpuMilli();
    if (std::optional<Placement> placement = policy->Place(*cluster, pod)) {
      cluster->Bind(pod, *placement);
      ++report.placed_pods;
      double& amount = node_fragmentation[placement->node];
      fragmentation -= amount;
      const NodeState& node = cluster->node(placement->node);
      amount = metric.Amount(node);
      fragmentation += amount;
      SetShares(node, static_cast<size_t>(placement->node), gpu_spread, cpu_spread);
    } else {
      ++report.failed_pods;
    }
    const double free_milli = capacity_milli - static_cast<double>(cluster->used_gpu_milli());
    Event event;
    event.bucket = static_cast<int>(
        std::nearbyint(100.0 * static_cast<double>(report.submitted_gpu_milli) / capacity_milli));
    event.allocated_percent =
        100.0 * static_cast<double>(cluster->used_gpu_milli()) / capacity_milli;
    event.fragmentation_amount = fragmentation;
    event.fragmentation_ratio = free_milli > 0 ? 100.0 * fragmentation / free_milli : 0;
    event.failed_pods = report.failed_pods;
    event.gpu_utilization_stddev = gpu_spread.StddevPercent();
    event.cpu_utilization_stddev = cpu_spread.StddevPercent();
    events.push_back(event);
  }
  report.arrived_percent = 100.0 * static_cast<double>(report.submitted_gpu_milli) / capacity_milli;
  report.allocated_percent =
      100.0 * static_cast<double>(cluster->used_gpu_milli()) / capacity_milli;
  report.points = Points(events);
  return report;
}

}  // namespace evoscale::placement
