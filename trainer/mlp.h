// The dense part of the CTR model: a ReLU MLP (sizes[0] -> hidden... -> 1) trained with Adam,
// initialised as PyTorch's nn.Linear (weights and biases uniform in +-1/sqrt(fan_in)).
//
// Parameters, Adam moments and per-worker gradients are flat float arrays, so data-parallel
// workers each compute gradients on a slice of the batch (ForwardBackward, each with its own
// Workspace) and then apply Adam to disjoint parameter ranges (AdamStep), summing the workers'
// gradients on the fly. Calls on distinct workspaces and disjoint ranges may run concurrently;
// nothing else may run concurrently with AdamStep on overlapping ranges.
#ifndef EVOSCALE_TRAINER_MLP_H_
#define EVOSCALE_TRAINER_MLP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/internal/mlp_kernels.h"

namespace evoscale::trainer {

struct DenseAdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

class Mlp {
 public:
  // One worker's buffers for a batch slice of up to max_rows examples.
  struct Workspace {
    int max_rows = 0;
    std::vector<std::vector<float>> acts;  // [l]: (max_rows, sizes[l+1])
    std::vector<float> grads;              // flat, num_params()
    std::vector<float> scratch_a, scratch_b;
  };

  // sizes: input width, hidden widths, then 1. INVALID_ARGUMENT on an empty/zero layer or a
  // last layer other than 1.
  static absl::StatusOr<std::unique_ptr<Mlp>> Create(std::vector<int> sizes, uint64_t seed,
                                                     DenseAdamConfig adam);

  // Weights only (all zero, to be filled through params()), no Adam moments: a model that only
  // runs Forward (evoscale-serve). The same checks of sizes.
  static absl::StatusOr<std::unique_ptr<Mlp>> CreateForInference(std::vector<int> sizes);

  Workspace NewWorkspace(int max_rows) const;
  // logits[i] for the n rows of x (n, input_size()); n <= ws.max_rows.
  void Forward(Workspace& ws, const float* x, int n, float* logits) const;
  // After Forward on the same ws and x: the gradients of sum_i dlogits[i] * logit_i into
  // ws.grads and, if dx is not null, into dx (n, input_size()). dx may be x itself: x is read
  // only before dx is written.
  void Backward(Workspace& ws, const float* x, int n, const float* dlogits, float* dx) const;
  // Adam on parameters [begin, end) with the sum of the given workspaces' gradients, at Adam
  // step `t` (1-based, the same for every range of one step).
  void AdamStep(const std::vector<Workspace*>& workers, size_t begin, size_t end, int64_t t);

  const std::vector<int>& sizes() const { return sizes_; }
  int input_size() const { return sizes_.front(); }
  size_t num_params() const { return params_.size(); }
  // Bytes of weights plus Adam moments (none for a model made for inference).
  size_t memory_bytes() const { return (params_.size() + m_.size() + v_.size()) * sizeof(float); }
  // Flat state, for checkpoints: params, then m, then v.
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& adam_m() { return m_; }
  std::vector<float>& adam_v() { return v_; }
  const char* isa() const { return kernels_.isa; }

 private:
  Mlp(std::vector<int> sizes, DenseAdamConfig adam, bool moments);
  internal::MlpView View() const;

  // Constant after construction.
  const std::vector<int> sizes_;
  const DenseAdamConfig adam_;
  const internal::MlpKernels& kernels_;
  std::vector<size_t> w_offset_, b_offset_;  // into the flat arrays, per layer

  std::vector<float> params_, m_, v_;
  std::vector<const float*> weight_ptrs_, bias_ptrs_;
};

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_MLP_H_
