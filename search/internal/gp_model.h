// A Gaussian-process model of the objective over genomes, the GENETIC designer's model of
// what a configuration will score (its acquisition, acquisition.h, is maximised by the GA's
// own moves).
//
// Kernel: Matérn-5/2 with automatic relevance determination, one inverse squared length
// scale per non-fixed gene: a numeric gene (continuous or ordinal, already on its log or
// linear scale in [0, 1]) by its difference, a categorical gene by a mismatch of categories
// (Hamming: the one-hot embedding, so the kernel stays positive definite). A conditional gene
// inactive at a point takes a fixed value there (numeric: the middle; categorical: a category
// of its own): two points on the same branch compare by it, points on different branches are
// already apart by their parent's category. k(a, b) = s^2 (1 + sqrt5 r + 5 r^2 / 3)
// exp(-sqrt5 r), r^2 = sum_g rho_g d_g(a, b); observations add noise^2 = minimum + learned.
//
// Targets: the trials' values, warped (WarpedTargets: the better half as measured, the worse
// half by the normal quantile of its rank at the better half's spread, so that outliers and
// objectives spanning decades do not flatten the region that matters), standardised, and
// shifted so that the prior mean is the worst of them (far from every trial a point is
// presumed as bad as the worst: with the data's mean there, expected improvement chased the
// variance at the corners of the space, a sixth of the trials on a 7-D bowl, and a batch of
// eight went to the corners once its first suggestions were fantasies at the optimum).
//
// Hyperparameters (rho per gene, s^2, noise) maximise the marginal likelihood times priors
// (the priors Optuna's GPSampler uses: -(0.1 / rho + 0.1 rho) per length scale, Gamma(2, 1)
// on s^2, Gamma(1.1, 30) on the noise), by L-BFGS in log space from fixed defaults, so they
// are a function of the points alone.
//
// Cost: FitHyperparameters O(iterations x (n^3 + n^2 d)); Condition O(n^3 + n^2 d);
// AddFantasies O(p (n + p)^2 + p n d); Predict O(n d + n^2). A conditioned model is constant
// between calls, so it is safe to read from several threads; copying it copies its factor.
#ifndef EVOSCALE_SEARCH_INTERNAL_GP_MODEL_H_
#define EVOSCALE_SEARCH_INTERNAL_GP_MODEL_H_

#include <cstddef>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"

namespace evoscale::search::internal {

struct GpHyperparameters {
  Eigen::VectorXd inverse_squared_lengths;  // rho, one per model gene (GpModel::genes())
  double signal = 1;                        // s^2
  double noise = 1e-2;                      // observation noise variance, minimum included
};

// The latent function's posterior at a point.
struct GpPrediction {
  double mean = 0;
  double variance = 0;
};

class GpModel {
 public:
  // The smallest observation noise variance (standardised targets): keeps the factor well
  // conditioned on deterministic objectives.
  static constexpr double kMinNoise = 1e-6;

  // `codec` must outlive the model.
  explicit GpModel(const GenomeCodec& codec);

  // The genes the kernel sees: every non-fixed one, in genome order.
  const std::vector<size_t>& genes() const { return genes_; }

  // The defaults the fit starts from (rho 1, s^2 1, noise 1e-2).
  GpHyperparameters DefaultHyperparameters() const;

  // Maximum a-posteriori hyperparameters for `targets[i]` observed at `points[i]`, from the
  // defaults, at most `max_iterations` L-BFGS iterations. With fewer than two points, the
  // defaults.
  GpHyperparameters FitHyperparameters(absl::Span<const Genome> points,
                                       absl::Span<const double> targets,
                                       int max_iterations = 100) const;

  // The posterior given these observations and hyperparameters. False (and unconditioned)
  // with no points or when the kernel matrix cannot be factored even with added jitter.
  bool Condition(absl::Span<const Genome> points, absl::Span<const double> targets,
                 const GpHyperparameters& hyperparameters);
  bool conditioned() const { return conditioned_; }
  size_t size() const { return static_cast<size_t>(targets_.size()); }
  const GpHyperparameters& hyperparameters() const { return hyper_; }
  // The lowest posterior mean at an observed point (standardised scale): the incumbent
  // that expected improvement is measured against.
  double best_target() const { return best_target_; }

  // Conditions on `points` as if each had been observed exactly, at the model's mean there
  // or at `floor` where the mean is lower (pending trials: near them the model is sure and
  // expects no better than `floor`, so the acquisition looks elsewhere). Requires
  // conditioned(); next to a point the model holds, a fantasy is a slightly noisy one.
  void AddFantasies(absl::Span<const Genome> points, double floor);

  // The posterior of the latent function at `x`. Requires conditioned().
  GpPrediction Predict(const Genome& x) const;

  // log expected improvement below `best` at `x` (minimisation), finite far into the tail.
  // With `gradient`, also d/dx for each gene (0 for categorical, fixed and inactive genes).
  // Requires conditioned().
  double LogExpectedImprovement(const Genome& x, double best,
                                std::vector<double>* gradient = nullptr) const;

 private:
  // The model's coordinates of `genome`: numeric genes as they are (inactive: 0.5),
  // categorical genes as their category index (inactive: -1).
  void Features(const Genome& genome, double* out) const;
  // Per gene, the distance term between two feature rows.
  double Term(size_t feature, double a, double b) const {
    if (categorical_[feature]) return a == b ? 0 : 1;
    return (a - b) * (a - b);
  }
  double SquaredDistance(const double* a, const double* b, const Eigen::VectorXd& rho) const;
  // k(x, x_i) for every stored point i, x given by its feature row; with `slope`, also
  // s^2 (5/3)(1 + sqrt5 r_i) e^{-sqrt5 r_i}, the factor in every derivative by x.
  Eigen::VectorXd KernelTo(const double* row, Eigen::VectorXd* slope = nullptr) const;
  // Factors K + noise I of the stored features; false when it fails.
  bool Factor();

  // Constant after construction.
  const GenomeCodec* codec_;
  std::vector<size_t> genes_;      // the kernel's genes
  std::vector<bool> categorical_;  // per kernel gene

  // Set by Condition and AddFantasies.
  bool conditioned_ = false;
  GpHyperparameters hyper_;
  std::vector<double> features_;  // size() x genes_.size(), row-major
  Eigen::VectorXd targets_;
  Eigen::MatrixXd factor_;        // lower Cholesky factor of K + noise I
  Eigen::VectorXd alpha_;         // (K + noise I)^-1 targets
  double best_target_ = 0;
};

// The GP targets of trials ranked by `fitness` (failed ones excluded: `kept` receives the
// indices used, in order). Ranked by Better: the better half keeps its first loss, the worse
// half gets median + spread x the normal quantile of its rank (spread: the better half's
// root-mean-square distance to the median), then all are standardised to variance 1 and
// shifted to put the worst at 0.
// Where the better half holds a trial whose loss cannot be compared (infeasible, stopped
// early, non-finite), every trial is placed by its rank's normal quantile.
std::vector<double> WarpedTargets(absl::Span<const Fitness> fitness, std::vector<size_t>* kept);

// The inverse of the standard normal distribution function (Acklam's rational
// approximation, relative error below 1.2e-9), for p in (0, 1).
double NormalQuantile(double p);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_GP_MODEL_H_
