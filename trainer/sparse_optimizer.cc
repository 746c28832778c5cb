#include "trainer/sparse_optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer {

absl::StatusOr<SparseOptimizerKind> ParseSparseOptimizerKind(absl::string_view name) {
  if (name == "sgd") return SparseOptimizerKind::kSgd;
  if (name == "adagrad") return SparseOptimizerKind::kAdagrad;
  if (name == "ftrl") return SparseOptimizerKind::kFtrl;
  if (name == "adam") return SparseOptimizerKind::kAdam;
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer-sparse \"", name, "\": expected sgd, adagrad, ftrl or adam"));
}

absl::string_view SparseOptimizerName(SparseOptimizerKind kind) {
  switch (kind) {
    case SparseOptimizerKind::kSgd:
      return "sgd";
    case SparseOptimizerKind::kAdagrad:
      return "adagrad";
    case SparseOptimizerKind::kFtrl:
      return "ftrl";
    case SparseOptimizerKind::kAdam:
      return "adam";
  }
  return "unknown";
}

int SparseOptimizer::StateFloats(int dim) const {
  switch (config_.kind) {
    case SparseOptimizerKind::kSgd:
      return 0;
    case SparseOptimizerKind::kAdagrad:
      return dim;
    case SparseOptimizerKind::kFtrl:
      return 2 * dim;
    case SparseOptimizerKind::kAdam:
      return 2 * dim + 1;
  }
  return 0;
}

void SparseOptimizer::InitState(const float* w, float* state, int dim) const {
  switch (config_.kind) {
    case SparseOptimizerKind::kSgd:
      return;
    case SparseOptimizerKind::kAdagrad:
      for (int d = 0; d < dim; ++d) state[d] = config_.initial_accumulator;
      return;
    case SparseOptimizerKind::kFtrl: {
      // With n = 0 the FTRL closed form gives w = -z / (beta / alpha + l2) (when |z| > l1), so
      // this z reproduces the initial w instead of zeroing it on the first step.
      const float denom = config_.ftrl_beta / config_.lr + config_.ftrl_l2;
      for (int d = 0; d < dim; ++d) {
        const float mag = std::fabs(w[d]) * denom + config_.ftrl_l1;
        state[d] = w[d] >= 0 ? -mag : mag;
        state[dim + d] = 0.0f;
      }
      return;
    }
    case SparseOptimizerKind::kAdam:
      for (int d = 0; d < 2 * dim + 1; ++d) state[d] = 0.0f;
      return;
  }
}

void SparseOptimizer::Apply(float* w, float* state, const float* g, int dim) const {
  const float lr = config_.lr;
  switch (config_.kind) {
    case SparseOptimizerKind::kSgd:
      for (int d = 0; d < dim; ++d) w[d] -= lr * g[d];
      return;
    case SparseOptimizerKind::kAdagrad: {
      const float eps = config_.eps;
      for (int d = 0; d < dim; ++d) {
        state[d] += g[d] * g[d];
        w[d] -= lr * g[d] / (std::sqrt(state[d]) + eps);
      }
      return;
    }
    case SparseOptimizerKind::kFtrl: {
      float* z = state;
      float* n = state + dim;
      const float l1 = config_.ftrl_l1, l2 = config_.ftrl_l2, beta = config_.ftrl_beta;
      for (int d = 0; d < dim; ++d) {
        const float n_new = n[d] + g[d] * g[d];
        const float sigma = (std::sqrt(n_new) - std::sqrt(n[d])) / lr;
        z[d] += g[d] - sigma * w[d];
        n[d] = n_new;
        if (std::fabs(z[d]) <= l1) {
          w[d] = 0.0f;
        } else {
          const float sign = z[d] > 0 ? 1.0f : -1.0f;
          w[d] = -(z[d] - sign * l1) / ((beta + std::sqrt(n_new)) / lr + l2);
        }
      }
      return;
    }
    case SparseOptimizerKind::kAdam: {
      float* m = state;
      float* v = state + dim;
      float& count = state[2 * dim];
      count += 1.0f;
      const float b1 = config_.beta1, b2 = config_.beta2;
      const float correction1 = 1.0f - std::pow(b1, count);
      const float correction2 = 1.0f - std::pow(b2, count);
      const float step = lr / correction1;
      const float sqrt_c2 = std::sqrt(correction2);
      for (int d = 0; d < dim; ++d) {
        m[d] = b1 * m[d] + (1.0f - b1) * g[d];
        v[d] = b2 * v[d] + (1.0f - b2) * g[d] * g[d];
        w[d] -= step * m[d] / (std::sqrt(v[d]) / sqrt_c2 + config_.adam_eps);
      }
      return;
    }
  }
}

}  // namespace evoscale::trainer
