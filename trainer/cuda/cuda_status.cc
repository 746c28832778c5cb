#include "trainer/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"
#include "trainer/cuda/cublas_api.h"

namespace evoscale::trainer::cuda {

absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line) {
  std::string message =
      absl::StrCat(file, ":", line, ": ", expr, ": ", cudaGetErrorName(err), ": ",
                   cudaGetErrorString(err));
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CublasError(cublasStatus_t err, const char* expr, const char* file, int line) {
  absl::StatusOr<const CublasApi*> api = Cublas();
  std::string message =
      api.ok() ? absl::StrCat(file, ":", line, ": ", expr, ": ", (*api)->status_name(err), ": ",
                              (*api)->status_string(err))
               : absl::StrCat(file, ":", line, ": ", expr, ": cuBLAS status ", int(err));
  if (err == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace evoscale::trainer::cuda
