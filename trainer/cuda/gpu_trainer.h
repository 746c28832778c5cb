// --device cuda: the trainer of trainer.h with the embedding in one GpuEmbeddingTable and the
// MLP on cuBLAS. Same data, model, initial weights (from the seed) and protocol lines as the CPU
// path; a step runs on one stream: upload the batch, find-or-insert its ids, gather the input,
// forward/backward, Adam, sparse update, then the logits come back for the loss and metrics.
//
// Not supported on the GPU yet (UNIMPLEMENTED): FTRL/Adam sparse optimizers, checkpoints,
// occurrence thresholds and expiry.
#ifndef EVOSCALE_TRAINER_CUDA_GPU_TRAINER_H_
#define EVOSCALE_TRAINER_CUDA_GPU_TRAINER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "trainer/protocol.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer::cuda {

// As RunCpuTrainer (cpu_trainer.h), for a config that ValidateConfig accepted with device
// "cuda" once CheckCudaAvailable (gpu.h) has said yes: emits progress and final lines; a failure
// is returned, not emitted, with *step the number of steps completed. Blocking.
absl::Status RunGpuTrainer(const TrainerConfig& config, const EventSink& sink, int64_t* step);

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_GPU_TRAINER_H_
