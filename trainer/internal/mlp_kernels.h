// The dense MLP's arithmetic, compiled once per instruction set (baseline x86-64, AVX2+FMA,
// AVX-512) and chosen at run time, so one portable binary still uses the vector units it finds.
// Each variant sees Eigen under its own namespace name, which keeps the variants' inline Eigen
// code from merging at link time. Plain pointers cross this boundary, no Eigen types.
#ifndef EVOSCALE_TRAINER_INTERNAL_MLP_KERNELS_H_
#define EVOSCALE_TRAINER_INTERNAL_MLP_KERNELS_H_

#include <cstddef>

namespace evoscale::trainer::internal {

// A fully connected ReLU network over row-major matrices. Layer l maps sizes[l] -> sizes[l+1]:
// out = in * W_l + b_l with W_l of shape (sizes[l], sizes[l+1]); ReLU after every layer but
// the last.
struct MlpView {
  int num_layers = 0;
  const int* sizes = nullptr;             // num_layers + 1 entries
  const float* const* weights = nullptr;  // [l]: (sizes[l], sizes[l+1]) row-major
  const float* const* biases = nullptr;   // [l]: sizes[l+1]
};

struct MlpKernels {
  const char* isa;
  // acts[l] receives the output of layer l, (n, sizes[l+1]); acts[num_layers-1] holds logits.
  void (*forward)(const MlpView& mlp, const float* x, int n, float* const* acts);
  // Gradients of sum_i dlogits[i] * logit_i: grad_w[l], grad_b[l] (overwritten) and, if dx is
  // not null, the input gradient (n, sizes[0]), which may overwrite x (dx == x is allowed: x is
  // last read before dx is written). scratch_a/b hold n * max(sizes[1..]) floats each.
  void (*backward)(const MlpView& mlp, const float* x, int n, const float* const* acts,
                   const float* dlogits, float* const* grad_w, float* const* grad_b, float* dx,
                   float* scratch_a, float* scratch_b);
  // Adam on count parameters, the gradient being the sum of num_grads buffers:
  // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= step_size * m / (sqrt(v) * inv_sqrt_c2 + eps).
  void (*adam)(float* w, float* m, float* v, const float* const* grads, int num_grads, size_t count,
               float step_size, float b1, float b2, float inv_sqrt_c2, float eps);
};

// The fastest variant this CPU runs, capped by the environment variable EVOSCALE_TRAINER_ISA
// (baseline or avx2) if set. Thread-safe.
const MlpKernels& BestMlpKernels();
// The portable variant, for tests that compare against it.
const MlpKernels& BaselineMlpKernels();

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_MLP_KERNELS_H_
