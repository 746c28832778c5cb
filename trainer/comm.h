// The processes of one training job. Started by `mpirun -np N` (or `srun`), each is a rank of
// MPI's world; started alone, the world is this process. The collectives the trainer needs,
// with the bytes each rank sends counted (the final line's bytes_exchanged_per_example).
//
// MPI is initialised on the first World() call only when a launcher says there are several
// processes (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), so a single-process run and the
// tests never touch it. Errors in a collective end the whole job (MPI_ERRORS_ARE_FATAL): no
// rank is left waiting for a dead peer.
#ifndef EVOSCALE_TRAINER_COMM_H_
#define EVOSCALE_TRAINER_COMM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace evoscale::trainer {

class Comm {
 public:
  // The job's world; built once. Fails when launched as several processes by a binary built
  // without MPI, or when MPI cannot start.
  static absl::StatusOr<Comm*> World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }

  // Each rank sends send_counts[r] elements of `send` (in rank order) to rank r and receives
  // what each sends it, in rank order; recv_counts gets the counts. T is trivially copyable.
  template <typename T>
  void AllToAllV(const std::vector<T>& send, const std::vector<int64_t>& send_counts,
                 std::vector<T>* recv, std::vector<int64_t>* recv_counts) {
    recv_counts->assign(size_, 0);
    ExchangeCounts(send_counts, recv_counts);
    int64_t total = 0;
    for (int64_t c : *recv_counts) total += c;
    recv->resize(size_t(total));
    AllToAllVBytes(send.data(), send_counts, recv->data(), *recv_counts, sizeof(T));
  }
  // As AllToAllV when the receiver already knows the counts (the reverse of an earlier one).
  template <typename T>
  void AllToAllVKnown(const std::vector<T>& send, const std::vector<int64_t>& send_counts,
                      std::vector<T>* recv, const std::vector<int64_t>& recv_counts) {
    int64_t total = 0;
    for (int64_t c : recv_counts) total += c;
    recv->resize(size_t(total));
    AllToAllVBytes(send.data(), send_counts, recv->data(), recv_counts, sizeof(T));
  }

  void AllReduceSum(float* data, size_t n);
  void AllReduceSum(double* data, size_t n);
  void AllReduceSum(int64_t* data, size_t n);
  int64_t AllReduceMin(int64_t v);
  int64_t AllReduceMax(int64_t v);
  double AllReduceMax(double v);
  // Every rank gets root's `bytes` bytes at data.
  void Broadcast(void* data, size_t bytes, int root);
  // Rank 0 gets every rank's `mine`, in rank order; the others get nothing.
  void GatherToRoot(const std::vector<float>& mine, std::vector<float>* all);
  void GatherToRoot(int64_t mine, std::vector<int64_t>* all);

  // The job's first failure: every rank passes its own status and gets the same answer, OK when
  // all are, else the status of the lowest failing rank, its message prefixed "rank R: " (in a
  // job of several), so rank 0 can report another rank's reason.
  absl::Status FirstFailure(const absl::Status& mine);

  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  Comm() = default;
  void ExchangeCounts(const std::vector<int64_t>& send_counts, std::vector<int64_t>* recv_counts);
  void AllToAllVBytes(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                      const std::vector<int64_t>& recv_counts, size_t elem_bytes);
  template <typename T>
  void AllReduceSumOf(T* data, size_t n);

  int rank_ = 0;
  int size_ = 1;
  int64_t bytes_sent_ = 0;
};

// The job's first failure, as Comm::FirstFailure answers it, over any transport: every rank
// passes its own status and the two collectives it takes there, `min` (an int64 reduced to its
// minimum over the ranks) and `broadcast` (root's bytes to every rank). A failed collective
// answers its own error.
absl::Status FirstFailureOver(
    int rank, int size, const absl::Status& mine,
    absl::FunctionRef<absl::StatusOr<int64_t>(int64_t)> min,
    absl::FunctionRef<absl::Status(void* data, size_t bytes, int root)> broadcast);

// The launcher's process count from the environment (1 when not launched by one).
int LauncherWorldSize();

// A GPU job's ranks without MPI, as torchrun's env:// gives them (the machine lent for GPU checks
// has no Open MPI): EVOSCALE_WORLD_SIZE processes, each started with its EVOSCALE_RANK (0-based),
// optionally EVOSCALE_LOCAL_RANK (its GPU among the host's; default: the rank), and one
// EVOSCALE_RENDEZVOUS_FILE that every rank can read and that must not exist when the job starts
// (rank 0 writes NCCL's id there; a file on a shared file system across hosts).
struct EnvironmentRanks {
  int rank = 0;
  int size = 1;  // 1: not set, a single process
  int local_rank = 0;
  std::string rendezvous_file;
};
// INVALID_ARGUMENT naming the variable for a malformed or out-of-range value, for a rank or
// rendezvous file without a world size, a world size without them, or when an MPI launcher
// started the process too (one way to find the ranks, not two).
absl::StatusOr<EnvironmentRanks> RanksFromEnvironment();

// Rank 0's `bytes` bytes for every rank through the rendezvous file: rank 0 writes `mine` (its
// size must be `bytes`) to `path`, which must not exist yet (ALREADY_EXISTS: a file left by an
// earlier job would hand its id to this one's ranks); the others wait for it, up to `timeout`
// (DEADLINE_EXCEEDED naming the file: rank 0 never came), and read it. The file appears whole
// (written beside it, then linked in). Rank 0 returns `mine`.
absl::StatusOr<std::string> ShareThroughFile(const std::string& path, int rank,
                                             const std::string& mine, size_t bytes,
                                             double timeout_s);

// This process's GPU among its host's: the launcher's local rank (Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID), else 0.
int LauncherLocalRank();

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_COMM_H_
