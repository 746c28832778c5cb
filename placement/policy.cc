#include "placement/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "placement/internal/score_cache.h"
#include "placement/rng.h"

namespace evoscale::placement {
namespace {

constexpr int64_t kMaxNodeScore = 100;
// The simulator normalises CPU and GPU by the largest node it knows (MaxSpecCpu, MaxSpecGpu).
constexpr double kMaxSpecCpu = 128000;
constexpr double kMaxSpecGpu = 8000;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The highest-scoring feasible node; among equal scores the lowest tie rank (the simulator's
// scheduler). -1 when none fits.
template <typename Score>
int BestNode(const Cluster& cluster, const PodRequest& pod, Score score) {
  int chosen = -1;
  int64_t best = std::numeric_limits<int64_t>::min();
  const std::vector<NodeState>& nodes = cluster.nodes();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (!Fits(nodes[i], pod)) continue;
    int64_t value = score(nodes[i]);
    if (chosen < 0 || value > best ||
        (value == best && cluster.tie_rank(i) < cluster.tie_rank(chosen))) {
      best = value;
      chosen = i;
    }
  }
  return chosen;
}

// A sharing pod's GPU uniformly among those with room (allocateGpuIdBasedOnRandomFit).
GpuMask RandomGpus(const NodeState& node, const PodRequest& pod, Rng& rng) {
  if (!pod.SharesGpu()) return BestFitGpus(node, pod);
  GpuMask chosen = 0;
  uint64_t seen = 0;
  for (int i = 0; i < node.num_gpus; ++i) {
    if (node.gpu_left[i] >= pod.gpu_milli && rng.Below(++seen) == 0) chosen = GpuMask{1} << i;
  }
  return chosen;
}

class RandomPolicy : public Policy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  std::optional<Placement> Place(const Cluster& cluster, const PodRequest& pod) override {
    // RandomScore's PreScore: one feasible node uniformly.
    int node = -1;
    uint64_t feasible = 0;
    for (int i = 0; i < static_cast<int>(cluster.nodes().size()); ++i) {
      if (Fits(cluster.node(i), pod) && rng_.Below(++feasible) == 0) node = i;
    }
    if (node < 0) return std::nullopt;
    return Placement{node, RandomGpus(cluster.node(node), pod, rng_)};
  }

 private:
  Rng rng_;
};

// A plugin's score, then best-fit GPUs.
class ScorePolicy : public Policy {
 public:
  using ScoreFn = int64_t (*)(const NodeState&, const PodRequest&);
  explicit ScorePolicy(ScoreFn score) : score_(score) {}
  std::optional<Placement> Place(const Cluster& cluster, const PodRequest& pod) override {
    int node = BestNode(cluster, pod, [&](const NodeState& state) { return score_(state, pod); });
    if (node < 0) return std::nullopt;
    return Placement{node, BestFitGpus(cluster.node(node), pod)};
  }

 private:
  ScoreFn score_;
};

// BestFit normalises its scores over the feasible nodes (NormalizeScore) before selectHost.
class BestFitPolicy : public Policy {
 public:
  BestFitPolicy() = default;
  std::optional<Placement> Place(const Cluster& cluster, const PodRequest& pod) override {
    const std::vector<NodeState>& nodes = cluster.nodes();
    raw_.assign(nodes.size(), 0);
    int64_t highest = std::numeric_limits<int64_t>::min();
    int64_t lowest = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!Fits(nodes[i], pod)) continue;
      raw_[i] = BestFitScore(nodes[i], pod);
      highest = std::max(highest, raw_[i]);
      lowest = std::min(lowest, raw_[i]);
    }
    const int64_t range = highest - lowest;
    int node = BestNode(cluster, pod, [&](const NodeState& state) {
      int64_t value = raw_[&state - nodes.data()];
      return range == 0 ? int64_t{0} : (value - lowest) * kMaxNodeScore / range;
    });
    if (node < 0) return std::nullopt;
    return Placement{node, BestFitGpus(cluster.node(node), pod)};
  }

 private:
  std::vector<int64_t> raw_;  // scratch, one per node
};

class FgdPolicy : public Policy {
 public:
  explicit FgdPolicy(const FragmentationModel& fragmentation) : fragmentation_(fragmentation) {}
  std::optional<Placement> Place(const Cluster& cluster, const PodRequest& pod) override {
    int node = BestNode(cluster, pod, [&](const NodeState& state) {
      return Score(cluster, static_cast<int>(&state - cluster.nodes().data()), pod).score;
    });
    if (node < 0) return std::nullopt;
    return Placement{node, Score(cluster, node, pod).gpus};
  }

 private:
  const FgdChoice& Score(const Cluster& cluster, int node, const PodRequest& pod) {
    return cache_.Get(cluster, node, pod,
                      [&] { return FgdScore(cluster.node(node), pod, fragmentation_); });
  }

  const FragmentationModel& fragmentation_;
  internal::ScoreCache<FgdChoice> cache_;
};

}  // namespace

absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name) {
  for (PolicyKind kind :
       {PolicyKind::kEvoscale, PolicyKind::kFgd, PolicyKind::kBestFit, PolicyKind::kPacking,
        PolicyKind::kDotProd, PolicyKind::kClustering, PolicyKind::kRandom}) {
    if (name == PolicyKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("policy \"", name,
                   "\": must be evoscale, fgd, bestfit, packing, dotprod, clustering or random"));
}

absl::string_view PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kEvoscale:
      return "evoscale";
    case PolicyKind::kFgd:
      return "fgd";
    case PolicyKind::kBestFit:
      return "bestfit";
    case PolicyKind::kPacking:
      return "packing";
    case PolicyKind::kDotProd:
      return "dotprod";
    case PolicyKind::kClustering:
      return "clustering";
    case PolicyKind::kRandom:
      return "random";
  }
  return "";
}

