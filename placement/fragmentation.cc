#include "placement/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_join.h"

namespace evoscale::placement {
namespace {

// A request shape as the simulator's PodResource keys it.
using Shape = std::tuple<int64_t, int, int, std::string>;  // cpu, milli per GPU, GPUs, spec

// The memo forgets everything past this many nodes' states (a replay of openb needs ~10^5).
constexpr size_t kMaxMemo = size_t{1} << 22;
constexpr int64_t kMaxMemoCpu = int64_t{1} << 34;

}  // namespace

std::vector<TypicalPod> TypicalPods(const std::vector<PodSpec>& pods, const Cluster& cluster,
                                    const TypicalPodsOptions& options) {
  std::map<Shape, double> counts;
  std::map<Shape, const PodSpec*> example;
  double total = 0;
  for (const PodSpec& pod : pods) {
    if (!options.include_cpu_pods && pod.num_gpus == 0) continue;
    double weight = 1;
    if (options.gpu_weight > 0 && pod.gpu_milli == kMilliPerGpu) {
      weight = 1 + pod.num_gpus * options.gpu_weight;
    }
    Shape shape{pod.cpu_milli, pod.gpu_milli, pod.num_gpus, absl::StrJoin(pod.gpu_models, "|")};
    counts[shape] += weight;
    example.emplace(shape, &pod);
    total += weight;
  }
  std::vector<std::pair<Shape, double>> sorted(counts.begin(), counts.end());
  // Most frequent first; among equals the larger shape first (sort.Reverse of Less).
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  std::vector<TypicalPod> typical;
  double covered = 0;
  for (const auto& [shape, count] : sorted) {
    if (covered >= options.popularity_threshold * total) break;
    covered += count;
    TypicalPod pod;
    pod.request = cluster.Resolve(*example[shape]);
    pod.gpu_spec = std::get<3>(shape);
    pod.frequency = count;
    typical.push_back(std::move(pod));
  }
  for (TypicalPod& pod : typical) pod.frequency /= covered;
  return typical;
}

FragmentationModel::FragmentationModel(std::vector<TypicalPod> typical_pods)
    : typical_pods_(std::move(typical_pods)) {}

double FragmentationModel::Amount(const NodeState& node) const {
  if (node.cpu_left < 0 || node.cpu_left >= kMaxMemoCpu) return Compute(node);
  // The multiset of free milli, largest first (insertion sort: at most 8).
  std::array<int16_t, kMaxGpusPerNode> gpus = node.gpu_left;
  for (int i = 1; i < kMaxGpusPerNode; ++i) {
    for (int j = i; j > 0 && gpus[j - 1] < gpus[j]; --j) std::swap(gpus[j - 1], gpus[j]);
  }
  Key key{0, 0};
  for (int i = 0; i < 6; ++i) key.gpus = key.gpus << 10 | static_cast<uint64_t>(gpus[i]);
  key.rest = static_cast<uint64_t>(gpus[6]) << 10 | static_cast<uint64_t>(gpus[7]);
  key.rest |= static_cast<uint64_t>(node.model & 63) << 20;
  key.rest |= static_cast<uint64_t>(node.num_gpus) << 26;
  key.rest |= static_cast<uint64_t>(node.cpu_left) << 30;
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  if (memo_.size() >= kMaxMemo) memo_.clear();
  double amount = Compute(node);
  memo_.emplace(key, amount);
  return amount;
}

double FragmentationModel::Compute(const NodeState& node) const {
  const double free_milli = static_cast<double>(node.GpuMilliLeft());
  double amount = 0;
  for (const TypicalPod& typical : typical_pods_) {
    const PodRequest& pod = typical.request;
    bool usable = pod.gpu_milli > 0 && ModelAllowed(node, pod) && node.cpu_left >= pod.cpu_milli &&
                  node.GpusWithAtLeast(pod.gpu_milli) >= pod.num_gpus;
    if (!usable) {
      amount += typical.frequency * free_milli;
      continue;
    }
    int64_t too_small = 0;
    for (int i = 0; i < node.num_gpus; ++i) {
      if (node.gpu_left[i] < pod.gpu_milli) too_small += node.gpu_left[i];
    }
    amount += typical.frequency * static_cast<double>(too_small);
  }
  return amount;
}

}  // namespace evoscale::placement
