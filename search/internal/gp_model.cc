#include "search/internal/gp_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/lbfgs.h"
#include "search/internal/parzen.h"

namespace evoscale::search::internal {
namespace {

const double kSqrt5 = std::sqrt(5.0);
constexpr double kInactiveNumeric = 0.5;
constexpr double kInactiveCategory = -1;
// Jitter added to the diagonal, in multiples of s^2, when a factorisation fails.
constexpr double kJitters[] = {0, 1e-8, 1e-6, 1e-4};
// Predicted variances are floored here (a multiple of s^2): log EI stays finite at the data.
constexpr double kMinVarianceShare = 1e-12;
// A fantasy's own variance in the factor (a multiple of s^2): nearly exact.
constexpr double kFantasyJitter = 1e-8;

// Matérn-5/2 correlation at distance r.
double Matern(double r) { return (1 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r); }
// -(1/r) dMatern/dr: the factor that multiplies d(r^2)/2 in every derivative.
double MaternSlope(double r) { return 5.0 / 3.0 * (1 + kSqrt5 * r) * std::exp(-kSqrt5 * r); }

// log(phi(z) + z Phi(z)) and Phi(z) / (phi(z) + z Phi(z)), phi(z) / (...) for z below the
// threshold by the asymptotic series of the Mills ratio (the direct form cancels there).
struct ExpectedImprovementTerms {
  double log_h = 0;
  double cdf_over_h = 0;
  double pdf_over_h = 0;
};

ExpectedImprovementTerms EiTerms(double z) {
  constexpr double kLogSqrt2Pi = 0.91893853320467274178;
  if (z > -6) {
    const double pdf = std::exp(-0.5 * z * z - kLogSqrt2Pi);
    const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
    const double h = pdf + z * cdf;
    return {std::log(h), cdf / h, pdf / h};
  }
  // x = -z >= 6. h / phi = 1 - x R(x) = 1/x^2 - 3/x^4 + 15/x^6 - 105/x^8 + 945/x^10, and
  // Phi(z) / phi(z) = R(x) = (1/x)(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8).
  const double x = -z, u = 1 / (x * x);
  const double s = u * (1 - u * (3 - u * (15 - u * (105 - u * 945))));
  const double r = (1 - u * (1 - u * (3 - u * (15 - u * 105)))) / x;
  return {-0.5 * z * z - kLogSqrt2Pi + std::log(s), r / s, 1 / s};
}


// -log(marginal likelihood x priors) of the hyperparameters theta = (log rho (d), log s^2,
// log(noise - kMinNoise)) given the pairwise distance terms of the points and their targets,
// with its gradient: dL/dtheta = 1/2 tr(W dK/dtheta), W = alpha alpha^T - K^-1.
class NegativeLogPosterior {
 public:
  NegativeLogPosterior(std::vector<double> terms, Eigen::VectorXd targets, size_t genes)
      : terms_(std::move(terms)), y_(std::move(targets)), d_(genes),
        r_(static_cast<size_t>(y_.size() * (y_.size() - 1) / 2)) {}

