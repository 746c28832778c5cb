// CUDA and cuBLAS errors as absl::Status, naming the failed call and where it was made.
#ifndef EVOSCALE_TRAINER_CUDA_CUDA_STATUS_H_
#define EVOSCALE_TRAINER_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace evoscale::trainer::cuda {

// INTERNAL (RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation) "file:line: expr: cudaErrorX: text".
absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line);
absl::Status CublasError(cublasStatus_t err, const char* expr, const char* file, int line);

// CUDA versions as cudaDriverGetVersion and cudaRuntimeGetVersion answer them (both work without
// a device): 1000 * major + 10 * minor.
struct CudaVersions {
  int driver = 0;  // the newest CUDA the installed driver supports; 0 when none is installed
  int runtime = 0;
};

// What cudaGetDeviceCount's answer (err, count) means for --device cuda; a pure function of its
// arguments. The count for cudaSuccess. 0 ("no GPU": --device cuda is FAILED_PRECONDITION and GPU
// tests skip) only when there is nothing to run on: cudaErrorNoDevice, or no NVIDIA driver
// installed at all (cudaErrorInsufficientDriver with driver version 0, as on a CPU machine).
// Anything else is an error naming the CUDA error and both versions, so that a GPU machine that
// cannot run fails loudly instead of passing for one without a GPU: FAILED_PRECONDITION when the
// machine's driver setup cannot run this build (a driver older than the runtime, a stub
// libcuda, a driver/kernel module mismatch, devices busy or unsupported), INTERNAL otherwise.
absl::StatusOr<int> DeviceCountFromCuda(cudaError_t err, int count, CudaVersions versions);

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