int64_t BestFitScore(const NodeState& node, const PodRequest& pod) {
  double left = 0.5 * static_cast<double>(node.cpu_left - pod.cpu_milli) / kMaxSpecCpu +
                0.5 * static_cast<double>(node.GpuMilliLeft() - pod.TotalGpuMilli()) / kMaxSpecGpu;
  return static_cast<int64_t>((1.0 - left) * kMaxNodeScore);
}

int64_t PackingScore(const NodeState& node, const PodRequest& pod) {
  if (!pod.UsesGpu()) return 0;
  const int fully_free = node.FullyFreeGpus();
  if (fully_free == node.num_gpus) {  // an empty node: the fewer GPUs the better
    return std::max<int64_t>(kMaxNodeScore / 3 - fully_free, fully_free);
  }
  std::array<int, kMaxGpusPerNode> order;
  for (int i = 0; i < node.num_gpus; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.begin() + node.num_gpus,
                   [&](int a, int b) { return node.gpu_left[a] < node.gpu_left[b]; });
  int wanted = pod.num_gpus;
  int free_used = 0;
  int64_t free_percent_on_used = 0;
  for (int k = 0; k < node.num_gpus && wanted > 0; ++k) {
    const int left = node.gpu_left[order[k]];
    if (left < pod.gpu_milli) continue;
    --wanted;
    if (left == kMilliPerGpu) ++free_used;
    free_percent_on_used += left * 100 / kMilliPerGpu;
  }
  if (wanted != 0) return 0;
  if (free_used > 0) {  // free GPUs of a used node
    return std::max<int64_t>(kMaxNodeScore / 2 - free_used, kMaxNodeScore / 3);
  }
  // Shared GPUs: the fuller the better.
  return std::max<int64_t>(kMaxNodeScore - free_percent_on_used / 10, kMaxNodeScore / 2);
}

int64_t DotProductScore(const NodeState& node, const PodRequest& pod) {
  if (node.cpu_left < pod.cpu_milli) return 0;
  double dot = static_cast<double>(node.cpu_left) / kMaxSpecCpu *
                   (static_cast<double>(pod.cpu_milli) / kMaxSpecCpu) +
               static_cast<double>(node.GpuMilliLeft()) / kMaxSpecGpu *
                   (static_cast<double>(pod.TotalGpuMilli()) / kMaxSpecGpu);
  return static_cast<int64_t>(kMaxNodeScore * (1 - dot / 2));
}

int64_t ClusteringScore(const NodeState& node, const PodRequest& pod) {
  if (!pod.UsesGpu()) return 0;
  const int kind = pod.SharesGpu() ? 0 : pod.num_gpus;
  int kinds = 0;
  for (int32_t count : node.pods_by_gpu_kind) kinds += count > 0 ? 1 : 0;
  const int64_t fullness = kMaxNodeScore / 4 *
                           (static_cast<int64_t>(kMaxSpecGpu) - node.GpuMilliLeft()) /
                           static_cast<int64_t>(kMaxSpecGpu);
  if (node.pods_by_gpu_kind[kind] > 0) {
    return fullness + (kinds == 1 ? kMaxNodeScore * 3 / 4 : kMaxNodeScore * 2 / 4);
  }
  return fullness + (kinds == 0 ? kMaxNodeScore / 4 : 0);
}

FgdChoice FgdScore(const NodeState& node, const PodRequest& pod,
                   const FragmentationModel& fragmentation) {
  const double before = fragmentation.Amount(node);
  auto score = [&](const NodeState& after) {
    return static_cast<int64_t>(Sigmoid((before - fragmentation.Amount(after)) / 1000) *
                                kMaxNodeScore);
  };
  if (!pod.SharesGpu()) {
    return {score(PackedWithPod(node, pod)), LowestFreeGpus(node, pod.num_gpus)};
  }
  FgdChoice best;
  for (int i = 0; i < node.num_gpus; ++i) {
    if (node.gpu_left[i] < pod.gpu_milli) continue;
    const GpuMask gpus = GpuMask{1} << i;
    const int64_t value = score(WithPod(node, pod, gpus));
    if (best.gpus == 0 || value > best.score) best = {value, gpus};
  }
  return best;
}

std::unique_ptr<Policy> MakeBaselinePolicy(PolicyKind kind, const FragmentationModel& fragmentation,
                                           uint64_t seed) {
  switch (kind) {
    case PolicyKind::kRandom:
      return std::make_unique<RandomPolicy>(seed);
    case PolicyKind::kDotProd:
      return std::make_unique<ScorePolicy>(DotProductScore);
    case PolicyKind::kClustering:
      return std::make_unique<ScorePolicy>(ClusteringScore);
    case PolicyKind::kPacking:
      return std::make_unique<ScorePolicy>(PackingScore);
    case PolicyKind::kBestFit:
      return std::make_unique<BestFitPolicy>();
    case PolicyKind::kFgd:
      return std::make_unique<FgdPolicy>(fragmentation);
    case PolicyKind::kEvoscale:
      break;
  }
  return nullptr;
}

}  // namespace evoscale::placement
