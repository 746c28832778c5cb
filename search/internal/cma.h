// A CMA-ES Gaussian model (Hansen's (mu/mu_w, lambda)-CMA-ES with cumulative step-size
// adaptation) that accepts any evaluated point as a member of its current generation: the
// GENETIC designer's memetic step. Points it did not sample itself are "injected" (Hansen
// 2011, "Injecting external solutions into CMA-ES"): their Mahalanobis step is clipped so
// that foreign points cannot blow up the step size. A generation closes every lambda() told
// points, in the order they were told, so the model is a function of that sequence only.
//
// Cost: Tell is O(d) and every lambda-th call O(lambda d^2 + d^3); Sample O(d^2). Not
// thread-safe.
#ifndef EVOSCALE_SEARCH_INTERNAL_CMA_H_
#define EVOSCALE_SEARCH_INTERNAL_CMA_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "search/internal/fitness.h"
#include "search/internal/sampling.h"

namespace evoscale::search::internal {

// A standard normal draw from `rng` (Box-Muller, one value per two uniforms; portable).
double NextGaussian(SplitMix64& rng);

class CmaModel {
 public:
  // `dims` >= 1. `lambda` <= 0 picks the default 4 + floor(3 ln dims).
  explicit CmaModel(int dims, int lambda = 0);

  // Starts (or restarts) at `mean` with step size `sigma` and an identity covariance.
  void Reset(const Eigen::VectorXd& mean, double sigma);
  bool initialized() const { return initialized_; }

  // Adds an evaluated point to the current generation; closes it after lambda() points.
  void Tell(const Eigen::VectorXd& x, const Fitness& fitness);

  // A point drawn from N(mean, sigma^2 C). Does not change the model. With `radius` > 0,
  // the standard normal vector behind it is scaled to that length first: only its direction
  // is random (candidates that a surrogate screens keep the model's step statistics).
  Eigen::VectorXd Sample(SplitMix64& rng, double radius = 0) const;
  // The length of a d-dimensional standard normal vector (a chi draw).
  double SampleRadius(SplitMix64& rng) const;

  int lambda() const { return lambda_; }
  int64_t generations() const { return generations_; }
  double sigma() const { return sigma_; }
  const Eigen::VectorXd& mean() const { return mean_; }
  // sigma times the root of the covariance's largest and mean eigenvalue: the longest and a
  // typical axis of the sampling ellipsoid.
  double MaxStdDev() const;
  double TypicalStdDev() const;

 private:
  void CloseGeneration();

  // Constant after construction.
  const int dims_;
  const int lambda_;
  const int mu_;
  std::vector<double> weights_;  // mu positive recombination weights, summing to 1
  double mu_eff_ = 0;
  double c_sigma_ = 0, d_sigma_ = 0, c_c_ = 0, c_1_ = 0, c_mu_ = 0, chi_n_ = 0;

  bool initialized_ = false;
  int64_t generations_ = 0;
  Eigen::VectorXd mean_;
  double sigma_ = 0;
  Eigen::MatrixXd cov_;
  Eigen::MatrixXd basis_;         // eigenvectors of cov_ (columns)
  Eigen::VectorXd axis_lengths_;  // square roots of its eigenvalues
  Eigen::VectorXd path_sigma_, path_c_;
  // The open generation: points and their fitness, in the order told.
  std::vector<std::pair<Eigen::VectorXd, Fitness>> generation_;
};

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_CMA_H_
