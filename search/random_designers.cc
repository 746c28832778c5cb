// RANDOM, QUASI_RANDOM and GRID: stateless designers whose suggestions are a pure function
// of (problem, trial_index + j).
#include "search/internal/random_designers.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "search/designer.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

// Common shape of the stateless designers: history is ignored and suggestion j of a call is
// point `trial_index + j` of the designer's sequence.
class SequenceDesigner : public Designer {
 public:
  explicit SequenceDesigner(const SearchSpace& space) : flat_(Flatten(space)) {}

  void Update(absl::Span<const Trial> /*newly_completed*/,
              absl::Span<const Trial> /*pending*/) override {}

  absl::StatusOr<std::vector<ParameterDict>> Suggest(int count, int64_t trial_index) final {
    if (count < 0) {
      return absl::InvalidArgumentError(absl::StrCat("count must be >= 0, got ", count));
    }
    if (trial_index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("trial_index must be >= 0, got ", trial_index));
    }
    std::vector<ParameterDict> suggestions;
    suggestions.reserve(count);
    for (int j = 0; j < count; ++j) {
      std::optional<ParameterDict> point = PointAt(static_cast<uint64_t>(trial_index) + j);
      if (!point.has_value()) break;  // the sequence is exhausted
      suggestions.push_back(*std::move(point));
    }
    return suggestions;
  }

 protected:
  // Point `index` of the sequence, or nullopt past its end.
  virtual std::optional<ParameterDict> PointAt(uint64_t index) const = 0;

  // Constant after construction.
  const std::vector<FlatParameter> flat_;  // one coordinate per parameter, depth-first
};

class RandomDesigner final : public SequenceDesigner {
 public:
  RandomDesigner(const SearchSpace& space, uint64_t seed) : SequenceDesigner(space), seed_(seed) {}

 private:
  std::optional<ParameterDict> PointAt(uint64_t index) const override {
    SplitMix64 rng(StreamSeed(seed_, index));
    std::vector<ParameterValue> values;
    values.reserve(flat_.size());
    // Draw every coordinate, active or not, so each parameter always uses the same draw.
    for (const FlatParameter& parameter : flat_) {
      values.push_back(ValueAtUnit(parameter.config, rng.NextUnit()));
    }
    return AssembleActive(flat_, values);
  }

  const uint64_t seed_;
};

class QuasiRandomDesigner final : public SequenceDesigner {
 public:
  QuasiRandomDesigner(const SearchSpace& space, uint64_t seed)
      : SequenceDesigner(space), halton_(static_cast<int>(flat_.size()), seed) {}

 private:
  std::optional<ParameterDict> PointAt(uint64_t index) const override {
    const std::vector<double> unit = halton_.Point(index);
    std::vector<ParameterValue> values;
    values.reserve(flat_.size());
    for (size_t d = 0; d < flat_.size(); ++d) values.push_back(ValueAtUnit(flat_[d].config, unit[d]));
    return AssembleActive(flat_, values);
  }

  const HaltonSequence halton_;  // constant after construction
};

class GridDesigner final : public SequenceDesigner {
 public:
  GridDesigner(const SearchSpace& space, int grid_points) : SequenceDesigner(space) {
    axes_.reserve(flat_.size());
    for (const FlatParameter& parameter : flat_) {
      axes_.push_back(GridAxis(parameter.config, grid_points));
      const uint64_t radix = axes_.back().size();
      // Saturate: a grid too large to count is never exhausted in practice.
      if (radix == 0) {
        size_ = 0;
      } else if (size_ > std::numeric_limits<uint64_t>::max() / radix) {
        size_ = std::numeric_limits<uint64_t>::max();
      } else {
        size_ *= radix;
      }
    }
  }

 private:
  std::optional<ParameterDict> PointAt(uint64_t index) const override {
    if (index >= size_) return std::nullopt;
    std::vector<ParameterValue> values;
    values.reserve(flat_.size());
    // Mixed radix, first axis fastest. Inactive children still consume their digit, so
    // conditional spaces repeat points; the grid stays a plain product.
    for (const std::vector<ParameterValue>& axis : axes_) {
      values.push_back(axis[index % axis.size()]);
      index /= axis.size();
    }
    return AssembleActive(flat_, values);
  }

  // Constant after construction.
  std::vector<std::vector<ParameterValue>> axes_;  // one per coordinate
  uint64_t size_ = 1;                              // product of the axis sizes, saturated
};

}  // namespace

std::unique_ptr<Designer> NewRandomDesigner(const SearchSpace& space, uint64_t seed) {
  return std::make_unique<RandomDesigner>(space, seed);
}

std::unique_ptr<Designer> NewQuasiRandomDesigner(const SearchSpace& space, uint64_t seed) {
  return std::make_unique<QuasiRandomDesigner>(space, seed);
}

std::unique_ptr<Designer> NewGridDesigner(const SearchSpace& space, int grid_points) {
  return std::make_unique<GridDesigner>(space, grid_points);
}

}  // namespace evoscale::search::internal