  double operator()(const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) {
    const auto n = y_.size();
    const auto dd = static_cast<Eigen::Index>(d_);
    const Eigen::VectorXd rho = theta.head(dd).array().exp();
    const double signal = std::exp(theta[dd]);
    const double free_noise = std::exp(theta[dd + 1]);
    const double noise = free_noise + GpModel::kMinNoise;
    Eigen::MatrixXd k(n, n);
    for (Eigen::Index i = 0, p = 0; i < n; ++i) {
      k(i, i) = signal + noise;
      for (Eigen::Index j = i + 1; j < n; ++j, ++p) {
        const double* t = &terms_[static_cast<size_t>(p) * d_];
        double r2 = 0;
        for (size_t f = 0; f < d_; ++f) r2 += rho[static_cast<Eigen::Index>(f)] * t[f];
        r_[static_cast<size_t>(p)] = std::sqrt(r2);
        k(i, j) = k(j, i) = signal * Matern(r_[static_cast<size_t>(p)]);
      }
    }
    Eigen::LLT<Eigen::MatrixXd> llt(k);
    if (llt.info() != Eigen::Success) return std::numeric_limits<double>::infinity();
    const Eigen::VectorXd alpha = llt.solve(y_);
    const Eigen::MatrixXd& l = llt.matrixLLT();
    double log_det = 0;
    for (Eigen::Index i = 0; i < n; ++i) log_det += 2 * std::log(l(i, i));
    Eigen::MatrixXd w = -llt.solve(Eigen::MatrixXd::Identity(n, n));
    w.noalias() += alpha * alpha.transpose();
    Eigen::VectorXd grad = Eigen::VectorXd::Zero(dd + 2);
    double signal_grad = 0.5 * signal * w.diagonal().sum();
    for (Eigen::Index i = 0, p = 0; i < n; ++i) {
      for (Eigen::Index j = i + 1; j < n; ++j, ++p) {
        const double r = r_[static_cast<size_t>(p)];
        signal_grad += w(i, j) * signal * Matern(r);
        // dK/drho_f = -s^2 (5/6)(1 + sqrt5 r) e^{-sqrt5 r} term_f, on (i,j) and (j,i).
        const double g = -w(i, j) * signal * 0.5 * MaternSlope(r);
        const double* t = &terms_[static_cast<size_t>(p) * d_];
        for (size_t f = 0; f < d_; ++f) grad[static_cast<Eigen::Index>(f)] += g * t[f];
      }
    }
    // Priors (GPSampler's): -(0.1 / rho + 0.1 rho); Gamma(2, 1) on s^2; Gamma(1.1, 30) on noise.
    double log_prior = 0;
    for (Eigen::Index f = 0; f < dd; ++f) {
      grad[f] = grad[f] * rho[f] + 0.1 / rho[f] - 0.1 * rho[f];
      log_prior -= 0.1 / rho[f] + 0.1 * rho[f];
    }
    grad[dd] = signal_grad + 1 - signal;
    log_prior += std::log(signal) - signal;
    grad[dd + 1] = 0.5 * free_noise * w.diagonal().sum() + free_noise * (0.1 / noise - 30);
    log_prior += 0.1 * std::log(noise) - 30 * noise;
    *gradient = -grad;
    return 0.5 * y_.dot(alpha) + 0.5 * log_det - log_prior;
  }

