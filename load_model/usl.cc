#include "load_model/usl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace evoscale::load_model {

double UslModel::Throughput(double n) const {
  return lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0));
}

double UslModel::PeakWorkers() const {
  if (kappa <= 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(std::max(1.0 - sigma, 0.0) / kappa);
}

namespace {

double SumSquares(absl::Span<const ThroughputPoint> points, const Eigen::Vector3d& p) {
  const UslModel m{p(0), p(1), p(2), 0};
  double s = 0;
  for (const auto& pt : points) {
    const double r = pt.throughput - m.Throughput(pt.workers);
    s += r * r;
  }
  return s;
}

}  // namespace

absl::StatusOr<UslModel> FitUsl(absl::Span<const ThroughputPoint> points) {
  if (points.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("usl fit: need at least 3 points, got %d", points.size()));
  }
  std::set<double> distinct;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& pt = points[i];
    if (!(pt.workers > 0) || !std::isfinite(pt.workers) || !(pt.throughput >= 0) ||
        !std::isfinite(pt.throughput)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "usl fit: point %d: workers %g must be > 0 and throughput %g >= 0", i, pt.workers,
          pt.throughput));
    }
    distinct.insert(pt.workers);
  }
  if (distinct.size() < 2) {
    return absl::InvalidArgumentError("usl fit: need at least 2 distinct worker counts");
  }
  // Start: lambda from the best per-worker throughput at the smallest worker count.
  double lambda0 = 0;
  const double n_min = *distinct.begin();
  for (const auto& pt : points) {
    if (pt.workers == n_min) lambda0 = std::max(lambda0, pt.throughput / pt.workers);
  }
  Eigen::Vector3d p(std::max(lambda0, 1e-9), 0.01, 0.0001);
  double cost = SumSquares(points, p);
  double damping = 1e-3;
  for (int iter = 0; iter < 200; ++iter) {
    Eigen::MatrixXd jac(points.size(), 3);
    Eigen::VectorXd res(points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      const double n = points[i].workers;
      const double d = 1.0 + p(1) * (n - 1.0) + p(2) * n * (n - 1.0);
      const double x = p(0) * n / d;
      res(i) = points[i].throughput - x;
      jac(i, 0) = n / d;
      jac(i, 1) = -x * (n - 1.0) / d;
      jac(i, 2) = -x * n * (n - 1.0) / d;
    }
    const Eigen::Matrix3d jtj = jac.transpose() * jac;
    const Eigen::Vector3d jtr = jac.transpose() * res;
    bool improved = false;
    for (int tries = 0; tries < 20 && !improved; ++tries) {
      Eigen::Matrix3d a = jtj;
      a.diagonal() += damping * jtj.diagonal().cwiseMax(1e-12);
      Eigen::Vector3d next = p + a.ldlt().solve(jtr);
      next(0) = std::max(next(0), 1e-12);
      next(1) = std::max(next(1), 0.0);
      next(2) = std::max(next(2), 0.0);
      const double next_cost = SumSquares(points, next);
      if (next_cost < cost) {
        const double gain = cost - next_cost;
        p = next;
        cost = next_cost;
        damping = std::max(damping / 3, 1e-12);
        improved = true;
        if (gain < 1e-14 * (1 + cost)) iter = 200;
      } else {
        damping *= 4;
      }
    }
    if (!improved) break;
  }
  UslModel m{p(0), p(1), p(2), std::sqrt(cost / points.size())};
  return m;
}

ParallelismRecommendation RecommendParallelism(const UslModel& model, int max_workers,
                                               double min_marginal_gain) {
  ParallelismRecommendation rec;
  int best = 1;
  for (int n = 2; n <= std::max(max_workers, 1); ++n) {
    const double gain = model.Throughput(n) - model.Throughput(n - 1);
    if (gain < min_marginal_gain * model.lambda) break;
    best = n;
  }
  rec.workers = best;
  rec.expected_throughput = model.Throughput(best);
  rec.efficiency = model.lambda > 0 ? rec.expected_throughput / (best * model.lambda) : 0;
  rec.explanation = absl::StrFormat(
      "usl: lambda %.4g sigma %.4g kappa %.4g, peak at %.1f workers; %d workers give %.4g "
      "(efficiency %.0f%%)",
      model.lambda, model.sigma, model.kappa, model.PeakWorkers(), best,
      rec.expected_throughput, 100 * rec.efficiency);
  return rec;
}

}  // namespace evoscale::load_model
