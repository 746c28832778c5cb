// Shared machinery of the sampling designers: a flattened view of the search space (every
// parameter, nested children included, gets one coordinate), mapping unit-cube coordinates to
// parameter values honouring scales, grid axes, and small deterministic random sources.
#ifndef EVOSCALE_SEARCH_INTERNAL_SAMPLING_H_
#define EVOSCALE_SEARCH_INTERNAL_SAMPLING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search::internal {

// One parameter of the flattened space. Its position in the flat list is its coordinate.
struct FlatParameter {
  ParameterConfig config;  // a copy without `children`
  int parent = -1;         // index of the parent in the flat list; -1 at top level
  // The parent values that activate this parameter (unused at top level).
  std::vector<double> parent_numbers;
  std::vector<std::string> parent_categories;
};

// Lists every parameter of `space` depth-first in declaration order: a parameter, then the
// subtrees of its children, then its next sibling. Indices are stable for a given space, so
// the same coordinates always give the same point.
std::vector<FlatParameter> Flatten(const SearchSpace& space);

// The value of `config` at unit coordinate `u` (clamped into [0, 1]). kDouble and kInteger
// follow config.scale; kInteger rounds in value space and is uniform over the integers for a
// linear scale; kDiscrete and kCategorical pick element floor(u * n). Results are clamped
// into the parameter's bounds. `config` must be valid (non-empty value lists, min <= max,
// min > 0 for a log scale; a log scale with min <= 0 falls back to linear).
ParameterValue ValueAtUnit(const ParameterConfig& config, double u);

// The grid axis of `config`: every category/discrete value; every integer when there are at
// most `grid_points` of them, else `grid_points` evenly spaced in scaled space (rounded,
// duplicates dropped); for kDouble, `grid_points` evenly spaced in scaled space (duplicates
// dropped, so min == max gives one point). `grid_points` >= 2.
std::vector<ParameterValue> GridAxis(const ParameterConfig& config, int grid_points);

// True when `parent_value` activates a child hanging under `parent_numbers` /
// `parent_categories` (exact equality; an integer parent compares as a double).
bool ConditionHolds(const FlatParameter& child, const ParameterValue& parent_value);

// Builds the dict of the active parameters, given one value per flat parameter. A
// parameter is active when it is top level, or its parent is active and its condition holds.
ParameterDict AssembleActive(absl::Span<const FlatParameter> flat,
                             absl::Span<const ParameterValue> values);

// SplitMix64's finaliser: a bijective 64-bit mix.
uint64_t Mix64(uint64_t x);

// A seed for stream `stream` of a study seeded with `seed`.
uint64_t StreamSeed(uint64_t seed, uint64_t stream);

// A small, portable (bit-identical everywhere) generator: SplitMix64.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next();
  // Uniform in [0, 1), 53 random bits.
  double NextUnit();
  // Uniform in [0, n), n > 0 (multiply-shift; bias below 2^-32 for small n).
  uint64_t NextBelow(uint64_t n);

 private:
  uint64_t state_;
};

// The first `n` primes: 2, 3, 5, ...
std::vector<int> FirstPrimes(int n);

// The radical inverse of `index` in `base` with each digit d replaced by digit_map[d]
// (digit_map has `base` entries and digit_map[0] == 0, so trailing zeros stay zero).
double ScrambledRadicalInverse(uint64_t index, int base, absl::Span<const int> digit_map);

// A scrambled Halton sequence in [0, 1)^dims: per-dimension digit permutations and a
// Cranley-Patterson shift, both derived from `seed`. Point(i) is a pure function of
// (dims, seed, i). The leading points of a Halton sequence are the most regular, so point 0
// is the sequence's point kSkippedPoints. Cheap to copy; O(sum of the first `dims` primes)
// memory. Thread-compatible.
class HaltonSequence {
 public:
  static constexpr uint64_t kSkippedPoints = 16;

  HaltonSequence(int dims, uint64_t seed);

  int dims() const { return static_cast<int>(bases_.size()); }
  // Point `index`, one coordinate in [0, 1) per dimension.
  std::vector<double> Point(uint64_t index) const;

 private:
  // Constant after construction; one entry per dimension.
  std::vector<int> bases_;                    // the first primes
  std::vector<std::vector<int>> digit_maps_;  // digit scrambling, map[0] == 0
  std::vector<double> shifts_;                // Cranley-Patterson rotation in [0, 1)
};

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_SAMPLING_H_
