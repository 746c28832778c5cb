// --device cuda: the trainer of trainer.h with the embedding in one GpuEmbeddingTable and the
// MLP on cuBLAS. Same data, model, initial weights (from the seed) and protocol lines as the CPU
// path; a step runs on one stream: upload the batch, find-or-insert its ids, gather the input,
// forward/backward, Adam, sparse update, then the logits come back for the loss and metrics.
//
// Not supported on the GPU yet (UNIMPLEMENTED): FTRL/Adam sparse optimizers, checkpoints,
// occurrence thresholds and expiry. A job of several processes: GpuJob below.
#ifndef EVOSCALE_TRAINER_CUDA_GPU_TRAINER_H_
#define EVOSCALE_TRAINER_CUDA_GPU_TRAINER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "trainer/protocol.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer {
class Collectives;
}

namespace evoscale::trainer::cuda {

// The processes of a GPU job. One (the default): no NCCL. Several: each rank owns the embedding
// rows whose id hashes to it (ShardOfFid over the ranks) in its own GpuEmbeddingTable, reads its
// slice of the input with a batch of batch_size / size examples, and per step sends its ids to
// their owners and gets their rows back, sends the rows' gradients to the owners, and sums the
// dense gradients over the job, all over NCCL between device buffers; metrics come from every
// rank's examples, and rank 0 alone emits lines.
struct GpuJob {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // the CUDA device is local_rank modulo the devices this process sees
  // NCCL's id reaches the ranks through MPI when `mpi` is set (mpirun, srun), else through this
  // file (comm.h, RanksFromEnvironment).
  Collectives* mpi = nullptr;
  std::string rendezvous_file;
  // A collective that makes no progress this long ends the job (a rank stopped answering).
  double stall_timeout_s = 120;
};

// As RunCpuTrainer (cpu_trainer.h), for a config that ValidateConfig accepted with device
// "cuda" once CheckCudaAvailable (gpu.h) has said yes: emits progress and final lines; a failure
// is returned, not emitted, with *step the number of steps completed. Blocking.
absl::Status RunGpuTrainer(const TrainerConfig& config, const GpuJob& job, const EventSink& sink,
                           int64_t* step);

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_GPU_TRAINER_H_
