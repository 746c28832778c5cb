// CUDA and cuBLAS errors as absl::Status, naming the failed call and where it was made.
#ifndef EVOSCALE_TRAINER_CUDA_CUDA_STATUS_H_
#define EVOSCALE_TRAINER_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace evoscale::trainer::cuda {

// INTERNAL (RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation) "file:line: expr: cudaErrorX: text".
absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line);
absl::Status CublasError(cublasStatus_t err, const char* expr, const char* file, int line);

}  // namespace evoscale::trainer::cuda

#define EVOSCALE_CUDA_RETURN_IF_ERROR(expr)                                               \
  do {                                                                                    \
    const cudaError_t evoscale_cuda_err_ = (expr);                                        \
    if (evoscale_cuda_err_ != cudaSuccess)                                                \
      return ::evoscale::trainer::cuda::CudaError(evoscale_cuda_err_, #expr, __FILE__,    \
                                                  __LINE__);                              \
  } while (0)

#define EVOSCALE_CUBLAS_RETURN_IF_ERROR(expr)                                             \
  do {                                                                                    \
    const cublasStatus_t evoscale_cublas_err_ = (expr);                                   \
    if (evoscale_cublas_err_ != CUBLAS_STATUS_SUCCESS)                                    \
      return ::evoscale::trainer::cuda::CublasError(evoscale_cublas_err_, #expr, __FILE__, \
                                                    __LINE__);                            \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, execution errors at the next
// synchronising call.
#define EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED() EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetLastError())

#endif  // EVOSCALE_TRAINER_CUDA_CUDA_STATUS_H_
