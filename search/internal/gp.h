// A small Gaussian-process surrogate over genomes: the GENETIC designer ranks candidate
// offspring by its posterior mean and suggests only the most promising.
//
// It is fitted on at most kMaxPoints completed trials (the best half and the most recent
// half, so it knows both where the optimum lies and where the search is now), on the
// trials' ranks rather than their values (robust to objectives spanning orders of magnitude
// and to outliers), with a squared-exponential kernel on genome distance: numeric and
// ordinal genes by their difference, a categorical gene by a fixed distance when the
// categories differ, and an inactive conditional gene (on either side) not at all. The
// length scale and the noise level are chosen by leave-one-out error among a few multiples
// of the median distance between the points, re-chosen every kReselectEvery fits.
//
// Cost: Fit O(m^2 d + m^3) for m = min(n, kMaxPoints) points of d genes (four times that
// when re-choosing its scales); Predict O(m d). Constant between fits, so safe to read from
// several threads.
#ifndef EVOSCALE_SEARCH_INTERNAL_GP_H_
#define EVOSCALE_SEARCH_INTERNAL_GP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"

namespace evoscale::search::internal {

class GpSurrogate {
 public:
  static constexpr size_t kMinPoints = 8;
  static constexpr size_t kMaxPoints = 80;
  static constexpr int kReselectEvery = 10;

  // `codec` must outlive the surrogate. Fewer than `min_points` (at least 3) ranked trials
  // leave it unfitted.
  explicit GpSurrogate(const GenomeCodec& codec, size_t min_points = kMinPoints)
      : codec_(&codec), min_points_(std::max<size_t>(3, min_points)) {}

  // Refits on the trials (`genomes[i]` scored `fitness[i]`; failed ones are left out).
  void Fit(absl::Span<const Genome> genomes, absl::Span<const Fitness> fitness);
  bool fitted() const { return fitted_; }

  // The posterior mean at `x` on the rank scale: lower is predicted better. Requires
  // fitted().
  double Predict(const Genome& x) const;

 private:
  double SquaredDistance(const double* a, const double* b) const;
  // Builds the points, targets and distances of these trials; false with too few.
  bool Prepare(absl::Span<const Genome> genomes, absl::Span<const Fitness> fitness);
  // Leave-one-out mean squared error of a fit with these scales; NaN when it fails.
  double LooError(double length, double noise) const;
  bool Solve(double length, double noise);

  const GenomeCodec* codec_;
  size_t min_points_;
  bool fitted_ = false;
  size_t selected_at_ = SIZE_MAX;  // trials the scales were chosen on
  double factor_ = 1, noise_ = 0;  // the chosen scales: length = factor x median distance
  double median_ = 0, length_ = 0;
  size_t m_ = 0;
  std::vector<double> points_;    // m x genes, row-major; NaN = inactive gene
  Eigen::VectorXd targets_;       // centred ranks in [-0.5, 0.5]
  Eigen::MatrixXd distances_;     // squared distances between the points
  Eigen::VectorXd alpha_;         // (K + noise I)^-1 targets
};

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_GP_H_
