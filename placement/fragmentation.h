// GPU fragmentation as FGD measures it (USENIX ATC'23; the simulator's pkg/utils/frag.go).
//
// The "typical pods" are the most frequent request shapes of a workload (CPU, milli-GPU per GPU,
// GPU count, allowed models), taken in order of frequency until they cover 95% of the pods, with
// their frequencies renormalised to sum to 1. A node's fragmentation amount is the expected
// free GPU milli a typical pod could not use there: for each typical pod, weighted by its
// frequency, all the node's free GPU milli when the pod cannot run on it (no GPU wanted, too
// little CPU, a model it may not use, too few GPUs with room), or else the free milli of the GPUs
// too small for it. Memory plays no part (as in FGD).

#ifndef EVOSCALE_PLACEMENT_FRAGMENTATION_H_
#define EVOSCALE_PLACEMENT_FRAGMENTATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "placement/cluster.h"

namespace evoscale::placement {

struct TypicalPod {
  PodRequest request;
  std::string gpu_spec;  // the allowed models as the trace wrote them, '|' separated
  double frequency = 0;  // the typical pods' frequencies sum to 1
};

struct TypicalPodsOptions {
  // Shapes are taken, most frequent first, until they cover this share of the pods.
  double popularity_threshold = 0.95;
  // CPU-only pods count as shapes (the simulator's isInvolvedCpuPods, true in its experiments).
  bool include_cpu_pods = true;
  // A whole-GPU pod of n GPUs counts as 1 + n * gpu_weight pods (the simulator's gpuResWeight;
  // 0 in its experiments).
  double gpu_weight = 0;
};

// The typical pods of `pods`, resolved against `cluster`'s models. Ties in frequency go to the
// larger shape first (CPU, then milli-GPU, GPU count, spec), as the simulator sorts them.
std::vector<TypicalPod> TypicalPods(const std::vector<PodSpec>& pods, const Cluster& cluster,
                                    const TypicalPodsOptions& options = {});

// A node's fragmentation amount against a set of typical pods, memoised by the node's free
// resources (CPU, GPU model, the multiset of free GPU milli). Not thread-safe (the memo).
class FragmentationModel {
 public:
  explicit FragmentationModel(std::vector<TypicalPod> typical_pods);

  // In milli-GPU, 0..node.GpuMilliLeft(). O(typical pods x GPUs) on a miss, a hash lookup on a
  // hit.
  double Amount(const NodeState& node) const;

  const std::vector<TypicalPod>& typical_pods() const { return typical_pods_; }

 private:
  struct Key {
    uint64_t gpus;  // the free milli of the six largest GPUs, 10 bits each
    uint64_t rest;  // the two smallest GPUs, the model, the GPU count and the CPU left
    bool operator==(const Key& other) const { return gpus == other.gpus && rest == other.rest; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.gpus, key.rest);
    }
  };
  double Compute(const NodeState& node) const;

  std::vector<TypicalPod> typical_pods_;
  mutable absl::flat_hash_map<Key, double> memo_;
};

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_FRAGMENTATION_H_
