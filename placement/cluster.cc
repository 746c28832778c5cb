#include "placement/cluster.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace evoscale::placement {

absl::StatusOr<QosClass> ParseQosClass(absl::string_view name) {
  if (name == "LS") return QosClass::kLatencySensitive;
  if (name == "Guaranteed") return QosClass::kGuaranteed;
  if (name == "Burstable") return QosClass::kBurstable;
  if (name == "BE") return QosClass::kBestEffort;
  if (name.empty()) return QosClass::kUnspecified;
  return absl::InvalidArgumentError(
      absl::StrCat("qos \"", name, "\": must be LS, Guaranteed, Burstable or BE"));
}

absl::string_view QosClassName(QosClass qos) {
  switch (qos) {
    case QosClass::kLatencySensitive:
      return "LS";
    case QosClass::kGuaranteed:
      return "Guaranteed";
    case QosClass::kBurstable:
      return "Burstable";
    case QosClass::kBestEffort:
      return "BE";
    case QosClass::kUnspecified:
      break;
  }
  return "";
}

int64_t NodeState::GpuMilliLeft() const {
  int64_t total = 0;
  for (int i = 0; i < num_gpus; ++i) total += gpu_left[i];
  return total;
}

int NodeState::FullyFreeGpus() const { return GpusWithAtLeast(kMilliPerGpu); }

int NodeState::GpusWithAtLeast(int milli) const {
  int count = 0;
  for (int i = 0; i < num_gpus; ++i) count += gpu_left[i] >= milli ? 1 : 0;
  return count;
}

bool ModelAllowed(const NodeState& node, const PodRequest& pod) {
  if (pod.any_model) return true;
  return node.model >= 0 && (pod.model_mask >> node.model & 1u) != 0;
}

bool Fits(const NodeState& node, const PodRequest& pod) {
  if (node.cpu_left < pod.cpu_milli || node.memory_left < pod.memory_mib) return false;
  if (!pod.UsesGpu()) return true;
  if (node.num_gpus == 0 || !ModelAllowed(node, pod)) return false;
  return node.GpusWithAtLeast(pod.gpu_milli) >= pod.num_gpus;
}

NodeState WithPod(const NodeState& node, const PodRequest& pod, GpuMask gpus) {
  NodeState next = node;
  next.cpu_left -= pod.cpu_milli;
  next.memory_left -= pod.memory_mib;
  if (!pod.UsesGpu()) return next;
  for (int i = 0; i < node.num_gpus; ++i) {
    if (gpus >> i & 1u) next.gpu_left[i] = static_cast<int16_t>(next.gpu_left[i] - pod.gpu_milli);
  }
  ++next.pods_by_gpu_kind[pod.SharesGpu() ? 0 : pod.num_gpus];
  return next;
}

NodeState WithoutPod(const NodeState& node, const PodRequest& pod, GpuMask gpus) {
  NodeState next = node;
  next.cpu_left += pod.cpu_milli;
  next.memory_left += pod.memory_mib;
  if (!pod.UsesGpu()) return next;
  for (int i = 0; i < node.num_gpus; ++i) {
    if (gpus >> i & 1u) next.gpu_left[i] = static_cast<int16_t>(next.gpu_left[i] + pod.gpu_milli);
  }
  --next.pods_by_gpu_kind[pod.SharesGpu() ? 0 : pod.num_gpus];
  return next;
}

GpuMask LowestFreeGpus(const NodeState& node, int count) {
  GpuMask mask = 0;
  for (int i = 0; i < node.num_gpus && count > 0; ++i) {
    if (node.gpu_left[i] == kMilliPerGpu) {
      mask |= GpuMask{1} << i;
      --count;
    }
  }
  return mask;
}

GpuMask BestFitGpus(const NodeState& node, const PodRequest& pod) {
  if (!pod.UsesGpu()) return 0;
  if (!pod.SharesGpu()) return LowestFreeGpus(node, pod.num_gpus);
  int best = -1;
  for (int i = 0; i < node.num_gpus; ++i) {
    if (node.gpu_left[i] >= pod.gpu_milli && (best < 0 || node.gpu_left[i] < node.gpu_left[best])) {
      best = i;
    }
  }
  return best < 0 ? 0 : GpuMask{1} << best;
}

