// The sharded CTR trainer behind evoscale-trainer: the model of
// ../shared/bench/ctr/torch_dnn.py (26 categorical embeddings of dim D, 13 log1p dense features,
// MLP 26*D+13 -> hidden... -> 1, logistic loss), with collisionless embedding tables, on the CPU
// (cpu_trainer.h) or on a GPU (cuda/gpu_trainer.h).
//
// Output: JSON lines through the EventSink, as DESIGN.md's "Trainer protocol" specifies (built
// in protocol.h):
//   {"event":"progress","step":N,"examples":N,"elapsed_s":S,"metrics":{"logloss":..,"auc":..}}
//     every progress_every steps, metrics over the training examples since the last one;
//   {"event":"checkpoint","step":N,"examples":N,"full":B,"path":P} after each checkpoint;
//   {"event":"final","examples_per_s":..,"peak_rss_bytes":..,"metrics":{"auc":..,"logloss":..},
//     ...} with test (or held-out) metrics, then eval_examples, eval_set, steps, examples,
//     train_s, malformed_lines, table {rows, bytes, bytes_per_row, payload_bytes, evicted,
//     pending_ids, full_rejections, shard_rows}, dense_bytes, model_bytes (ids + embeddings +
//     optimizer state + MLP weights and Adam moments), rss_over_model, rss_over_payload (without
//     the ids), threads, shards, isa, checkpoints;
//   {"event":"error","step":N,"code":C,"message":M} on failure (step absent before training).
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
