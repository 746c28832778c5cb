// The sharded CTR trainer behind evoscale-trainer: the model of
// ../shared/bench/ctr/torch_dnn.py (26 categorical embeddings of dim D, 13 log1p dense features,
// MLP 26*D+13 -> hidden... -> 1, logistic loss), with collisionless embedding tables, on the CPU
// (cpu_trainer.h) or on a GPU (cuda/gpu_trainer.h).
//
// Output: the trainer protocol's JSON lines through the EventSink (built in protocol.h; the
// protocol: trainer/PROTOCOL.md).
#ifndef EVOSCALE_TRAINER_TRAINER_H_
#define EVOSCALE_TRAINER_TRAINER_H_

#include "absl/status/status.h"
#include "trainer/protocol.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer {

// Trains as configured, emitting progress events and a final event (or an error event for a
// failure during training, such as a non-finite loss, which names the step). Returns the error
// too. Blocking; uses config.threads threads plus one reader thread. device "cuda" trains on the
// GPU (cuda/gpu_trainer.h) when built with CUDA and a device is present; otherwise UNIMPLEMENTED
// ("built without CUDA") or FAILED_PRECONDITION ("no CUDA device").
absl::Status RunTrainer(const TrainerConfig& config, const EventSink& sink);

// A running trainer stops early, with a checkpoint, on RequestStop() (trainer/stop_request.h).

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_TRAINER_H_
