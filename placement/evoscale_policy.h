// evoscale's placement policy: FGD's objective (place where the node's expected fragmentation
// grows least, fragmentation.h), made exact and given a second objective.
//
// What it changes against the simulator's FGD (policy.h):
//  - The growth of fragmentation is compared as it is, in milli-GPU, not squashed through a
//    sigmoid and truncated to an integer in [0, 100] (which makes nodes whose growth differs by
//    up to ~40 milli-GPU tie, and ties go to a random node).
//  - A sharing pod's GPU is chosen by the same exact growth; among GPUs that tie, the one with
//    the least room left (best fit), so whole GPUs stay whole.
//  - Among nodes whose growth ties (within `tie_milli`), a second objective decides:
//    kPack prefers the node left with the least free GPU (then CPU), keeping empty nodes for
//    pods of many GPUs; kSpread the most (uniformity across nodes); kNone neither. What still
//    ties goes by the cluster's tie rank, as for the baselines.
// The defaults were chosen on seeds 42-46 of openb's default trace only, then frozen
// (bench/placement/README.md).

#ifndef EVOSCALE_PLACEMENT_EVOSCALE_POLICY_H_
#define EVOSCALE_PLACEMENT_EVOSCALE_POLICY_H_

#include <cstdint>
#include <memory>

#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace evoscale::placement {

struct EvoscalePolicyOptions {
  enum class Secondary { kPack, kSpread, kNone };
  Secondary secondary = Secondary::kPack;
  // Growths closer than this (milli-GPU) tie.
  double tie_milli = 1e-6;
  // Compare nodes by FGD's integer score (sigmoid bins) instead of the exact growth.
  bool fgd_bins = false;
};

// `fragmentation` must outlive the policy.
std::unique_ptr<Policy> MakeEvoscalePolicy(const FragmentationModel& fragmentation,
                                           const EvoscalePolicyOptions& options = {});

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_EVOSCALE_POLICY_H_
