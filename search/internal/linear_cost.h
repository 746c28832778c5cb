// A log-linear model of what a full run costs, for the cost-aware GENETIC designer: log
// core-seconds ~ intercept + w . features(genome), by ridge regression with the ridge chosen
// by leave-one-out error. Features: each numeric gene's unit coordinate (0 when inactive),
// each category of a categorical gene as an indicator. Unlike a Gaussian process, whose mean
// falls back to the average away from its points, a line extrapolates: what makes a trial
// dear (more rounds, a slower booster) holds across the space after a handful of trials.
//
// Cost: Fit O(n f^2 + f^3) per ridge tried, n points of f features; Predict O(f).
#ifndef EVOSCALE_SEARCH_INTERNAL_LINEAR_COST_H_
#define EVOSCALE_SEARCH_INTERNAL_LINEAR_COST_H_

#include <cstddef>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/internal/genome.h"

namespace evoscale::search::internal {

class LinearCostModel {
 public:
  // `codec` must outlive the model. Fewer than `min_points` points leave it unfitted.
  LinearCostModel(const GenomeCodec& codec, size_t min_points);

  // Refits on `log_costs[i]`, the log cost of a full run of `genomes[i]`.
  void Fit(absl::Span<const Genome> genomes, absl::Span<const double> log_costs);
  bool fitted() const { return fitted_; }
  // The predicted log cost of a full run of `genome`. Requires fitted().
  double Predict(const Genome& genome) const;

 private:
  Eigen::VectorXd Features(const Genome& genome) const;

  const GenomeCodec* codec_;
  size_t min_points_;
  Eigen::Index width_ = 0;  // features per genome
  bool fitted_ = false;
  double intercept_ = 0;
  Eigen::VectorXd weights_;
};

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_LINEAR_COST_H_
