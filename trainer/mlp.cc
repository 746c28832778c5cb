#include "trainer/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer {

namespace {

absl::Status CheckSizes(const std::vector<int>& sizes) {
  if (sizes.size() < 2) return absl::InvalidArgumentError("MLP needs at least one layer");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0 || sizes[i] > 65536) {
      return absl::InvalidArgumentError(
          absl::StrCat("MLP layer ", i, " has width ", sizes[i], " (expected 1..65536)"));
    }
  }
  if (sizes.back() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("MLP output width ", sizes.back(), " != 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::CreateForInference(std::vector<int> sizes) {
  if (absl::Status st = CheckSizes(sizes); !st.ok()) return st;
  return std::unique_ptr<Mlp>(new Mlp(std::move(sizes), DenseAdamConfig{}, /*moments=*/false));
}

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::Create(std::vector<int> sizes, uint64_t seed,
                                                 DenseAdamConfig adam) {
  if (absl::Status st = CheckSizes(sizes); !st.ok()) return st;
  std::unique_ptr<Mlp> mlp(new Mlp(std::move(sizes), adam, /*moments=*/true));
  // PyTorch's nn.Linear default: kaiming_uniform(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
  // the bias from the same bound.
  std::mt19937_64 rng(seed ^ 0x6D6C7000ull);
  const int layers = int(mlp->sizes_.size()) - 1;
  for (int l = 0; l < layers; ++l) {
    const float bound = 1.0f / std::sqrt(float(mlp->sizes_[l]));
    std::uniform_real_distribution<float> u(-bound, bound);
    const size_t nw = size_t(mlp->sizes_[l]) * mlp->sizes_[l + 1];
    for (size_t i = 0; i < nw; ++i) mlp->params_[mlp->w_offset_[l] + i] = u(rng);
    for (int i = 0; i < mlp->sizes_[l + 1]; ++i) mlp->params_[mlp->b_offset_[l] + i] = u(rng);
  }
  return mlp;
}

Mlp::Mlp(std::vector<int> sizes, DenseAdamConfig adam, bool moments)
    : sizes_(std::move(sizes)), adam_(adam), kernels_(internal::BestMlpKernels()) {
  size_t offset = 0;
  const int layers = int(sizes_.size()) - 1;
  for (int l = 0; l < layers; ++l) {
    w_offset_.push_back(offset);
    offset += size_t(sizes_[l]) * sizes_[l + 1];
    b_offset_.push_back(offset);
    offset += sizes_[l + 1];
  }
  params_.assign(offset, 0.0f);
  if (moments) {
    m_.assign(offset, 0.0f);
    v_.assign(offset, 0.0f);
  }
  for (int l = 0; l < layers; ++l) {
    weight_ptrs_.push_back(params_.data() + w_offset_[l]);
    bias_ptrs_.push_back(params_.data() + b_offset_[l]);
  }
}

internal::MlpView Mlp::View() const {
  internal::MlpView view;
  view.num_layers = int(sizes_.size()) - 1;
  view.sizes = sizes_.data();
  view.weights = weight_ptrs_.data();
  view.biases = bias_ptrs_.data();
  return view;
}

Mlp::Workspace Mlp::NewWorkspace(int max_rows) const {
  Workspace ws;
  ws.max_rows = max_rows;
  const int layers = int(sizes_.size()) - 1;
  for (int l = 0; l < layers; ++l) ws.acts.emplace_back(size_t(max_rows) * sizes_[l + 1]);
  ws.grads.assign(params_.size(), 0.0f);
  // Backward keeps deltas of the layer outputs only (the input gradient goes straight to dx).
  const int widest = *std::max_element(sizes_.begin() + 1, sizes_.end());
  ws.scratch_a.assign(size_t(max_rows) * widest, 0.0f);
  ws.scratch_b.assign(size_t(max_rows) * widest, 0.0f);
  return ws;
}

void Mlp::Forward(Workspace& ws, const float* x, int n, float* logits) const {
  std::vector<float*> acts;
  for (auto& a : ws.acts) acts.push_back(a.data());
  kernels_.forward(View(), x, n, acts.data());
  std::copy(ws.acts.back().begin(), ws.acts.back().begin() + n, logits);
}

void Mlp::Backward(Workspace& ws, const float* x, int n, const float* dlogits, float* dx) const {
  const int layers = int(sizes_.size()) - 1;
  std::vector<const float*> acts;
  for (auto& a : ws.acts) acts.push_back(a.data());
  std::vector<float*> gw, gb;
  for (int l = 0; l < layers; ++l) {
    gw.push_back(ws.grads.data() + w_offset_[l]);
    gb.push_back(ws.grads.data() + b_offset_[l]);
  }
  kernels_.backward(View(), x, n, acts.data(), dlogits, gw.data(), gb.data(), dx,
                    ws.scratch_a.data(), ws.scratch_b.data());
}

void Mlp::AdamStep(const std::vector<Workspace*>& workers, size_t begin, size_t end, int64_t t) {
  if (begin >= end) return;
  const float c1 = 1.0f - std::pow(adam_.beta1, float(t));
  const float c2 = 1.0f - std::pow(adam_.beta2, float(t));
  std::vector<const float*> grads;
  for (Workspace* w : workers) grads.push_back(w->grads.data() + begin);
  kernels_.adam(params_.data() + begin, m_.data() + begin, v_.data() + begin, grads.data(),
                int(grads.size()), end - begin, adam_.lr / c1, adam_.beta1, adam_.beta2,
                1.0f / std::sqrt(c2), adam_.eps);
}

}  // namespace evoscale::trainer
