#include "placement/evoscale_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "placement/internal/score_cache.h"

namespace evoscale::placement {
namespace {

// One candidate: a node with the pod on some of its GPUs.
struct Candidate {
  double growth = 0;     // fragmentation after - before, milli-GPU
  double bin = 0;        // with fgd_bins: minus FGD's integer score
  double secondary = 0;  // smaller is better
  GpuMask gpus = 0;
};

class EvoscalePolicy : public Policy {
 public:
  EvoscalePolicy(const FragmentationModel& fragmentation, const EvoscalePolicyOptions& options)
      : fragmentation_(fragmentation), options_(options) {}

  std::optional<Placement> Place(const Cluster& cluster, const PodRequest& pod) override {
    // Pass 1: every feasible node's best candidate, and the least growth.
    const std::vector<NodeState>& nodes = cluster.nodes();
    pod_uses_gpu_ = pod.UsesGpu();
    candidates_.clear();
    double least = std::numeric_limits<double>::infinity();
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      if (!Fits(nodes[i], pod)) continue;
      candidates_.push_back(
          {i, cache_.Get(cluster, i, pod, [&] { return Evaluate(nodes[i], pod); })});
      least = std::min(least, Primary(candidates_.back().second));
    }
    // Pass 2: among those within tie_milli of it, the second objective, then the tie rank.
    int chosen = -1;
    const Candidate* best = nullptr;
    for (const auto& [node, candidate] : candidates_) {
      if (Primary(candidate) > least + options_.tie_milli) continue;
      if (best == nullptr || candidate.secondary < best->secondary ||
          (candidate.secondary == best->secondary &&
           cluster.tie_rank(node) < cluster.tie_rank(chosen))) {
        chosen = node;
        best = &candidate;
      }
    }
    if (chosen < 0) return std::nullopt;
    return Placement{chosen, best->gpus};
  }

 private:
  double Primary(const Candidate& candidate) const {
    return options_.fgd_bins ? candidate.bin : candidate.growth;
  }

  Candidate Score(const NodeState& before, double before_amount, const NodeState& after,
                  GpuMask gpus) const {
    Candidate candidate;
    candidate.gpus = gpus;
    candidate.growth = fragmentation_.Amount(after) - before_amount;
    if (options_.fgd_bins) {
      // FGD's score bins: growths that map to the same integer sigmoid score tie.
      candidate.bin = -std::floor(options_.bin_scale / (1.0 + std::exp(candidate.growth / 1000)));
    }
    // Free GPU milli dominates; free CPU (in 1/1000 of a CPU per milli-GPU) breaks its ties.
    const double room = static_cast<double>(after.GpuMilliLeft()) +
                        static_cast<double>(after.cpu_left) / (1000.0 * after.cpu_capacity + 1);
    switch (options_.secondary) {
      case EvoscalePolicyOptions::Secondary::kPack:
        candidate.secondary = room;
        break;
      case EvoscalePolicyOptions::Secondary::kSpread:
        candidate.secondary = -room;
        break;
      case EvoscalePolicyOptions::Secondary::kUsedFirst:
        candidate.secondary =
            before.FullyFreeGpus() == before.num_gpus && before.cpu_left == before.cpu_capacity ? 1
                                                                                                : 0;
        break;
      case EvoscalePolicyOptions::Secondary::kCpuPodsPack:
        if (!pod_uses_gpu_) candidate.secondary = static_cast<double>(after.GpuMilliLeft());
        break;
      case EvoscalePolicyOptions::Secondary::kNone:
        break;
    }
    return candidate;
  }

  Candidate Evaluate(const NodeState& node, const PodRequest& pod) const {
    const double before = fragmentation_.Amount(node);
    if (!pod.SharesGpu()) {
      const GpuMask gpus = LowestFreeGpus(node, pod.UsesGpu() ? pod.num_gpus : 0);
      return Score(node, before, WithPod(node, pod, gpus), gpus);
    }
    std::optional<Candidate> best;
    int best_left = 0;
    for (int g = 0; g < node.num_gpus; ++g) {
      const int left = node.gpu_left[g];
      if (left < pod.gpu_milli) continue;
      const GpuMask gpus = GpuMask{1} << g;
      Candidate candidate = Score(node, before, WithPod(node, pod, gpus), gpus);
      const bool better =
          !best || candidate.growth < best->growth - options_.tie_milli ||
          (candidate.growth <= best->growth + options_.tie_milli && left < best_left);
      if (better) {
        best = candidate;
        best_left = left;
      }
    }
    return *best;  // Fits() saw a GPU with room
  }

  const FragmentationModel& fragmentation_;
  const EvoscalePolicyOptions options_;
  internal::ScoreCache<Candidate> cache_;  // each node's best candidate per request shape
  // Scratch of one Place(): the feasible nodes' best candidates; whether the pod uses GPUs.
  std::vector<std::pair<int, Candidate>> candidates_;
  bool pod_uses_gpu_ = false;
};

}  // namespace

absl::StatusOr<EvoscalePolicyOptions::Secondary> ParseSecondary(absl::string_view name) {
  using Secondary = EvoscalePolicyOptions::Secondary;
  for (Secondary secondary : {Secondary::kCpuPodsPack, Secondary::kPack, Secondary::kSpread,
                              Secondary::kUsedFirst, Secondary::kNone}) {
    if (name == SecondaryName(secondary)) return secondary;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "secondary \"", name, "\": must be cpupods, pack, spread, usedfirst or none"));
}

absl::string_view SecondaryName(EvoscalePolicyOptions::Secondary secondary) {
  switch (secondary) {
    case EvoscalePolicyOptions::Secondary::kCpuPodsPack:
      return "cpupods";
    case EvoscalePolicyOptions::Secondary::kPack:
      return "pack";
    case EvoscalePolicyOptions::Secondary::kSpread:
      return "spread";
    case EvoscalePolicyOptions::Secondary::kUsedFirst:
      return "usedfirst";
    case EvoscalePolicyOptions::Secondary::kNone:
      return "none";
  }
  return "none";
}

std::unique_ptr<Policy> MakeEvoscalePolicy(const FragmentationModel& fragmentation,
                                           const EvoscalePolicyOptions& options) {
  return std::make_unique<EvoscalePolicy>(fragmentation, options);
}

}  // namespace evoscale::placement
