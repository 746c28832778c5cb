// Whether this build and this machine can train on a GPU (--device cuda). Available in every
// build: without CUDA the answers are "no" and UNIMPLEMENTED, so callers need no #ifdefs.
#ifndef EVOSCALE_TRAINER_GPU_H_
#define EVOSCALE_TRAINER_GPU_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace evoscale::trainer {

// True when the trainer was built with CUDA (CMake option EVOSCALE_CUDA).
bool BuiltWithCuda();

// The number of CUDA devices this process can use: 0 when the driver reports none
// (cudaErrorNoDevice) or no NVIDIA driver is installed at all. Any other CUDA error is an error
// naming it and the driver and runtime versions (cuda::DeviceCountFromCuda): FAILED_PRECONDITION
// for a driver that cannot run this build (too old, a stub library, ...), INTERNAL otherwise.
// UNIMPLEMENTED in a build without CUDA. Thread-safe.
absl::StatusOr<int> CudaDeviceCount();

// OK when --device cuda can run here; otherwise UNIMPLEMENTED "built without CUDA",
// FAILED_PRECONDITION "no CUDA device", or CudaDeviceCount's error, prefixed "--device cuda: ".
absl::Status CheckCudaAvailable();

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_GPU_H_
