#include "search/internal/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

void FlattenInto(const ParameterConfig& config, int parent, const ConditionalChild* condition,
                 std::vector<FlatParameter>& out) {
  FlatParameter flat;
  flat.config = config;
  flat.config.children.clear();
  flat.parent = parent;
  if (condition != nullptr) {
    flat.parent_numbers = condition->parent_numbers;
    flat.parent_categories = condition->parent_categories;
  }
  const int self = static_cast<int>(out.size());
  out.push_back(std::move(flat));
  for (const ConditionalChild& child : config.children) {
    for (const ParameterConfig& grandchild : child.parameters) {
      FlattenInto(grandchild, self, &child, out);
    }
  }
}

// Maps u in [0, 1] onto [lo, hi] following `scale`. Log scales need lo > 0; without it they
// fall back to linear rather than produce NaN.
double ScaleUnit(ScaleType scale, double lo, double hi, double u) {
  if (scale == ScaleType::kLinear || lo <= 0 || hi <= lo) return lo + u * (hi - lo);
  const double log_lo = std::log(lo);
  const double log_range = std::log(hi) - log_lo;
  if (scale == ScaleType::kLog) return std::exp(log_lo + u * log_range);
  // Reverse log: the mirror image of the log scale, so points crowd near hi.
  return hi + lo - std::exp(log_lo + (1 - u) * log_range);
}

double ClampUnit(double u) {
  if (!(u > 0)) return 0;  // also maps NaN to 0
  return std::min(u, 1.0);
}

// Element floor(u * n) of a list of n > 0 elements.
size_t IndexAtUnit(double u, size_t n) {
  const auto index = static_cast<size_t>(ClampUnit(u) * static_cast<double>(n));
  return std::min(index, n - 1);
}

int64_t RoundIntoRange(double value, double min, double max) {
  return std::llround(std::clamp(std::round(value), min, max));
}

}  // namespace

std::vector<FlatParameter> Flatten(const SearchSpace& space) {
  std::vector<FlatParameter> flat;
  for (const ParameterConfig& config : space.parameters) FlattenInto(config, -1, nullptr, flat);
  return flat;
}

ParameterValue ValueAtUnit(const ParameterConfig& config, double u) {
  u = ClampUnit(u);
  switch (config.type) {
    case ParameterType::kDouble:
      return std::clamp(ScaleUnit(config.scale, config.min, config.max, u), config.min, config.max);
    case ParameterType::kInteger: {
      // Widen by half a step on each side so that, on a linear scale, every integer gets
      // the same share of the unit interval (the end points included).
      const double value = ScaleUnit(config.scale, config.min - 0.5, config.max + 0.5, u);
      return RoundIntoRange(value, config.min, config.max);
    }
    case ParameterType::kDiscrete:
      if (config.discrete_values.empty()) return 0.0;  // invalid space; stay total
      return config.discrete_values[IndexAtUnit(u, config.discrete_values.size())];
    case ParameterType::kCategorical:
      if (config.categories.empty()) return std::string();
      return config.categories[IndexAtUnit(u, config.categories.size())];
  }
  return 0.0;
}

std::vector<ParameterValue> GridAxis(const ParameterConfig& config, int grid_points) {
  grid_points = std::max(grid_points, 2);
  std::vector<ParameterValue> axis;
  switch (config.type) {
    case ParameterType::kDouble: {
      for (int k = 0; k < grid_points; ++k) {
        const double u = static_cast<double>(k) / (grid_points - 1);
        const double value =
            std::clamp(ScaleUnit(config.scale, config.min, config.max, u), config.min, config.max);
        // The scale is monotone, so duplicates can only be neighbours.
        if (axis.empty() || std::get<double>(axis.back()) != value) axis.emplace_back(value);
      }
      break;
    }
    case ParameterType::kInteger: {
      const double count = config.max - config.min + 1;
      if (count <= grid_points) {
        for (double v = config.min; v <= config.max; ++v) axis.emplace_back(std::llround(v));
        break;
      }
      for (int k = 0; k < grid_points; ++k) {
        const double u = static_cast<double>(k) / (grid_points - 1);
        const int64_t value = RoundIntoRange(ScaleUnit(config.scale, config.min, config.max, u),
                                             config.min, config.max);
        if (axis.empty() || std::get<int64_t>(axis.back()) != value) axis.emplace_back(value);
      }
      break;
    }
    case ParameterType::kDiscrete:
      axis.assign(config.discrete_values.begin(), config.discrete_values.end());
      break;
    case ParameterType::kCategorical:
      axis.assign(config.categories.begin(), config.categories.end());
      break;
  }
  return axis;
}

