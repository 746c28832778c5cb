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

namespace {

// version 0: none installed; negative: the query itself failed.
std::string VersionText(int version) {
  if (version == 0) return "none";
  if (version < 0) return "unknown";
  return absl::StrCat(version / 1000, ".", version % 1000 / 10);
}

// cudaGetDeviceCount's errors that come from the machine's setup, which an operator fixes
// (driver, kernel module, compute mode).
bool IsSetupError(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorDevicesUnavailable:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<int> DeviceCountFromCuda(cudaError_t err, int count, CudaVersions versions) {
  if (err == cudaSuccess) return count;
  if (err == cudaErrorNoDevice) return 0;
  // The runtime answers a machine without libcuda (a CPU machine) with cudaErrorInsufficientDriver
  // too; only a driver that is there and too old is an error.
  if (err == cudaErrorInsufficientDriver && versions.driver == 0) return 0;
  std::string message =
      absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err),
                   " (driver supports CUDA ", VersionText(versions.driver), ", runtime is CUDA ",
                   VersionText(versions.runtime), ")");
  if (IsSetupError(err)) return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}

}  // namespace evoscale::trainer::cuda
