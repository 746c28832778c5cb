// Placement policies: where one pod goes in a cluster, the node and its GPUs.
//
// The baselines reproduce the FGD simulator's score plugins and its scheduler around them
// (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin): every node that fits gets an
// integer score in [0, 100] as the plugin computes it (the truncations included, since they
// decide how often nodes tie); the highest wins, ties going to the lowest Cluster::tie_rank
// (the simulator's fork of kube-scheduler takes the first name, and names carry a random
// prefix); then the GPUs are chosen as the simulator's Open-Gpu-Share Reserve
// does with that experiment's gpuSelMethod:
//   random      a feasible node uniformly; a sharing pod's GPU uniformly among those with room
//   dotprod     Tetris: the smallest dot product of the node's free (CPU, GPU) and the pod's
//               request, both over (128 CPUs, 8 GPUs); best-fit GPU
//   clustering  nodes already running pods of the same GPU kind, then empty nodes, fuller first;
//               best-fit GPU
//   packing     sharing a used GPU, then free GPUs of a used node, then an empty node;
//               best-fit GPU
//   bestfit     the least free CPU and GPU left after the pod (weights 1/2, over 128 CPUs and
//               8 GPUs); best-fit GPU
//   fgd         the least growth of the node's fragmentation (fragmentation.h), as
//               sigmoid(-growth / 1000) x 100; a sharing pod's GPU by the same score
//   evoscale    ours: see evoscale_policy.h
// CPU-only pods score 0 everywhere under packing and clustering (so go to the first node by tie
// rank that fits), as in the simulator.
//
// A Policy keeps state between calls (random's generator; fgd's and evoscale's scores per node
// and request shape, kept while the node is unchanged, see Cluster::node_version), and uses a
// FragmentationModel that memoises; neither is thread-safe. Place() is O(nodes x GPUs), plus
// fragmentation look-ups for fgd and evoscale on nodes that changed since they last scored
// that shape.

#ifndef EVOSCALE_PLACEMENT_POLICY_H_
#define EVOSCALE_PLACEMENT_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/cluster.h"
#include "placement/fragmentation.h"

namespace evoscale::placement {

// Binding names: "evoscale", "fgd", "bestfit", "packing", "dotprod", "clustering", "random".
enum class PolicyKind { kEvoscale, kFgd, kBestFit, kPacking, kDotProd, kClustering, kRandom };
absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name);
absl::string_view PolicyKindName(PolicyKind kind);

class Policy {
 public:
  virtual ~Policy() = default;
  // The node and GPUs for `pod`, or nullopt when no node fits. Does not change the cluster.
  virtual std::optional<Placement> Place(const Cluster& cluster, const PodRequest& pod) = 0;
};

// One of the simulator's policies (every kind but kEvoscale, which evoscale_policy.h makes;
// nullptr for it). `fragmentation` must outlive the policy (fgd uses it; others ignore it).
std::unique_ptr<Policy> MakeBaselinePolicy(PolicyKind kind, const FragmentationModel& fragmentation,
                                           uint64_t seed);

// The plugins' scores for one feasible node, exposed for tests: integers in [0, 100].
int64_t BestFitScore(const NodeState& node, const PodRequest& pod);
int64_t PackingScore(const NodeState& node, const PodRequest& pod);
int64_t DotProductScore(const NodeState& node, const PodRequest& pod);
int64_t ClusteringScore(const NodeState& node, const PodRequest& pod);
// FGD's score and the GPUs it would take.
struct FgdChoice {
  int64_t score = 0;
  GpuMask gpus = 0;
};
FgdChoice FgdScore(const NodeState& node, const PodRequest& pod,
                   const FragmentationModel& fragmentation);

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_POLICY_H_