bool ConditionHolds(const FlatParameter& child, const ParameterValue& parent_value) {
  if (const auto* category = std::get_if<std::string>(&parent_value)) {
    return std::find(child.parent_categories.begin(), child.parent_categories.end(), *category) !=
           child.parent_categories.end();
  }
  const double number = std::holds_alternative<double>(parent_value)
                            ? std::get<double>(parent_value)
                            : static_cast<double>(std::get<int64_t>(parent_value));
  return std::find(child.parent_numbers.begin(), child.parent_numbers.end(), number) !=
         child.parent_numbers.end();
}

ParameterDict AssembleActive(absl::Span<const FlatParameter> flat,
                             absl::Span<const ParameterValue> values) {
  ParameterDict dict;
  std::vector<bool> active(flat.size(), false);
  for (size_t i = 0; i < flat.size() && i < values.size(); ++i) {
    const int parent = flat[i].parent;
    // Pre-order: a parent always precedes its children.
    active[i] = parent < 0 || (active[parent] && ConditionHolds(flat[i], values[parent]));
    if (active[i]) dict.insert_or_assign(flat[i].config.name, values[i]);
  }
  return dict;
}

uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  return Mix64(Mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (stream * 0xd1b54a32d192ed03ULL));
}

uint64_t SplitMix64::Next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return Mix64(state_);
}

double SplitMix64::NextUnit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

uint64_t SplitMix64::NextBelow(uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
}

std::vector<int> FirstPrimes(int n) {
  std::vector<int> primes;
  for (int candidate = 2; static_cast<int>(primes.size()) < n; ++candidate) {
    bool prime = true;
    for (int p : primes) {
      if (p * p > candidate) break;
      if (candidate % p == 0) {
        prime = false;
        break;
      }
    }
    if (prime) primes.push_back(candidate);
  }
  return primes;
}

double ScrambledRadicalInverse(uint64_t index, int base, absl::Span<const int> digit_map) {
  const double inv_base = 1.0 / base;
  double factor = inv_base;
  double result = 0;
  while (index > 0) {
    const auto digit = static_cast<size_t>(index % static_cast<uint64_t>(base));
    result += digit_map[digit] * factor;
    index /= static_cast<uint64_t>(base);
    factor *= inv_base;
  }
  return std::min(result, std::nextafter(1.0, 0.0));
}

HaltonSequence::HaltonSequence(int dims, uint64_t seed) : bases_(FirstPrimes(dims)) {
  // A stream no trial index reaches, so these draws are independent of RANDOM's.
  SplitMix64 rng(StreamSeed(seed, std::numeric_limits<uint64_t>::max()));
  digit_maps_.reserve(bases_.size());
  shifts_.reserve(bases_.size());
  for (int base : bases_) {
    // A random permutation of the non-zero digits (0 stays 0 so that the implicit trailing
    // zeros of every index stay zero). It breaks the strong correlation between the leading
    // points of neighbouring high-prime dimensions.
    std::vector<int> digit_map(base);
    for (int d = 0; d < base; ++d) digit_map[d] = d;
    for (int d = base - 1; d > 1; --d) {
      const auto other = 1 + static_cast<int>(rng.NextBelow(static_cast<uint64_t>(d)));
      std::swap(digit_map[d], digit_map[other]);
    }
    digit_maps_.push_back(std::move(digit_map));
    shifts_.push_back(rng.NextUnit());
  }
}

std::vector<double> HaltonSequence::Point(uint64_t index) const {
  std::vector<double> point;
  point.reserve(bases_.size());
  for (size_t d = 0; d < bases_.size(); ++d) {
    const double x =
        ScrambledRadicalInverse(index + kSkippedPoints, bases_[d], digit_maps_[d]) + shifts_[d];
    point.push_back(x - std::floor(x));
  }
  return point;
}

}  // namespace evoscale::search::internal
