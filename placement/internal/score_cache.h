// What a policy computed for each node and request shape, kept while the node is unchanged
// (Cluster::node_version). In a replay each pod changes one node, so all others answer the next
// pod of a shape they scored before from here. Kept for one Cluster object: given another, it
// starts over (a cluster assigned over with other nodes of the same versions would fool it).
// Private to placement/.

#ifndef EVOSCALE_PLACEMENT_INTERNAL_SCORE_CACHE_H_
#define EVOSCALE_PLACEMENT_INTERNAL_SCORE_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "placement/cluster.h"

namespace evoscale::placement::internal {

// A request's shape as the fragmentation scores see it: CPU, milli-GPU per GPU, GPU count
// (memory and models play no part in them; feasibility is checked apart).
inline uint64_t ShapeKey(const PodRequest& pod) {
  return static_cast<uint64_t>(pod.cpu_milli) << 16 | static_cast<uint64_t>(pod.gpu_milli) << 4 |
         static_cast<uint64_t>(pod.num_gpus & 15);
}

// True when ShapeKey is exact for `pod` (CPU below 2^48, at most 15 GPUs).
inline bool HasShapeKey(const PodRequest& pod) {
  return pod.cpu_milli >= 0 && pod.cpu_milli < (int64_t{1} << 48) && pod.num_gpus < 16;
}

template <typename Value>
class ScoreCache {
 public:
  // The value for (node, shape) if computed since the node last changed; else `compute()`'s.
  template <typename Compute>
  const Value& Get(const Cluster& cluster, int node, const PodRequest& pod, Compute compute) {
    if (!HasShapeKey(pod)) {
      scratch_ = compute();
      return scratch_;
    }
    if (cluster_ != &cluster || nodes_.size() != cluster.nodes().size()) {
      cluster_ = &cluster;
      nodes_.assign(cluster.nodes().size(), {});
    }
    Entry& entry = nodes_[node];
    if (entry.version != cluster.node_version(node)) {
      entry.version = cluster.node_version(node);
      entry.by_shape.clear();
    }
    auto [it, inserted] = entry.by_shape.try_emplace(ShapeKey(pod));
    if (inserted) it->second = compute();
    return it->second;
  }

 private:
  struct Entry {
    uint64_t version = ~uint64_t{0};
    absl::flat_hash_map<uint64_t, Value> by_shape;
  };
  const Cluster* cluster_ = nullptr;  // the cluster the entries are of (another: start over)
  std::vector<Entry> nodes_;
  Value scratch_;
};

}  // namespace evoscale::placement::internal

#endif  // EVOSCALE_PLACEMENT_INTERNAL_SCORE_CACHE_H_
