// --device cpu: the trainer of trainer.h on this machine's cores.
//
// Parallelism: the embedding is split by id into `shards` tables; shard s is owned by worker
// s % threads and only that worker touches it (shared-nothing: the batch reader routes each
// batch's ids to their shards, owners gather rows into the batch's input and later apply the
// gradients of their own rows). The MLP runs data-parallel: each worker takes a slice of the
// batch, then each applies Adam to a slice of the parameters. Workers meet at barriers; the
// calling thread is worker 0. A step is deterministic for a given seed and thread count.
#ifndef EVOSCALE_TRAINER_CPU_TRAINER_H_
#define EVOSCALE_TRAINER_CPU_TRAINER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "trainer/protocol.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer {

// Trains as a config that ValidateConfig accepted says, emitting progress, checkpoint and final
// lines. A failure is returned, not emitted; either way *step is the number of steps completed
// (including those before a resume). Blocking; uses config.threads threads plus one reader
// thread.
absl::Status RunCpuTrainer(const TrainerConfig& config, const EventSink& sink, int64_t* step);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_CPU_TRAINER_H_
