#include "trainer/gpu.h"

#ifdef EVOSCALE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace evoscale::trainer {

#ifdef EVOSCALE_HAVE_CUDA

bool BuiltWithCuda() { return true; }

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  // No device and no (or an old) driver both mean: nothing to run on.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) return 0;
  if (err != cudaSuccess) {
    return absl::InternalError(
        std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
        cudaGetErrorString(err));
  }
  return count;
}

#else

bool BuiltWithCuda() { return false; }

absl::StatusOr<int> CudaDeviceCount() {
  return absl::UnimplementedError("built without CUDA (configure with -DEVOSCALE_CUDA=ON)");
}

#endif

absl::Status CheckCudaAvailable() {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    return absl::Status(count.status().code(),
                        std::string("--device cuda: ") + std::string(count.status().message()));
  }
  if (*count == 0) {
    return absl::FailedPreconditionError("--device cuda: no CUDA device on this machine");
  }
  return absl::OkStatus();
}

}  // namespace evoscale::trainer