 private:
  const std::vector<double> terms_;  // per pair (i < j, row-major), per gene
  const Eigen::VectorXd y_;
  const size_t d_;
  std::vector<double> r_;  // per pair, the distance of the last evaluation
};
}  // namespace

double NormalQuantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00, 2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  if (p < kLow) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - kLow) return -NormalQuantile(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

std::vector<double> WarpedTargets(absl::Span<const Fitness> fitness, std::vector<size_t>* kept) {
  kept->clear();
  for (size_t i = 0; i < fitness.size(); ++i) {
    if (!fitness[i].failed && !fitness[i].losses.empty()) kept->push_back(i);
  }
  const size_t n = kept->size();
  std::vector<double> targets(n);
  if (n == 0) return targets;
  std::vector<size_t> order(n);  // positions in `kept`, best first
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Better(fitness[(*kept)[a]], fitness[(*kept)[b]]);
  });
  const size_t middle = (n - 1) / 2;  // the median's rank
  auto plain = [&](size_t position) {
    const Fitness& f = fitness[(*kept)[position]];
    return f.violation == 0 && f.stopped_at == 0 && std::isfinite(f.losses[0]);
  };
  bool comparable = true;
  for (size_t r = 0; r <= middle; ++r) comparable = comparable && plain(order[r]);
  auto quantile = [&](size_t rank) {
    return NormalQuantile((static_cast<double>(rank) + 0.5) / static_cast<double>(n));
  };
  if (comparable) {
    const double median = fitness[(*kept)[order[middle]]].losses[0];
    double spread = 0;
    for (size_t r = 0; r <= middle; ++r) {
      const double d = fitness[(*kept)[order[r]]].losses[0] - median;
      spread += d * d;
    }
    spread = std::sqrt(spread / static_cast<double>(middle + 1));
    if (!(spread > 0)) spread = 1;
    // The worse half's quantiles start just above the median's (0 for odd n).
    const double offset = quantile(middle);
    for (size_t r = 0; r < n; ++r) {
      targets[order[r]] = r <= middle ? fitness[(*kept)[order[r]]].losses[0]
                                      : median + spread * (quantile(r) - offset);
    }
  } else {
    for (size_t r = 0; r < n; ++r) targets[order[r]] = quantile(r);
  }
  double mean = 0;
  for (double t : targets) mean += t;
  mean /= static_cast<double>(n);
  double variance = 0;
  for (double t : targets) variance += (t - mean) * (t - mean);
  const double sd = std::sqrt(variance / static_cast<double>(n));
  for (double& t : targets) t = sd > 0 ? (t - mean) / sd : 0;
  // The model's prior mean (0) at the worst target: where no trial is near, a point is
  // presumed as bad as the worst trial, so expected improvement does not chase the variance
  // at the corners of the space, and a batch's fantasies spread it around the good regions.
  const double worst = *std::max_element(targets.begin(), targets.end());
  for (double& t : targets) t -= worst;
  return targets;
}

GpModel::GpModel(const GenomeCodec& codec) : codec_(&codec) {
  for (size_t g = 0; g < codec.size(); ++g) {
    if (codec.fixed(g)) continue;
    genes_.push_back(g);
    categorical_.push_back(codec.kind(g) == GeneKind::kCategorical);
  }
  hyper_ = DefaultHyperparameters();
}

GpHyperparameters GpModel::DefaultHyperparameters() const {
  return {.inverse_squared_lengths = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(genes_.size())),
          .signal = 1,
          .noise = 1e-2};
}

void GpModel::Features(const Genome& genome, double* out) const {
  const Genome masked = MaskInactive(*codec_, genome);
  for (size_t f = 0; f < genes_.size(); ++f) {
    const double v = masked[genes_[f]];
    if (categorical_[f]) {
      out[f] = std::isnan(v) ? kInactiveCategory
                             : static_cast<double>(CellOf(v, codec_->cardinality(genes_[f])));
    } else {
      out[f] = std::isnan(v) ? kInactiveNumeric : v;
    }
  }
}

double GpModel::SquaredDistance(const double* a, const double* b,
                                const Eigen::VectorXd& rho) const {
  double sum = 0;
  for (size_t f = 0; f < genes_.size(); ++f) {
    sum += rho[static_cast<Eigen::Index>(f)] * Term(f, a[f], b[f]);
  }
  return sum;
}

GpHyperparameters GpModel::FitHyperparameters(absl::Span<const Genome> points,
                                              absl::Span<const double> targets,
                                              int max_iterations) const {
  const size_t n = std::min(points.size(), targets.size());
  const size_t d = genes_.size();
  GpHyperparameters best = DefaultHyperparameters();
  if (n < 2 || d == 0) return best;
  std::vector<double> x(n * d);
  for (size_t i = 0; i < n; ++i) Features(points[i], &x[i * d]);
  // Per pair (i < j) and gene, the distance term: the kernel's only use of the points.
  std::vector<double> terms(n * (n - 1) / 2 * d);
  for (size_t i = 0, p = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j, ++p) {
      for (size_t f = 0; f < d; ++f) terms[p * d + f] = Term(f, x[i * d + f], x[j * d + f]);
    }
  }
  Eigen::VectorXd y(static_cast<Eigen::Index>(n));
  for (size_t i = 0; i < n; ++i) y[static_cast<Eigen::Index>(i)] = targets[i];
  NegativeLogPosterior objective(std::move(terms), std::move(y), d);
  const auto dd = static_cast<Eigen::Index>(d);
  Eigen::VectorXd start(dd + 2);
  start.head(dd) = best.inverse_squared_lengths.array().log();
  start[dd] = std::log(best.signal);
  start[dd + 1] = std::log(best.noise - kMinNoise);
  const LbfgsResult result = MinimiseLbfgs(
      [&](const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) { return objective(theta, gradient); },
      start, max_iterations, 1e-2);
  if (!std::isfinite(result.value)) return best;
  best.inverse_squared_lengths = result.x.head(dd).array().exp();
  best.signal = std::exp(result.x[dd]);
  best.noise = std::exp(result.x[dd + 1]) + kMinNoise;
  return best;
}

