#include "search/internal/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <vector>

#include "Eigen/Dense"

namespace evoscale::search::internal {
namespace {

constexpr int kMemory = 10;
constexpr double kArmijo = 1e-4;
constexpr int kMaxBacktracks = 30;

}  // namespace

LbfgsResult MinimiseLbfgs(const Objective& objective, const Eigen::VectorXd& start,
                          int max_iterations, double gradient_tolerance) {
  LbfgsResult result{.x = start};
  Eigen::VectorXd gradient(start.size());
  result.value = objective(result.x, &gradient);
  result.evaluations = 1;
  if (!std::isfinite(result.value) || !gradient.allFinite()) {
    result.value = std::numeric_limits<double>::infinity();
    return result;
  }
  std::deque<Eigen::VectorXd> steps, changes;  // s_k = x_{k+1} - x_k, y_k = g_{k+1} - g_k
  std::deque<double> rhos;
  Eigen::VectorXd next_gradient(start.size());
  for (; result.iterations < max_iterations; ++result.iterations) {
    if (gradient.lpNorm<Eigen::Infinity>() < gradient_tolerance) break;
    // The two-loop recursion: direction = -H g.
    Eigen::VectorXd q = gradient;
    std::vector<double> alphas(steps.size());
    for (size_t k = steps.size(); k-- > 0;) {
      alphas[k] = rhos[k] * steps[k].dot(q);
      q -= alphas[k] * changes[k];
    }
    if (!steps.empty()) q *= steps.back().dot(changes.back()) / changes.back().squaredNorm();
    for (size_t k = 0; k < steps.size(); ++k) {
      const double beta = rhos[k] * changes[k].dot(q);
      q += (alphas[k] - beta) * steps[k];
    }
    Eigen::VectorXd direction = -q;
    double slope = gradient.dot(direction);
    if (!(slope < 0)) {  // not a descent direction: forget the curvature, go downhill
      steps.clear();
      changes.clear();
      rhos.clear();
      direction = -gradient;
      slope = -gradient.squaredNorm();
    }
    // The first step of a fresh memory is scaled to move at most 1 in any coordinate.
    double step = steps.empty() ? std::min(1.0, 1.0 / direction.lpNorm<Eigen::Infinity>()) : 1.0;
    bool moved = false;
    Eigen::VectorXd candidate;
    double value = 0;
    for (int b = 0; b < kMaxBacktracks; ++b, step *= 0.5) {
      candidate = result.x + step * direction;
      value = objective(candidate, &next_gradient);
      ++result.evaluations;
      if (std::isfinite(value) && next_gradient.allFinite() &&
          value <= result.value + kArmijo * step * slope) {
        moved = true;
        break;
      }
    }
    if (!moved) break;
    Eigen::VectorXd s = candidate - result.x;
    Eigen::VectorXd y = next_gradient - gradient;
    const double curvature = s.dot(y);
    if (curvature > 1e-12 * s.squaredNorm()) {
      steps.push_back(std::move(s));
      changes.push_back(std::move(y));
      rhos.push_back(1 / curvature);
      if (steps.size() > kMemory) {
        steps.pop_front();
        changes.pop_front();
        rhos.pop_front();
      }
    }
    const double improvement = result.value - value;
    result.x = candidate;
    result.value = value;
    gradient = next_gradient;
    if (improvement <= 1e-10 * (1 + std::abs(value))) {
      ++result.iterations;
      break;
    }
  }
  return result;
}

}  // namespace evoscale::search::internal
