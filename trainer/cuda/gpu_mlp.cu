#include "trainer/cuda/gpu_mlp.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/cuda/cublas_api.h"

namespace evoscale::trainer::cuda {
namespace {

constexpr int kThreads = 256;
unsigned Blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// out (n, cols) += bias (cols); ReLU unless this is the last layer.
__global__ void BiasActivationKernel(float* out, const float* bias, int n, int cols, bool relu) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= size_t(n) * cols) return;
  const float v = out[e] + bias[e % cols];
  out[e] = relu ? fmaxf(v, 0.0f) : v;
}

// ReLU's derivative: keep delta where the layer's output was positive.
__global__ void ReluBackwardKernel(float* delta, const float* act, size_t count) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < count && !(act[e] > 0.0f)) delta[e] = 0.0f;
}

// As the CPU kernels' Adam (internal/mlp_kernels.h).
__global__ void AdamKernel(float* w, float* m, float* v, const float* g, size_t count,
                           float step_size, float b1, float b2, float inv_sqrt_c2, float eps) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float gi = g[i];
  const float mi = b1 * m[i] + (1.0f - b1) * gi;
  const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  w[i] -= step_size * mi / (sqrtf(vi) * inv_sqrt_c2 + eps);
}

__global__ void FillKernel(float* x, size_t count, float value) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = value;
}

__global__ void LossGradientKernel(const float* logits, const float* labels, int n, float scale,
                                   float* dlogits) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dlogits[i] = (1.0f / (1.0f + expf(-logits[i])) - labels[i]) * scale;
}

__global__ void CopyColumnsKernel(const float* src, int n, int width, float* dst, int stride,
                                  int offset) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= size_t(n) * width) return;
  dst[(e / width) * stride + offset + e % width] = src[e];
}

}  // namespace

GpuMlp::GpuMlp(const std::vector<int>& sizes, GpuAdamConfig adam, int max_rows,
               cudaStream_t stream)
    : sizes_(sizes), adam_(adam), max_rows_(max_rows), stream_(stream) {
  size_t offset = 0;
  for (size_t l = 0; l + 1 < sizes_.size(); ++l) {
    w_offset_.push_back(offset);
    offset += size_t(sizes_[l]) * sizes_[l + 1];
    b_offset_.push_back(offset);
    offset += sizes_[l + 1];
  }
  num_params_ = offset;
}

GpuMlp::~GpuMlp() {
  if (cublas_ != nullptr) (void)api_->destroy(cublas_);
}

absl::StatusOr<std::unique_ptr<GpuMlp>> GpuMlp::Create(const std::vector<int>& sizes,
                                                       const std::vector<float>& params,
                                                       GpuAdamConfig adam, int max_rows,
                                                       cudaStream_t stream) {
  if (sizes.size() < 2 || sizes.back() != 1 ||
      std::any_of(sizes.begin(), sizes.end(), [](int s) { return s <= 0; })) {
    return absl::InvalidArgumentError("GPU MLP: sizes must be positive and end in 1");
  }
  if (max_rows <= 0) return absl::InvalidArgumentError(absl::StrCat("GPU MLP max_rows ", max_rows));
  std::unique_ptr<GpuMlp> mlp(new GpuMlp(sizes, adam, max_rows, stream));
  if (params.size() != mlp->num_params_) {
    return absl::InvalidArgumentError(absl::StrCat("GPU MLP: ", params.size(),
                                                   " parameters given, sizes need ",
                                                   mlp->num_params_));
  }
  absl::StatusOr<const CublasApi*> api = Cublas();
  if (!api.ok()) return api.status();
  mlp->api_ = *api;
  EVOSCALE_CUBLAS_RETURN_IF_ERROR(mlp->api_->create(&mlp->cublas_));
  EVOSCALE_CUBLAS_RETURN_IF_ERROR(mlp->api_->set_stream(mlp->cublas_, stream));
  // Plain FP32 products, so that results stay comparable with the CPU path.
  EVOSCALE_CUBLAS_RETURN_IF_ERROR(mlp->api_->set_math_mode(mlp->cublas_, CUBLAS_PEDANTIC_MATH));
  const size_t p = mlp->num_params_;
  for (DeviceBuffer<float>* buffer : {&mlp->params_, &mlp->m_, &mlp->v_, &mlp->grads_}) {
    auto made = DeviceBuffer<float>::Filled(p, 0, stream);
    if (!made.ok()) return made.status();
    *buffer = *std::move(made);
  }
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(mlp->params_.data(), params.data(),
                                                p * sizeof(float), cudaMemcpyHostToDevice,
                                                stream));
  int widest = 1;
  for (size_t l = 1; l < sizes.size(); ++l) {
    auto act = DeviceBuffer<float>::Create(size_t(max_rows) * sizes[l], stream);
    if (!act.ok()) return act.status();
    mlp->acts_.push_back(*std::move(act));
    widest = std::max(widest, sizes[l]);
  }
  for (DeviceBuffer<float>* buffer : {&mlp->scratch_a_, &mlp->scratch_b_}) {
    auto made = DeviceBuffer<float>::Create(size_t(max_rows) * widest, stream);
    if (!made.ok()) return made.status();
    *buffer = *std::move(made);
  }
  auto ones = DeviceBuffer<float>::Create(size_t(max_rows), stream);
  if (!ones.ok()) return ones.status();
  mlp->ones_ = *std::move(ones);
  FillKernel<<<Blocks(max_rows), kThreads, 0, stream>>>(mlp->ones_.data(), size_t(max_rows), 1.0f);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  // The host copy of params must stay valid until the upload ran.
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return mlp;
}

