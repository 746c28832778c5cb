#include "search/internal/cma.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "search/internal/fitness.h"
#include "search/internal/sampling.h"

namespace evoscale::search::internal {

double NextGaussian(SplitMix64& rng) {
  const double u1 = 1.0 - rng.NextUnit();  // (0, 1]
  const double u2 = rng.NextUnit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

CmaModel::CmaModel(int dims, int lambda)
    : dims_(std::max(dims, 1)),
      lambda_(lambda > 0 ? std::max(lambda, 2)
                         : 4 + static_cast<int>(std::floor(3 * std::log(std::max(dims, 1))))),
      mu_(lambda_ / 2) {
  const double n = dims_;
  for (int i = 0; i < mu_; ++i) weights_.push_back(std::log(mu_ + 0.5) - std::log(i + 1.0));
  const double sum = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  double sum_squares = 0;
  for (double& w : weights_) {
    w /= sum;
    sum_squares += w * w;
  }
  mu_eff_ = 1 / sum_squares;
  c_sigma_ = (mu_eff_ + 2) / (n + mu_eff_ + 5);
  d_sigma_ = 1 + 2 * std::max(0.0, std::sqrt((mu_eff_ - 1) / (n + 1)) - 1) + c_sigma_;
  c_c_ = (4 + mu_eff_ / n) / (n + 4 + 2 * mu_eff_ / n);
  c_1_ = 2 / ((n + 1.3) * (n + 1.3) + mu_eff_);
  c_mu_ = std::min(1 - c_1_, 2 * (mu_eff_ - 2 + 1 / mu_eff_) / ((n + 2) * (n + 2) + mu_eff_));
  chi_n_ = std::sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n));
}

void CmaModel::Reset(const Eigen::VectorXd& mean, double sigma) {
  initialized_ = true;
  mean_ = mean;
  sigma_ = sigma;
  cov_ = Eigen::MatrixXd::Identity(dims_, dims_);
  basis_ = Eigen::MatrixXd::Identity(dims_, dims_);
  axis_lengths_ = Eigen::VectorXd::Ones(dims_);
  path_sigma_ = Eigen::VectorXd::Zero(dims_);
  path_c_ = Eigen::VectorXd::Zero(dims_);
  generation_.clear();
  generations_ = 0;
}

void CmaModel::Tell(const Eigen::VectorXd& x, const Fitness& fitness) {
  if (!initialized_) return;
  generation_.emplace_back(x, fitness);
  if (static_cast<int>(generation_.size()) >= lambda_) CloseGeneration();
}

void CmaModel::CloseGeneration() {
  // Stable: ties keep the order told.
  std::stable_sort(generation_.begin(), generation_.end(),
                   [](const auto& a, const auto& b) { return Better(a.second, b.second); });
  // Failed points carry no information about where to go: recombine the ranked ones only.
  int ranked = 0;
  while (ranked < mu_ && !generation_[ranked].second.failed) ++ranked;
  if (ranked == 0) {
    generation_.clear();
    return;
  }
  double weight_sum = 0;
  for (int i = 0; i < ranked; ++i) weight_sum += weights_[i];
  const double n = dims_;
  // C^{-1/2} = B D^{-1} B^T.
  const Eigen::MatrixXd inv_sqrt =
      basis_ * axis_lengths_.cwiseInverse().asDiagonal() * basis_.transpose();
  const double clip = std::sqrt(n) + 2 * n / (n + 2);
  std::vector<Eigen::VectorXd> steps;
  Eigen::VectorXd weighted = Eigen::VectorXd::Zero(dims_);
  for (int i = 0; i < ranked; ++i) {
    Eigen::VectorXd y = (generation_[i].first - mean_) / sigma_;
    const double norm = (inv_sqrt * y).norm();
    if (norm > clip) y *= clip / norm;  // injected or unlucky points: bounded influence
    weighted += (weights_[i] / weight_sum) * y;
    steps.push_back(std::move(y));
  }
  mean_ += sigma_ * weighted;
  path_sigma_ = (1 - c_sigma_) * path_sigma_ +
                std::sqrt(c_sigma_ * (2 - c_sigma_) * mu_eff_) * (inv_sqrt * weighted);
  ++generations_;
  const double decay = 1 - std::pow(1 - c_sigma_, 2.0 * static_cast<double>(generations_));
  const bool h_sigma = path_sigma_.norm() / std::sqrt(decay) < (1.4 + 2 / (n + 1)) * chi_n_;
  path_c_ = (1 - c_c_) * path_c_ +
            (h_sigma ? std::sqrt(c_c_ * (2 - c_c_) * mu_eff_) : 0.0) * weighted;
  Eigen::MatrixXd rank_mu = Eigen::MatrixXd::Zero(dims_, dims_);
  for (int i = 0; i < ranked; ++i) {
    rank_mu += (weights_[i] / weight_sum) * steps[i] * steps[i].transpose();
  }
  cov_ = (1 - c_1_ - c_mu_) * cov_ +
         c_1_ * (path_c_ * path_c_.transpose() +
                 (h_sigma ? 0.0 : c_c_ * (2 - c_c_)) * cov_) +
         c_mu_ * rank_mu;
  sigma_ *= std::exp(std::min(1.0, (c_sigma_ / d_sigma_) * (path_sigma_.norm() / chi_n_ - 1)));
  sigma_ = std::clamp(sigma_, 1e-12, 1.0);

  cov_ = 0.5 * (cov_ + cov_.transpose());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(cov_);
  basis_ = solver.eigenvectors();
  axis_lengths_ = solver.eigenvalues().cwiseMax(1e-20).cwiseSqrt();
  generation_.clear();
}

Eigen::VectorXd CmaModel::Sample(SplitMix64& rng, double radius) const {
  Eigen::VectorXd z(dims_);
  for (int i = 0; i < dims_; ++i) z[i] = NextGaussian(rng);
  if (radius > 0 && z.norm() > 0) z *= radius / z.norm();
  return mean_ + sigma_ * (basis_ * axis_lengths_.cwiseProduct(z));
}

double CmaModel::SampleRadius(SplitMix64& rng) const {
  double sum = 0;
  for (int i = 0; i < dims_; ++i) {
    const double g = NextGaussian(rng);
    sum += g * g;
  }
  return std::sqrt(sum);
}

double CmaModel::MaxStdDev() const {
  return initialized_ ? sigma_ * axis_lengths_.maxCoeff() : 0;
}

double CmaModel::TypicalStdDev() const {
  return initialized_ ? sigma_ * std::sqrt(axis_lengths_.squaredNorm() / dims_) : 0;
}

}  // namespace evoscale::search::internal
