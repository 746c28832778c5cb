// The dense part of the CTR model on a GPU: the same network and Adam as Mlp (mlp.h), with the
// matrix products on cuBLAS (FP32, no TF32) and small kernels for bias, ReLU and Adam. Starts
// from a copy of a CPU Mlp's parameters, so both paths train the same model from one seed.
//
// Matrices are row-major as on the CPU (cuBLAS sees their transposes, which is why the products
// below swap operands). Every call is asynchronous on the stream given to Create. Not
// thread-safe.
#ifndef EVOSCALE_TRAINER_CUDA_GPU_MLP_H_
#define EVOSCALE_TRAINER_CUDA_GPU_MLP_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/cuda/device_buffer.h"

namespace evoscale::trainer::cuda {

struct CublasApi;

struct GpuAdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

class GpuMlp {
 public:
  // sizes: input width, hidden widths, 1 (as Mlp). params: Mlp::params() (host, flat, per layer
  // W (sizes[l], sizes[l+1]) row-major then b). max_rows: the largest batch. INVALID_ARGUMENT on
  // a size mismatch; CUDA/cuBLAS failures as their Status.
  static absl::StatusOr<std::unique_ptr<GpuMlp>> Create(const std::vector<int>& sizes,
                                                        const std::vector<float>& params,
                                                        GpuAdamConfig adam, int max_rows,
                                                        cudaStream_t stream);
  ~GpuMlp();
  GpuMlp(const GpuMlp&) = delete;
  GpuMlp& operator=(const GpuMlp&) = delete;

  // logits: device, (n), for x: device, (n, sizes[0]); n <= max_rows.
  absl::Status Forward(const float* x, int n, float* logits);
  // After Forward on the same x: gradients of sum_i dlogits[i] * logit_i into the parameter
  // gradient and, if dx is not null, into dx (device, (n, sizes[0]); may be x itself).
  // dlogits: device, (n).
  absl::Status Backward(const float* x, int n, const float* dlogits, float* dx);
  // Adam with the gradient of the last Backward, at step t (1-based).
  absl::Status AdamStep(int64_t t);
  // Parameters (and Adam moments, if given) to the host, in Mlp's layout; synchronises.
  absl::Status CopyToHost(std::vector<float>* params, std::vector<float>* m = nullptr,
                          std::vector<float>* v = nullptr) const;

  // The parameter gradient of the last Backward (device, (num_params), Mlp's layout): a job of
  // several GPUs sums it over its ranks before AdamStep.
  float* gradients() { return grads_.data(); }
  size_t num_params() const { return num_params_; }
  // Device bytes of weights plus Adam moments.
  size_t memory_bytes() const { return 3 * num_params_ * sizeof(float); }

 private:
  GpuMlp(const std::vector<int>& sizes, GpuAdamConfig adam, int max_rows, cudaStream_t stream);

  // Constant after construction.
  const std::vector<int> sizes_;
  const GpuAdamConfig adam_;
  const int max_rows_;
  const cudaStream_t stream_;
  std::vector<size_t> w_offset_, b_offset_;  // into the flat arrays, per layer
  size_t num_params_ = 0;

  const CublasApi* api_ = nullptr;  // cuBLAS, opened at run time (cublas_api.h)
  cublasHandle_t cublas_ = nullptr;  // bound to stream_
  DeviceBuffer<float> params_, m_, v_, grads_;  // device, (num_params) each
  std::vector<DeviceBuffer<float>> acts_;       // [l]: device, (max_rows, sizes[l+1]); the
                                                // last is unused (logits go to the caller)
  DeviceBuffer<float> scratch_a_, scratch_b_;   // device, (max_rows, widest hidden layer)
  DeviceBuffer<float> ones_;                    // device, (max_rows): 1.0f, for bias gradients
};

// Logistic loss gradient: dlogits[i] = (sigmoid(logits[i]) - labels[i]) * scale. All device, (n).
absl::Status LogisticLossGradient(const float* logits, const float* labels, int n, float scale,
                                  float* dlogits, cudaStream_t stream);

// dst[i * stride + offset + j] = src[i * width + j] for i < n, j < width. src, dst: device.
absl::Status CopyColumns(const float* src, int n, int width, float* dst, int stride, int offset,
                         cudaStream_t stream);

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_GPU_MLP_H_
