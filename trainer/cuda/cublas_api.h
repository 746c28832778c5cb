// cuBLAS, opened at run time on first use rather than linked: loading libcublas/libcublasLt costs
// a process about 150 MB of resident memory at start-up, which every CPU-only run of a
// CUDA-enabled build would otherwise pay (and which would break the trainer's memory budget).
#ifndef EVOSCALE_TRAINER_CUDA_CUBLAS_API_H_
#define EVOSCALE_TRAINER_CUDA_CUBLAS_API_H_

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace evoscale::trainer::cuda {

// The cuBLAS entry points the trainer uses.
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemv_v2) sgemv;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// Opens libcublas (its soname, then the toolkit's copy found at configure time) once; later
// calls return the same table. FAILED_PRECONDITION naming the library if it cannot be opened.
// Thread-safe.
absl::StatusOr<const CublasApi*> Cublas();

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_CUBLAS_API_H_