absl::Status GpuMlp::Forward(const float* x, int n, float* logits) {
  if (n <= 0 || n > max_rows_) {
    return absl::InvalidArgumentError(absl::StrCat("GPU MLP: batch of ", n, " rows, max ",
                                                   max_rows_));
  }
  const float one = 1.0f, zero = 0.0f;
  const int layers = int(sizes_.size()) - 1;
  const float* in = x;
  for (int l = 0; l < layers; ++l) {
    const int rows = sizes_[l], cols = sizes_[l + 1];
    float* out = l + 1 == layers ? logits : acts_[l].data();
    // Row-major out (n, cols) = in (n, rows) * W (rows, cols), i.e. out^T = W^T in^T.
    EVOSCALE_CUBLAS_RETURN_IF_ERROR(api_->sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, cols, n, rows,
                                                &one, params_.data() + w_offset_[l], cols, in,
                                                rows, &zero, out, cols));
    BiasActivationKernel<<<Blocks(size_t(n) * cols), kThreads, 0, stream_>>>(
        out, params_.data() + b_offset_[l], n, cols, l + 1 < layers);
    EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
    in = out;
  }
  return absl::OkStatus();
}

absl::Status GpuMlp::Backward(const float* x, int n, const float* dlogits, float* dx) {
  if (n <= 0 || n > max_rows_) {
    return absl::InvalidArgumentError(absl::StrCat("GPU MLP: batch of ", n, " rows, max ",
                                                   max_rows_));
  }
  const float one = 1.0f, zero = 0.0f;
  const int last = int(sizes_.size()) - 2;
  const float* delta = dlogits;  // (n, cols) of the current layer
  float* next = scratch_a_.data();
  float* spare = scratch_b_.data();
  for (int l = last; l >= 0; --l) {
    const int rows = sizes_[l], cols = sizes_[l + 1];
    const float* input = l == 0 ? x : acts_[l - 1].data();
    const float* w = params_.data() + w_offset_[l];
    // grad W (rows, cols) = input^T (rows, n) * delta (n, cols); column-major: gW^T = d^T input.
    EVOSCALE_CUBLAS_RETURN_IF_ERROR(api_->sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, cols, rows, n,
                                                &one, delta, cols, input, rows, &zero,
                                                grads_.data() + w_offset_[l], cols));
    // grad b (cols) = delta^T (cols, n) * ones (n).
    EVOSCALE_CUBLAS_RETURN_IF_ERROR(api_->sgemv(cublas_, CUBLAS_OP_N, cols, n, &one, delta, cols,
                                                ones_.data(), 1, &zero,
                                                grads_.data() + b_offset_[l], 1));
    // The input's gradient (n, rows) = delta (n, cols) * W^T; column-major: W delta^T.
    float* target = l == 0 ? dx : next;
    if (target == nullptr) break;
    EVOSCALE_CUBLAS_RETURN_IF_ERROR(api_->sgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols,
                                                &one, w, cols, delta, cols, &zero, target,
                                                rows));
    if (l == 0) break;
    ReluBackwardKernel<<<Blocks(size_t(n) * rows), kThreads, 0, stream_>>>(
        next, acts_[l - 1].data(), size_t(n) * rows);
    EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
    delta = next;
    std::swap(next, spare);
  }
  return absl::OkStatus();
}

absl::Status GpuMlp::AdamStep(int64_t t) {
  const float c1 = 1.0f - std::pow(adam_.beta1, float(t));
  const float c2 = 1.0f - std::pow(adam_.beta2, float(t));
  AdamKernel<<<Blocks(num_params_), kThreads, 0, stream_>>>(
      params_.data(), m_.data(), v_.data(), grads_.data(), num_params_, adam_.lr / c1,
      adam_.beta1, adam_.beta2, 1.0f / std::sqrt(c2), adam_.eps);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status GpuMlp::CopyToHost(std::vector<float>* params, std::vector<float>* m,
                                std::vector<float>* v) const {
  const std::pair<const DeviceBuffer<float>*, std::vector<float>*> copies[] = {
      {&params_, params}, {&m_, m}, {&v_, v}};
  for (const auto& [from, to] : copies) {
    if (to == nullptr) continue;
    to->resize(num_params_);
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to->data(), from->data(),
                                                  num_params_ * sizeof(float),
                                                  cudaMemcpyDeviceToHost, stream_));
  }
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status LogisticLossGradient(const float* logits, const float* labels, int n, float scale,
                                  float* dlogits, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  LossGradientKernel<<<Blocks(n), kThreads, 0, stream>>>(logits, labels, n, scale, dlogits);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status CopyColumns(const float* src, int n, int width, float* dst, int stride, int offset,
                         cudaStream_t stream) {
  if (n <= 0 || width <= 0) return absl::OkStatus();
  CopyColumnsKernel<<<Blocks(size_t(n) * width), kThreads, 0, stream>>>(src, n, width, dst,
                                                                        stride, offset);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

}  // namespace evoscale::trainer::cuda
