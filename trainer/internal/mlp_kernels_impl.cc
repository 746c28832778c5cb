// Compiled once per instruction set: CMake defines EVOSCALE_KERNEL_NS (the variant's name) and
// maps the identifier Eigen onto a variant-specific namespace (see mlp_kernels.h).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "trainer/internal/mlp_kernels.h"

#ifndef EVOSCALE_KERNEL_NS
#error "EVOSCALE_KERNEL_NS must name the instruction-set variant"
#endif
#define EVOSCALE_STR2(x) #x
#define EVOSCALE_STR(x) EVOSCALE_STR2(x)

namespace evoscale::trainer::internal {
namespace EVOSCALE_KERNEL_NS {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
using VecMap = Eigen::Map<Eigen::RowVectorXf>;
using ConstVecMap = Eigen::Map<const Eigen::RowVectorXf>;

void Forward(const MlpView& mlp, const float* x, int n, float* const* acts) {
  const float* in = x;
  for (int l = 0; l < mlp.num_layers; ++l) {
    const int rows = mlp.sizes[l], cols = mlp.sizes[l + 1];
    ConstMatMap input(in, n, rows);
    ConstMatMap w(mlp.weights[l], rows, cols);
    ConstVecMap b(mlp.biases[l], cols);
    MatMap out(acts[l], n, cols);
    out.noalias() = input * w;
    out.rowwise() += b;
    if (l + 1 < mlp.num_layers) out = out.cwiseMax(0.0f);
    in = acts[l];
  }
}

void Backward(const MlpView& mlp, const float* x, int n, const float* const* acts,
              const float* dlogits, float* const* grad_w, float* const* grad_b, float* dx,
              float* scratch_a, float* scratch_b) {
  const int last = mlp.num_layers - 1;
  std::copy(dlogits, dlogits + size_t(n) * mlp.sizes[last + 1], scratch_a);
  float* delta = scratch_a;
  float* next = scratch_b;
  for (int l = last; l >= 0; --l) {
    const int rows = mlp.sizes[l], cols = mlp.sizes[l + 1];
    ConstMatMap input(l == 0 ? x : acts[l - 1], n, rows);
    ConstMatMap d(delta, n, cols);
    MatMap(grad_w[l], rows, cols).noalias() = input.transpose() * d;
    VecMap(grad_b[l], cols) = d.colwise().sum();
    if (l == 0) {
      if (dx != nullptr) {
        MatMap(dx, n, rows).noalias() = d * ConstMatMap(mlp.weights[0], rows, cols).transpose();
      }
      break;
    }
    MatMap prev(next, n, rows);
    prev.noalias() = d * ConstMatMap(mlp.weights[l], rows, cols).transpose();
    // ReLU's derivative: the layer's output was positive.
    prev = (input.array() > 0.0f).select(prev, 0.0f);
    std::swap(delta, next);
  }
}

void Adam(float* w, float* m, float* v, const float* const* grads, int num_grads, size_t count,
          float step_size, float b1, float b2, float inv_sqrt_c2, float eps) {
  for (size_t i = 0; i < count; ++i) {
    float g = grads[0][i];
    for (int k = 1; k < num_grads; ++k) g += grads[k][i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    w[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
  }
}

}  // namespace

extern const MlpKernels kKernels;
const MlpKernels kKernels = {EVOSCALE_STR(EVOSCALE_KERNEL_NS), &Forward, &Backward, &Adam};

}  // namespace EVOSCALE_KERNEL_NS
}  // namespace evoscale::trainer::internal
