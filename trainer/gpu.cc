#include "trainer/gpu.h"

#ifdef EVOSCALE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "trainer/cuda/cuda_status.h"
#endif

namespace evoscale::trainer {

#ifdef EVOSCALE_HAVE_CUDA

bool BuiltWithCuda() { return true; }

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cuda::CudaVersions versions;
  if (err != cudaSuccess) {
    // For the error's message, and to tell "no driver installed" (version 0) from an old one.
    if (cudaDriverGetVersion(&versions.driver) != cudaSuccess) versions.driver = -1;
    if (cudaRuntimeGetVersion(&versions.runtime) != cudaSuccess) versions.runtime = -1;
  }
  return cuda::DeviceCountFromCuda(err, count, versions);
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
