// The processes of one training job. Started by `mpirun -np N` (or `srun`), each is a rank of
// MPI's world; started alone, the world is this process. JobWorld() answers the job's
// collectives (collectives.h), with the bytes each rank sends counted (the final line's
// bytes_exchanged_per_example).
//
// MPI is initialised on the first JobWorld() call only when a launcher says there are several
// processes (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), so a single-process run and the
// tests never touch it. Errors in an MPI collective end the whole job (MPI_ERRORS_ARE_FATAL),
// as does an exchange over MPI's int counts: no rank is left waiting for a dead peer. So MPI's
// collectives answer OK or end the process.
#ifndef EVOSCALE_TRAINER_COMM_H_
#define EVOSCALE_TRAINER_COMM_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/collectives.h"

namespace evoscale::trainer {

// The job's world, built once and never freed: MPI's (host payloads; collectives called from
// one thread at a time, MPI_THREAD_SERIALIZED) when a launcher started several processes,
// else a OneProcess. Fails when launched as several processes by a binary built without MPI,
// or when MPI cannot start.
absl::StatusOr<Collectives*> JobWorld();

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
