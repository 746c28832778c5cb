#include "search/internal/gp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/parzen.h"

namespace evoscale::search::internal {
namespace {

// A categorical mismatch counts as this squared distance (a numeric gene spans at most 1).
constexpr double kCategoricalDistance = 0.25;
// The scales tried when re-choosing: multiples of the median distance, and noise levels on
// the rank scale (whose variance is 1/12).
constexpr double kLengthFactors[] = {0.5, 1.0};
constexpr double kNoiseLevels[] = {1e-4, 1e-2};

}  // namespace

double GpSurrogate::SquaredDistance(const double* a, const double* b) const {
  double sum = 0;
  for (size_t g = 0; g < codec_->size(); ++g) {
    if (codec_->fixed(g) || std::isnan(a[g]) || std::isnan(b[g])) continue;
    if (codec_->kind(g) == GeneKind::kCategorical) {
      const int64_t k = codec_->cardinality(g);
      sum += CellOf(a[g], k) != CellOf(b[g], k) ? kCategoricalDistance : 0;
      continue;
    }
    sum += (a[g] - b[g]) * (a[g] - b[g]);
  }
  return sum;
}

bool GpSurrogate::Solve(double length, double noise) {
  Eigen::MatrixXd k = (-distances_ / (2 * length * length)).array().exp().matrix();
  k.diagonal().array() += noise;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return false;
  alpha_ = llt.solve(targets_);
  return alpha_.allFinite();
}

double GpSurrogate::LooError(double length, double noise) const {
  Eigen::MatrixXd k = (-distances_ / (2 * length * length)).array().exp().matrix();
  k.diagonal().array() += noise;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return std::nan("");
  const Eigen::MatrixXd inverse = llt.solve(Eigen::MatrixXd::Identity(k.rows(), k.cols()));
  const Eigen::VectorXd alpha = inverse * targets_;
  // Leave-one-out residual of point i: alpha_i / [K^-1]_ii (Rasmussen & Williams 5.12).
  double sum = 0;
  for (Eigen::Index i = 0; i < k.rows(); ++i) {
    const double r = alpha[i] / inverse(i, i);
    sum += r * r;
  }
  return sum / static_cast<double>(k.rows());
}

bool GpSurrogate::Prepare(absl::Span<const Genome> genomes, absl::Span<const Fitness> fitness) {
  const size_t n = std::min(genomes.size(), fitness.size());
  std::vector<size_t> ranked;
  for (size_t i = 0; i < n; ++i) {
    if (!fitness[i].failed) ranked.push_back(i);
  }
  if (ranked.size() < min_points_) return false;
  // The best half and the most recent half of at most kMaxPoints.
  const std::vector<size_t> chosen = BestAndRecentTrials(fitness, std::move(ranked), kMaxPoints);
  m_ = chosen.size();
  const size_t genes = codec_->size();
  points_.clear();
  points_.reserve(m_ * genes);
  for (size_t i : chosen) {
    const Genome masked = MaskInactive(*codec_, genomes[i]);
    points_.insert(points_.end(), masked.begin(), masked.end());
  }
  // Ranks (stable: ties keep completion order), centred.
  std::vector<size_t> order(m_);
  for (size_t i = 0; i < m_; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Better(fitness[chosen[a]], fitness[chosen[b]]);
  });
  targets_.resize(static_cast<Eigen::Index>(m_));
  for (size_t r = 0; r < m_; ++r) {
    targets_[static_cast<Eigen::Index>(order[r])] =
        (static_cast<double>(r) + 0.5) / static_cast<double>(m_) - 0.5;
  }
  const auto m = static_cast<Eigen::Index>(m_);
  distances_.setZero(m, m);
  std::vector<double> pairwise;
  pairwise.reserve(m_ * (m_ - 1) / 2);
  for (size_t i = 0; i < m_; ++i) {
    for (size_t j = i + 1; j < m_; ++j) {
      const double d = SquaredDistance(&points_[i * genes], &points_[j * genes]);
      distances_(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = d;
      distances_(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(i)) = d;
      pairwise.push_back(d);
    }
  }
  const auto middle = pairwise.begin() + static_cast<std::ptrdiff_t>(pairwise.size() / 2);
  std::nth_element(pairwise.begin(), middle, pairwise.end());
  median_ = std::sqrt(std::max(*middle, 1e-12));
  return true;
}

void GpSurrogate::Fit(absl::Span<const Genome> genomes, absl::Span<const Fitness> fitness) {
  fitted_ = false;
  const size_t n = std::min(genomes.size(), fitness.size());
  // The scales are chosen on the trials up to the last multiple of kReselectEvery, so they
  // are a function of the trials alone however the fits were batched.
  const size_t prefix = n / kReselectEvery * kReselectEvery;
  if (prefix != selected_at_) {
    selected_at_ = prefix;
    factor_ = 1;
    noise_ = kNoiseLevels[0];
    if (Prepare(genomes.first(prefix), fitness.first(prefix))) {
      double best_error = std::numeric_limits<double>::infinity();
      for (double factor : kLengthFactors) {
        for (double noise : kNoiseLevels) {
          const double error = LooError(factor * median_, noise);
          if (error < best_error) {
            best_error = error;
            factor_ = factor;
            noise_ = noise;
          }
        }
      }
    }
  }
  if (!Prepare(genomes.first(n), fitness.first(n))) return;
  length_ = factor_ * median_;
  fitted_ = Solve(length_, noise_);
}

double GpSurrogate::Predict(const Genome& x) const {
  const size_t genes = codec_->size();
  const Genome xv = MaskInactive(*codec_, x);
  double mean = 0;
  const double scale = -1 / (2 * length_ * length_);
  for (size_t i = 0; i < m_; ++i) {
    mean += alpha_[static_cast<Eigen::Index>(i)] *
            std::exp(scale * SquaredDistance(&points_[i * genes], xv.data()));
  }
  return mean;
}

}  // namespace evoscale::search::internal