NodeState PackedWithPod(const NodeState& node, const PodRequest& pod) {
  if (!pod.UsesGpu()) return WithPod(node, pod, 0);
  std::array<int, kMaxGpusPerNode> order;
  std::iota(order.begin(), order.begin() + node.num_gpus, 0);
  std::stable_sort(order.begin(), order.begin() + node.num_gpus,
                   [&](int a, int b) { return node.gpu_left[a] < node.gpu_left[b]; });
  GpuMask mask = 0;
  int wanted = pod.num_gpus;
  for (int k = 0; k < node.num_gpus && wanted > 0; ++k) {
    if (node.gpu_left[order[k]] >= pod.gpu_milli) {
      mask |= GpuMask{1} << order[k];
      --wanted;
    }
  }
  return WithPod(node, pod, mask);
}

absl::StatusOr<Cluster> Cluster::Create(const std::vector<NodeSpec>& nodes) {
  Cluster cluster;
  cluster.nodes_.reserve(nodes.size());
  for (const NodeSpec& spec : nodes) {
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("node \"", spec.name, "\": ", what));
    };
    if (spec.cpu_milli < 0 || spec.memory_mib < 0) return bad("negative cpu or memory");
    if (spec.num_gpus < 0 || spec.num_gpus > kMaxGpusPerNode) {
      return bad(absl::StrCat(spec.num_gpus, " GPUs: must be 0..", kMaxGpusPerNode));
    }
    if (spec.num_gpus > 0 && spec.gpu_model.empty()) return bad("GPUs without a model");
    NodeState state;
    state.cpu_left = state.cpu_capacity = spec.cpu_milli;
    state.memory_left = spec.memory_mib;
    state.num_gpus = spec.num_gpus;
    for (int i = 0; i < spec.num_gpus; ++i) state.gpu_left[i] = kMilliPerGpu;
    if (spec.num_gpus > 0) {
      auto it = std::find(cluster.models_.begin(), cluster.models_.end(), spec.gpu_model);
      if (it == cluster.models_.end()) {
        if (cluster.models_.size() == kMaxGpuModels) {
          return bad(absl::StrCat("more than ", kMaxGpuModels, " GPU models in the cluster"));
        }
        it = cluster.models_.insert(it, spec.gpu_model);
      }
      state.model = static_cast<int>(it - cluster.models_.begin());
    }
    cluster.total_gpus_ += spec.num_gpus;
    cluster.nodes_.push_back(state);
    cluster.names_.push_back(spec.name);
    cluster.tie_ranks_.push_back(static_cast<int>(cluster.tie_ranks_.size()));
    cluster.versions_.push_back(0);
  }
  return cluster;
}

PodRequest Cluster::Resolve(const PodSpec& pod) const {
  PodRequest request;
  request.cpu_milli = pod.cpu_milli;
  request.memory_mib = pod.memory_mib;
  request.num_gpus = pod.num_gpus;
  request.gpu_milli = pod.gpu_milli;
  request.any_model = pod.gpu_models.empty();
  for (const std::string& model : pod.gpu_models) {
    auto it = std::find(models_.begin(), models_.end(), model);
    if (it != models_.end()) request.model_mask |= 1u << (it - models_.begin());
  }
  return request;
}

absl::Status Cluster::SetTieRanks(std::vector<int> ranks) {
  std::vector<bool> seen(nodes_.size(), false);
  if (ranks.size() != nodes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ranks.size(), " tie ranks for ", nodes_.size(), " nodes"));
  }
  for (int rank : ranks) {
    if (rank < 0 || rank >= static_cast<int>(ranks.size()) || seen[rank]) {
      return absl::InvalidArgumentError(
          absl::StrCat("tie ranks: ", rank, " out of range or twice"));
    }
    seen[rank] = true;
  }
  tie_ranks_ = std::move(ranks);
  return absl::OkStatus();
}

void Cluster::Bind(const PodRequest& pod, const Placement& placement) {
  NodeState& node = nodes_[placement.node];
  assert(Fits(node, pod));
  int64_t before = node.GpuMilliLeft();
  node = WithPod(node, pod, placement.gpus);
  ++versions_[placement.node];
  used_gpu_milli_ += before - node.GpuMilliLeft();
}

void Cluster::Unbind(const PodRequest& pod, const Placement& placement) {
  NodeState& node = nodes_[placement.node];
  const int64_t before = node.GpuMilliLeft();
  node = WithoutPod(node, pod, placement.gpus);
  ++versions_[placement.node];
  used_gpu_milli_ -= node.GpuMilliLeft() - before;
}

}  // namespace evoscale::placement
