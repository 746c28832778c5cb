// The cluster a placement policy sees: GPU nodes (CPU, memory, up to kMaxGpusPerNode GPUs of one
// model, each shared by fractional pods up to kMilliPerGpu milli-GPU) and the pods' requests, in
// the model of Alibaba's openb traces and of the FGD simulator (USENIX ATC'23, "Beware of
// Fragmentation"; hkust-adsl/kubernetes-scheduler-simulator).
//
// NodeSpec and PodSpec are what a trace says. A Cluster holds the nodes' free resources and
// interns GPU models; Cluster::Resolve turns a PodSpec into a PodRequest (the allowed models as a
// bit mask), which is what Fits, Bind and the policies take. A pod asks either for no GPU, for a
// share of one GPU (num_gpus == 1, gpu_milli < 1000) or for whole GPUs (gpu_milli == 1000).
//
// A Cluster is a value: copy it to try a placement. It is not thread-safe; each replay owns its
// own. Every call is O(GPUs of one node) except the cluster totals, which are kept up to date.

#ifndef EVOSCALE_PLACEMENT_CLUSTER_H_
#define EVOSCALE_PLACEMENT_CLUSTER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::placement {

inline constexpr int kMilliPerGpu = 1000;
inline constexpr int kMaxGpusPerNode = 8;
// GPU models are interned into bits of a mask.
inline constexpr int kMaxGpuModels = 32;

// openb's `qos`: the priority classes, highest first.
enum class QosClass { kLatencySensitive, kGuaranteed, kBurstable, kBestEffort, kUnspecified };
// "LS", "Guaranteed", "Burstable", "BE"; empty = kUnspecified. Anything else: INVALID_ARGUMENT.
absl::StatusOr<QosClass> ParseQosClass(absl::string_view name);
absl::string_view QosClassName(QosClass qos);

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpus = 0;       // 0..kMaxGpusPerNode
  std::string gpu_model;  // empty when num_gpus == 0
};

struct PodSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpus = 0;
  int gpu_milli = 0;  // per GPU: 1..1000 when num_gpus > 0 (1000 when num_gpus > 1), else 0
  std::vector<std::string> gpu_models;  // the models it may run on; empty = any
  QosClass qos = QosClass::kUnspecified;
  int64_t creation_time = -1;  // seconds; -1 when the trace has none
  int64_t deletion_time = -1;

  int64_t TotalGpuMilli() const { return int64_t{num_gpus} * gpu_milli; }
};

// A pod's request against one cluster's models.
struct PodRequest {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpus = 0;
  int gpu_milli = 0;
  bool any_model = true;    // no gpu_spec
  uint32_t model_mask = 0;  // when !any_model: the allowed models the cluster has (may be 0)

  bool UsesGpu() const { return num_gpus > 0 && gpu_milli > 0; }
  bool SharesGpu() const { return num_gpus == 1 && gpu_milli < kMilliPerGpu; }
  int64_t TotalGpuMilli() const { return int64_t{num_gpus} * gpu_milli; }
};

// One node's free resources. gpu_left[i] for i >= num_gpus is 0.
struct NodeState {
  int64_t cpu_left = 0;
  int64_t cpu_capacity = 0;
  int64_t memory_left = 0;
  int num_gpus = 0;
  int model = -1;  // index into Cluster::models(); -1 for a node without GPUs
  std::array<int16_t, kMaxGpusPerNode> gpu_left{};
  // Pods bound here by kind: [0] GPU-sharing pods, [n] pods of n whole GPUs (the Clustering
  // policy's "GPU affinity" of a node).
  std::array<int32_t, kMaxGpusPerNode + 1> pods_by_gpu_kind{};

  int64_t GpuMilliLeft() const;
  int FullyFreeGpus() const;
  // GPUs with at least `milli` free.
  int GpusWithAtLeast(int milli) const;
};

// Which GPUs of a node a placement uses: bit i = GPU i takes gpu_milli.
using GpuMask = uint16_t;

struct Placement {
  int node = -1;
  GpuMask gpus = 0;
};

// True when a node of model `model` may run `pod` (openb's gpu_spec), regardless of room.
bool ModelAllowed(const NodeState& node, const PodRequest& pod);
// Filters as the simulator's scheduler does: CPU and memory (NodeResourcesFit), and for GPU pods
// a GPU node of an allowed model with num_gpus GPUs of gpu_milli free (Open-Gpu-Share).
bool Fits(const NodeState& node, const PodRequest& pod);
// The node after `pod` takes `gpus` (no checks; see Fits).
NodeState WithPod(const NodeState& node, const PodRequest& pod, GpuMask gpus);
// The node after `pod`, bound there on `gpus`, leaves (no checks): WithPod undone.
NodeState WithoutPod(const NodeState& node, const PodRequest& pod, GpuMask gpus);

// GPU choices the simulator makes once a node is chosen. Each returns 0 for a pod without GPUs.
// The lowest-index fully free GPUs (AllocateExclusiveGpuId); for whole-GPU pods.
GpuMask LowestFreeGpus(const NodeState& node, int count);
// A sharing pod: the GPU with the least free milli that still fits, lowest index first
// (allocateGpuIdBasedOnBestFit); whole-GPU pods: LowestFreeGpus.
GpuMask BestFitGpus(const NodeState& node, const PodRequest& pod);
// The node after `pod`, packed as NodeResource.Sub does it: GPUs in ascending order of free
// milli (stable), each that fits takes gpu_milli. Used to score whole-GPU and CPU pods.
NodeState PackedWithPod(const NodeState& node, const PodRequest& pod);

class Cluster {
 public:
  // INVALID_ARGUMENT naming the node when a node has more than kMaxGpusPerNode GPUs, negative
  // resources, GPUs without a model, or when there are more than kMaxGpuModels models.
  static absl::StatusOr<Cluster> Create(const std::vector<NodeSpec>& nodes);

  PodRequest Resolve(const PodSpec& pod) const;

  const std::vector<NodeState>& nodes() const { return nodes_; }
  const NodeState& node(int index) const { return nodes_[index]; }
  const std::vector<std::string>& models() const { return models_; }
  const std::string& node_name(int index) const { return names_[index]; }

  // Where the node stands when scores tie: lower first. The simulator's scheduler (a fork of
  // kube-scheduler 1.20) takes the node whose name sorts first among equal scores, and the
  // simulator prefixes the names with a random permutation of the nodes: one fixed random
  // order for the whole replay. Default: the nodes' indices.
  int tie_rank(int index) const { return tie_ranks_[index]; }
  // `ranks` is a permutation of 0..nodes-1 (INVALID_ARGUMENT otherwise).
  absl::Status SetTieRanks(std::vector<int> ranks);

  // Bumped by each Bind to the node: a policy may keep what it computed for a node while this
  // stays the same.
  uint64_t node_version(int index) const { return versions_[index]; }

  int64_t total_gpus() const { return total_gpus_; }
  int64_t used_gpu_milli() const { return used_gpu_milli_; }

  // Binds `pod` to the placement (which must fit; checked only in debug builds).
  void Bind(const PodRequest& pod, const Placement& placement);
  // Frees what Bind(pod, placement) took (which must be bound there; not checked).
  void Unbind(const PodRequest& pod, const Placement& placement);

 private:
  std::vector<NodeState> nodes_;
  std::vector<std::string> names_;
  std::vector<int> tie_ranks_;
  std::vector<uint64_t> versions_;
  std::vector<std::string> models_;
  int64_t total_gpus_ = 0;
  int64_t used_gpu_milli_ = 0;
};

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_CLUSTER_H_
