// NCCL, opened at run time on first use rather than linked, as cuBLAS (cublas_api.h): a CPU-only
// run of a CUDA build needs no NCCL, and a machine whose CUDA lacks it (NCCL ships apart from the
// toolkit) gets a clear error only when a GPU job of several processes asks for it.
#ifndef EVOSCALE_TRAINER_CUDA_NCCL_API_H_
#define EVOSCALE_TRAINER_CUDA_NCCL_API_H_

#include <nccl.h>

#include <string>

#include "absl/status/statusor.h"

namespace evoscale::trainer::cuda {

// The NCCL entry points the trainer uses.
struct NcclApi {
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclGetLastError) get_last_error;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  std::string path;  // what was opened: the path given, or the soname the loader found
};

// Opens NCCL from `path` when it is not empty (FAILED_PRECONDITION naming it if that fails),
// else from its soname (libnccl.so.2, the loader's search path) and then the copy CMake found
// beside the CUDA toolkit; FAILED_PRECONDITION naming what was tried and EVOSCALE_NCCL_LIBRARY
// when none opens or one lacks an entry point. Never closed.
absl::StatusOr<NcclApi> OpenNccl(const std::string& path);

// OpenNccl(EVOSCALE_NCCL_LIBRARY or ""), once; later calls return the same table. Thread-safe.
absl::StatusOr<const NcclApi*> Nccl();

// "ncclX: text" for a result, with NCCL's last error message when it has one.
std::string NcclResultText(const NcclApi& api, ncclResult_t result);

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_NCCL_API_H_
