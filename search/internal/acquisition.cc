#include "search/internal/acquisition.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "search/internal/genome.h"
#include "search/internal/gp_model.h"

namespace evoscale::search::internal {
namespace {

constexpr int kGradientSteps = 30;
// The first gradient step moves the fastest gene by this share of its length scale.
constexpr double kFirstStep = 0.1;
// Ordinal genes with at most this many cells are searched cell by cell.
constexpr int64_t kStepwiseCells = 16;
constexpr int kNeighbourPasses = 3;

// Gradient ascent on the numeric genes of `x`, the step scaled per gene by its squared
// length scale (1 / rho) and adapted: doubled after a gain, quartered after a loss.
void GradientAscent(const GpModel& model, double best, AcquisitionOptimum& x) {
  const std::vector<size_t>& genes = model.genes();
  const Eigen::VectorXd& rho = model.hyperparameters().inverse_squared_lengths;
  std::vector<double> gradient;
  x.value = model.LogExpectedImprovement(x.genome, best, &gradient);
  double step = 0;
  for (int k = 0; k < kGradientSteps; ++k) {
    // direction_g = gradient_g / rho_g; size the first step so the fastest gene moves
    // kFirstStep of its length scale (1 / sqrt(rho)).
    double fastest = 0;
    for (size_t f = 0; f < genes.size(); ++f) {
      const double r = rho[static_cast<Eigen::Index>(f)];
      fastest = std::max(fastest, std::abs(gradient[genes[f]]) / std::sqrt(r));
    }
    if (!(fastest > 0)) return;
    if (step == 0) step = kFirstStep / fastest;
    Genome next = x.genome;
    for (size_t f = 0; f < genes.size(); ++f) {
      const size_t g = genes[f];
      if (gradient[g] == 0) continue;
      next[g] = std::clamp(next[g] + step * gradient[g] / rho[static_cast<Eigen::Index>(f)], 0.0, 1.0);
    }
    std::vector<double> next_gradient;
    const double value = model.LogExpectedImprovement(next, best, &next_gradient);
    if (value > x.value) {
      x.genome = std::move(next);
      x.value = value;
      gradient = std::move(next_gradient);
      step *= 2;
    } else {
      step *= 0.25;
      if (step * fastest < 1e-6) return;
    }
  }
}

// One-gene moves on the discrete genes while one improves.
void NeighbourSearch(const GpModel& model, const GenomeCodec& codec, double best,
                     AcquisitionOptimum& x) {
  for (int pass = 0; pass < kNeighbourPasses; ++pass) {
    AcquisitionOptimum improved = x;
    auto consider = [&](size_t g, double gene) {
      Genome candidate = x.genome;
      candidate[g] = gene;
      const double value = model.LogExpectedImprovement(candidate, best);
      if (value > improved.value) improved = {std::move(candidate), value};
    };
    for (size_t g : model.genes()) {
      const int64_t cells = codec.cardinality(g);
      if (codec.kind(g) == GeneKind::kCategorical) {
        const size_t current = CellOf(x.genome[g], cells);
        for (size_t c = 0; c < static_cast<size_t>(cells) && cells <= 64; ++c) {
          if (c != current) consider(g, CellCentre(c, static_cast<size_t>(cells)));
        }
      } else if (codec.kind(g) == GeneKind::kOrdinal && cells <= kStepwiseCells) {
        const double width = 1.0 / static_cast<double>(cells);
        if (x.genome[g] - width >= 0) consider(g, x.genome[g] - width);
        if (x.genome[g] + width <= 1) consider(g, x.genome[g] + width);
      }
    }
    if (!(improved.value > x.value)) return;
    x = std::move(improved);
  }
}

}  // namespace

AcquisitionOptimum MaximiseAcquisition(const GpModel& model, const GenomeCodec& codec,
                                       double best, std::vector<Genome> candidates, int refine) {
  std::vector<double> values(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    values[i] = model.LogExpectedImprovement(candidates[i], best);
  }
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t kept = std::min(order.size(), static_cast<size_t>(std::max(1, refine)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                    [&](size_t a, size_t b) { return values[a] > values[b]; });
  AcquisitionOptimum result{.genome = candidates[order[0]], .value = values[order[0]]};
  for (size_t k = 0; k < kept; ++k) {
    AcquisitionOptimum x{.genome = std::move(candidates[order[k]]), .value = values[order[k]]};
    GradientAscent(model, best, x);
    NeighbourSearch(model, codec, best, x);
    if (x.value > result.value) result = std::move(x);
  }
  return result;
}

}  // namespace evoscale::search::internal
