#include "trainer/cuda/row_exchange.h"

#include "trainer/cuda/cuda_status.h"

namespace evoscale::trainer::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

__device__ __forceinline__ size_t Place(RowLayout layout, int dim, size_t k) {
  return (k / layout.group) * size_t(layout.stride) + (k % layout.group) * size_t(dim);
}

__global__ void ScatterRowsKernel(const float* src, const uint32_t* positions, size_t n, int dim,
                                  RowLayout layout, float* dst) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t j = e / dim;
  const int d = int(e % dim);
  dst[Place(layout, dim, positions[j]) + d] = src[e];
}

__global__ void GatherRowsAtKernel(const float* src, RowLayout layout, const uint32_t* positions,
                                   size_t n, int dim, float* dst) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t j = e / dim;
  const int d = int(e % dim);
  dst[e] = src[Place(layout, dim, positions[j]) + d];
}

}  // namespace

absl::Status ScatterRows(const float* src, const uint32_t* positions, size_t n, int dim,
                         RowLayout layout, float* dst, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim * layout.group;
  ScatterRowsKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(src, positions, n, dim, layout, dst);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status GatherRowsAt(const float* src, RowLayout layout, const uint32_t* positions, size_t n,
                          int dim, float* dst, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim * layout.group;
  GatherRowsAtKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(src, layout, positions, n, dim,
                                                               dst);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

}  // namespace evoscale::trainer::cuda
