// The processes of a GPU training job, over NCCL: the job's Collectives (trainer/collectives.h)
// with device payloads, so the exchange of the sharded trainer (ids to their owners, rows back,
// gradients to their owners) and the dense gradients' all-reduce run between device buffers;
// the few host-side collectives a step needs (counts, the step's agreement, the metrics'
// gather) are staged through a small device buffer, so that the GPU job needs no MPI (the
// machines lent for GPU checks have none).
//
// Device collectives are enqueued on the stream given to Create and return at once;
// Synchronize() waits for them and notices a failed peer: NCCL's asynchronous error (a rank
// that died closes its sockets: ncclRemoteError / ncclSystemError), or a stream that makes no
// progress for stall_timeout_s. Either aborts the communicator and is UNAVAILABLE, so a job never
// hangs on a dead rank. The host-side collectives synchronise. Not thread-safe.
#ifndef EVOSCALE_TRAINER_CUDA_NCCL_COMM_H_
#define EVOSCALE_TRAINER_CUDA_NCCL_COMM_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/collectives.h"
#include "trainer/cuda/device_buffer.h"

namespace evoscale::trainer::cuda {

struct NcclApi;

class NcclComm final : public Collectives {
 public:
  // Hands rank 0's id (filled in by Create) to every other rank: given `id` on rank 0, it must
  // fill `id` on the others (an MPI broadcast, or the rendezvous file, comm.h).
  using ShareId = std::function<absl::Status(ncclUniqueId* id)>;

  // Joins the job as `rank` of `size` on the current CUDA device. FAILED_PRECONDITION when NCCL
  // cannot be opened; UNAVAILABLE naming NCCL's error when the communicator cannot be made.
  static absl::StatusOr<std::unique_ptr<NcclComm>> Create(int rank, int size, const ShareId& share,
                                                          cudaStream_t stream,
                                                          double stall_timeout_s);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  PayloadMemory payload_memory() const override { return PayloadMemory::kDevice; }

  // Enqueued, device payloads: `send` and `recv` on this rank's device. A rank's own share is
  // a device copy; empty shares send nothing.
  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                         const std::vector<int64_t>& recv_counts, size_t elem_bytes) override;
  // Enqueued: data (device, (n)) becomes the sum over the ranks.
  absl::Status AllReduceSum(float* data, size_t n) override;

  // Host values, synchronous (each waits for the stream, as Synchronize).
  absl::Status AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) override;
  absl::Status AllReduceSum(int64_t* v, size_t n) override;
  absl::Status AllReduceMin(int64_t* v, size_t n) override;
  absl::Status AllReduceMax(int64_t* v, size_t n) override;
  absl::Status AllReduceMax(double* v, size_t n) override;
  absl::Status GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) override;
  // `data` is host memory.
  absl::Status Broadcast(void* data, size_t bytes, int root) override;

  // Waits for everything enqueued on the stream (see above).
  absl::Status Synchronize();

  // Bytes this rank sent to others (payloads; the host collectives' few bytes included).
  int64_t bytes_sent() const override { return bytes_sent_; }

 private:
  NcclComm(const NcclApi* api, int rank, int size, cudaStream_t stream, double stall_timeout_s);
  absl::Status Check(ncclResult_t result, const char* what);
  absl::Status Reduce(void* host, size_t n, size_t elem_bytes, ncclDataType_t type, ncclRedOp_t op);
  absl::Status EnsureScratch(size_t bytes);
  // Synchronize, then `bytes` from device to host (pageable) memory.
  absl::Status CopyToHost(void* host, const void* device, size_t bytes);

  // Constant after construction.
  const NcclApi* const api_;
  const int rank_, size_;
  const cudaStream_t stream_;
  const double stall_timeout_s_;

  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  DeviceBuffer<char> scratch_;  // device: host collectives' staging
  int64_t bytes_sent_ = 0;
};

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_NCCL_COMM_H_
