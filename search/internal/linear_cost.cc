#include "search/internal/linear_cost.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/internal/genome.h"
#include "search/internal/parzen.h"

namespace evoscale::search::internal {
namespace {

// The ridges tried, in units of the number of points (the penalty grows with the data).
constexpr double kRidges[] = {0.001, 0.01, 0.1, 1.0};

}  // namespace

LinearCostModel::LinearCostModel(const GenomeCodec& codec, size_t min_points)
    : codec_(&codec), min_points_(std::max<size_t>(2, min_points)) {
  for (size_t g = 0; g < codec.size(); ++g) {
    if (codec.fixed(g)) continue;
    width_ += codec.kind(g) == GeneKind::kCategorical ? codec.cardinality(g) : 1;
  }
}

Eigen::VectorXd LinearCostModel::Features(const Genome& genome) const {
  const Genome masked = MaskInactive(*codec_, genome);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(width_);
  Eigen::Index at = 0;
  for (size_t g = 0; g < codec_->size(); ++g) {
    if (codec_->fixed(g)) continue;
    const double v = masked[g];
    if (codec_->kind(g) == GeneKind::kCategorical) {
      const int64_t n = codec_->cardinality(g);
      if (!std::isnan(v)) {
        x[at + static_cast<Eigen::Index>(CellOf(v, n))] = 1;
      }
      at += n;
    } else {
      x[at++] = std::isnan(v) ? 0.0 : std::clamp(v, 0.0, 1.0);
    }
  }
  return x;
}

void LinearCostModel::Fit(absl::Span<const Genome> genomes, absl::Span<const double> log_costs) {
  const auto n = static_cast<Eigen::Index>(genomes.size());
  fitted_ = false;
  if (genomes.size() < min_points_ || width_ == 0) return;
  Eigen::MatrixXd x(n, width_);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    x.row(i) = Features(genomes[static_cast<size_t>(i)]).transpose();
    y[i] = log_costs[static_cast<size_t>(i)];
  }
  // Centred, so that the intercept is the mean and goes unpenalised.
  const Eigen::RowVectorXd mx = x.colwise().mean();
  const double my = y.mean();
  const Eigen::MatrixXd xc = x.rowwise() - mx;
  const Eigen::VectorXd yc = y.array() - my;
  const Eigen::MatrixXd gram = xc.transpose() * xc;
  double best_error = std::numeric_limits<double>::infinity();
  for (const double ridge : kRidges) {
    const double lambda = ridge * static_cast<double>(n);
    Eigen::MatrixXd a = gram;
    a.diagonal().array() += lambda;
    const Eigen::LDLT<Eigen::MatrixXd> solver(a);
    if (solver.info() != Eigen::Success) continue;
    const Eigen::VectorXd w = solver.solve(xc.transpose() * yc);
    // Leave-one-out residuals of a ridge fit: r_i / (1 - h_ii), H = X (X'X + lambda I)^-1 X'.
    const Eigen::MatrixXd hx = solver.solve(xc.transpose());
    double error = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const double h = xc.row(i).dot(hx.col(i)) + 1.0 / static_cast<double>(n);
      const double r = (yc[i] - xc.row(i).dot(w)) / std::max(1e-6, 1 - h);
      error += r * r;
    }
    if (error < best_error) {
      best_error = error;
      weights_ = w;
      intercept_ = my - mx.dot(w);
      fitted_ = true;
    }
  }
}

double LinearCostModel::Predict(const Genome& genome) const {
  return intercept_ + Features(genome).dot(weights_);
}

}  // namespace evoscale::search::internal
