// The collectives a training job's ranks call together, one interface over every transport: MPI
// (a CPU job, comm.h), NCCL (a GPU job, cuda/nccl_comm.h) and OneProcess below (a job of one).
// Every rank calls the same collectives in the same order; each returns a Status.
//
// A failed collective leaves its transport unusable and ends the job: MPI aborts every rank
// (MPI_ERRORS_ARE_FATAL), NCCL aborts the communicator, so the peers' collectives fail too.
// What a rank itself fails at (a file it cannot read) is agreed through FirstFailure instead,
// so that every rank ends with the same reason.
//
// Payloads (AllToAllV, AllReduceSum of floats) live where the transport moves them:
// payload_memory() says host or device memory. Everything else takes host values.
//
// Not thread-safe: one thread of a rank calls its collectives, one at a time.
#ifndef EVOSCALE_TRAINER_COLLECTIVES_H_
#define EVOSCALE_TRAINER_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace evoscale::trainer {

enum class PayloadMemory { kHost, kDevice };

class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool distributed() const { return size() > 1; }
  virtual PayloadMemory payload_memory() const = 0;

  // Payloads. Each rank sends send_counts[r] elements of elem_bytes bytes, from `send` in rank
  // order, to rank r, and receives recv_counts[r] elements from each into `recv`, in rank order.
  // The counts must mirror the peers' (AllToAll exchanges them first where they are not known).
  virtual absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                                 void* recv, const std::vector<int64_t>& recv_counts,
                                 size_t elem_bytes) = 0;
  // data, (n), becomes the sum over the ranks.
  virtual absl::Status AllReduceSum(float* data, size_t n) = 0;

  // Host values. AllToAll: send[r] (send.size() == size()) to rank r; *recv gets one from each.
  virtual absl::Status AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) = 0;
  // v, (n), becomes the element-wise sum, minimum or maximum over the ranks.
  virtual absl::Status AllReduceSum(int64_t* v, size_t n) = 0;
  virtual absl::Status AllReduceMin(int64_t* v, size_t n) = 0;
  virtual absl::Status AllReduceMax(int64_t* v, size_t n) = 0;
  virtual absl::Status AllReduceMax(double* v, size_t n) = 0;
  // Every rank gets root's `bytes` bytes at data.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  // Rank 0 gets every rank's `mine` in rank order into *all; the others get nothing.
  virtual absl::Status GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) = 0;

  // Every rank gets every rank's `mine`, in rank order (one AllReduceSum of size() values).
  absl::Status AllGather(int64_t mine, std::vector<int64_t>* all);
  // The job's first failure: every rank passes its own status and gets the same answer, OK when
  // all are, else the status of the lowest failing rank, its message prefixed "rank R: " in a
  // job of several, so that rank 0 can report another rank's reason. A failed collective
  // answers its own error instead. Costs one AllReduceMin, and two Broadcasts on a failure.
  absl::Status FirstFailure(const absl::Status& mine);

  // Bytes this rank has sent to others (payloads and the counted host values; MPI counts no
  // minimum or maximum).
  virtual int64_t bytes_sent() const = 0;
};

// A job of one process: rank 0 of 1. Every collective answers at once with this rank's own
// values (AllToAllV copies its own share, host memory); none fails.
class OneProcess final : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  PayloadMemory payload_memory() const override { return PayloadMemory::kHost; }
  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                         const std::vector<int64_t>& recv_counts, size_t elem_bytes) override;
  absl::Status AllReduceSum(float*, size_t) override { return absl::OkStatus(); }
  absl::Status AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) override;
  absl::Status AllReduceSum(int64_t*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceMin(int64_t*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceMax(int64_t*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceMax(double*, size_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) override;
  int64_t bytes_sent() const override { return 0; }
};

// As AllToAllV on host vectors: *recv is resized to the sum of recv_counts. T is trivially
// copyable; `job` moves host payloads.
template <typename T>
absl::Status AllToAllVOf(Collectives& job, const std::vector<T>& send,
                         const std::vector<int64_t>& send_counts, std::vector<T>* recv,
                         const std::vector<int64_t>& recv_counts) {
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  recv->resize(size_t(total));
  return job.AllToAllV(send.data(), send_counts, recv->data(), recv_counts, sizeof(T));
}

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_COLLECTIVES_H_
