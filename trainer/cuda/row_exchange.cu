#include "trainer/cuda/row_exchange.h"

#include "trainer/cuda/cuda_status.h"

namespace evoscale::trainer::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

__device__ __forceinline__ size_t Place(RowLayout layout, int dim, size_t k) {
  return (k / layout.group) * size_t(layout.stride) + (k % layout.group) * size_t(dim);
}

__global__ void ScatterRowsKernel(const float* src, const uint32_t* rows,
                                  const uint32_t* positions, size_t n, int dim, RowLayout layout,
                                  float* dst) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t j = e / dim;
  const int d = int(e % dim);
  dst[Place(layout, dim, positions[j]) + d] = src[size_t(rows[j]) * dim + d];
}

__global__ void SumRowsAtKernel(const float* src, RowLayout layout, const uint32_t* positions,
                                const uint32_t* rows, size_t n, int dim, float* dst) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t j = e / dim;
  const int d = int(e % dim);
  atomicAdd(&dst[size_t(rows[j]) * dim + d], src[Place(layout, dim, positions[j]) + d]);
}

}  // namespace

absl::Status ScatterRows(const float* src, const uint32_t* rows, const uint32_t* positions,
                         size_t n, int dim, RowLayout layout, float* dst, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim * layout.group;
  ScatterRowsKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(src, rows, positions, n, dim,
                                                              layout, dst);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status SumRowsAt(const float* src, RowLayout layout, const uint32_t* positions,
                       const uint32_t* rows, size_t n, int dim, size_t m, float* dst,
                       cudaStream_t stream) {
  if (m == 0) return absl::OkStatus();
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, m * dim * sizeof(float), stream));
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim * layout.group;
  SumRowsAtKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(src, layout, positions, rows, n, dim,
                                                            dst);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

}  // namespace evoscale::trainer::cuda