bool GpModel::Factor() {
  const size_t n = size(), d = genes_.size();
  const auto nn = static_cast<Eigen::Index>(n);
  Eigen::MatrixXd k(nn, nn);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      const double v = hyper_.signal * Matern(std::sqrt(SquaredDistance(
                                           &features_[i * d], &features_[j * d],
                                           hyper_.inverse_squared_lengths)));
      k(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = v;
      k(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(i)) = v;
    }
  }
  for (double jitter : kJitters) {
    k.diagonal().setConstant(hyper_.signal * (1 + jitter) + hyper_.noise);
    Eigen::LLT<Eigen::MatrixXd> llt(k);
    if (llt.info() != Eigen::Success) continue;
    factor_ = llt.matrixL();
    alpha_ = llt.solve(targets_);
    if (alpha_.allFinite()) return true;
  }
  return false;
}

bool GpModel::Condition(absl::Span<const Genome> points, absl::Span<const double> targets,
                        const GpHyperparameters& hyperparameters) {
  conditioned_ = false;
  const size_t n = std::min(points.size(), targets.size()), d = genes_.size();
  if (n == 0) return false;
  hyper_ = hyperparameters;
  features_.assign(n * d, 0);
  targets_.resize(static_cast<Eigen::Index>(n));
  for (size_t i = 0; i < n; ++i) {
    Features(points[i], &features_[i * d]);
    targets_[static_cast<Eigen::Index>(i)] = targets[i];
  }
  conditioned_ = Factor();
  // The best posterior mean at a trial: the posterior mean at point i is y_i - noise alpha_i
  // (equal to the best target where the noise is negligible, less fooled by a lucky draw
  // where it is not).
  best_target_ = std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; conditioned_ && i < targets_.size(); ++i) {
    best_target_ = std::min(best_target_, targets_[i] - hyper_.noise * alpha_[i]);
  }
  return conditioned_;
}

void GpModel::AddFantasies(absl::Span<const Genome> points, double floor) {
  const size_t d = genes_.size();
  std::vector<double> row(d);
  for (const Genome& point : points) {
    Features(point, row.data());
    const auto nn = static_cast<Eigen::Index>(size());
    const Eigen::VectorXd kx = KernelTo(row.data());
    // The factor grows by one row: [L 0; b^T c], b = L^-1 k, c = sqrt(k(x,x) - b^T b): a
    // fantasy is an exact observation (no noise), so the model is sure there.
    const Eigen::VectorXd b = factor_.triangularView<Eigen::Lower>().solve(kx);
    const double lie = std::max(kx.dot(alpha_), floor);
    // Next to a point the model already holds, the remainder vanishes: the fantasy then
    // counts as a slightly noisy observation instead of being lost.
    const double c2 =
        std::max(hyper_.signal * (1 + kFantasyJitter) - b.squaredNorm(), kFantasyJitter * hyper_.signal);
    Eigen::MatrixXd grown = Eigen::MatrixXd::Zero(nn + 1, nn + 1);
    grown.topLeftCorner(nn, nn) = factor_;
    grown.block(nn, 0, 1, nn) = b.transpose();
    grown(nn, nn) = std::sqrt(c2);
    factor_ = std::move(grown);
    features_.insert(features_.end(), row.begin(), row.end());
    targets_.conservativeResize(nn + 1);
    targets_[nn] = lie;
    alpha_ = factor_.transpose().triangularView<Eigen::Upper>().solve(
        factor_.triangularView<Eigen::Lower>().solve(targets_));
  }
}

Eigen::VectorXd GpModel::KernelTo(const double* row, Eigen::VectorXd* slope) const {
  const size_t n = size(), d = genes_.size();
  Eigen::VectorXd kx(static_cast<Eigen::Index>(n));
  if (slope != nullptr) slope->resize(static_cast<Eigen::Index>(n));
  for (size_t i = 0; i < n; ++i) {
    const double r = std::sqrt(
        SquaredDistance(&features_[i * d], row, hyper_.inverse_squared_lengths));
    kx[static_cast<Eigen::Index>(i)] = hyper_.signal * Matern(r);
    if (slope != nullptr) (*slope)[static_cast<Eigen::Index>(i)] = hyper_.signal * MaternSlope(r);
  }
  return kx;
}

GpPrediction GpModel::Predict(const Genome& x) const {
  std::vector<double> row(genes_.size());
  Features(x, row.data());
  const Eigen::VectorXd kx = KernelTo(row.data());
  const Eigen::VectorXd v = factor_.triangularView<Eigen::Lower>().solve(kx);
  return {.mean = kx.dot(alpha_),
          .variance = std::max(hyper_.signal - v.squaredNorm(), kMinVarianceShare * hyper_.signal)};
}

double GpModel::LogExpectedImprovement(const Genome& x, double best,
                                       std::vector<double>* gradient) const {
  const size_t n = size(), d = genes_.size();
  std::vector<double> row(d);
  Features(x, row.data());
  Eigen::VectorXd slope;  // (5/3) s^2 (1 + sqrt5 r_i) e^{-sqrt5 r_i}
  const Eigen::VectorXd kx = KernelTo(row.data(), &slope);
  const Eigen::VectorXd v = factor_.triangularView<Eigen::Lower>().solve(kx);
  const double mean = kx.dot(alpha_);
  const double raw_variance = hyper_.signal - v.squaredNorm();
  const double floor = kMinVarianceShare * hyper_.signal;
  const double variance = std::max(raw_variance, floor);
  const double sd = std::sqrt(variance);
  const double z = (best - mean) / sd;
  const ExpectedImprovementTerms terms = EiTerms(z);
  const double value = std::log(sd) + terms.log_h;
  if (gradient == nullptr) return value;
  gradient->assign(codec_->size(), 0);
  // d logEI / d mean = -Phi / (sd h), d logEI / d sd = phi / (sd h).
  const double d_mean = -terms.cdf_over_h / sd;
  const double d_variance = raw_variance > floor ? terms.pdf_over_h / sd / (2 * sd) : 0;
  // d mean/dx = sum_i alpha_i dk_i/dx; d var/dx = -2 (K^-1 k)^T dk/dx; dk_i/dx_f =
  // -slope_i rho_f (x_f - x_if).
  const Eigen::VectorXd weights =
      d_mean * alpha_ - 2 * d_variance * factor_.transpose().triangularView<Eigen::Upper>().solve(v);
  const Genome masked = MaskInactive(*codec_, x);
  for (size_t f = 0; f < d; ++f) {
    if (categorical_[f] || std::isnan(masked[genes_[f]])) continue;
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      sum += weights[static_cast<Eigen::Index>(i)] * slope[static_cast<Eigen::Index>(i)] *
             (row[f] - features_[i * d + f]);
    }
    (*gradient)[genes_[f]] = -sum * hyper_.inverse_squared_lengths[static_cast<Eigen::Index>(f)];
  }
  return value;
}

}  // namespace evoscale::search::internal
