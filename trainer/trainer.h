// The sharded CTR trainer behind evoscale-trainer: the model of
// ../shared/bench/ctr/torch_dnn.py (26 categorical embeddings of dim D, 13 log1p dense features,
// MLP 26*D+13 -> hidden... -> 1, logistic loss), with collisionless embedding tables.
//
// Parallelism: the embedding is split by id into `shards` tables; shard s is owned by worker
// s % threads and only that worker touches it (shared-nothing: the batch reader routes each
// batch's ids to their shards, owners gather rows into the batch's input and later apply the
// gradients of their own rows). The MLP runs data-parallel: each worker takes a slice of the
// batch, then each applies Adam to a slice of the parameters. Workers meet at barriers; the
// calling thread is worker 0. A step is deterministic for a given seed and thread count.
//
// Output: JSON lines through the EventSink, as DESIGN.md's "Trainer protocol" specifies:
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

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/sparse_optimizer.h"

namespace evoscale::trainer {

struct TrainerConfig {
  // Data: exactly one of train_path and synthetic_rows.
  std::string train_path;
  std::string test_path;          // empty: evaluate on a held-out share of the training stream
  int64_t synthetic_rows = 0;     // > 0: generated data (criteo_reader.h) instead of a file
  double holdout_fraction = 0.1;  // without test_path: every round(1/f)-th row is held out
  double max_malformed_fraction = 0.01;

  int epochs = 1;
  int batch_size = 1024;
  int embedding_dim = 16;
  std::vector<int> hidden = {256, 128};
  SparseOptimizerConfig sparse;  // default Adagrad, lr 0.05 (as torch_dnn.py)
  float lr_dense = 1e-3f;        // Adam
  float init_stddev = 0.01f;     // embeddings start N(0, init_stddev^2)
  int threads = 2;
  int shards = 0;  // 0: one per thread
  uint64_t seed = 0;
  int64_t max_steps = 0;  // 0: run all epochs

  // Occurrence threshold for every categorical slot, then per-slot overrides.
  uint32_t min_count = 0;
  std::vector<uint32_t> min_count_by_slot;
  // Expiry: rows not updated for this many steps are evicted (checked every evict_every steps).
  int64_t expire_after_steps = 0;
  int64_t evict_every = 1000;

  std::string checkpoint_dir;       // empty: no checkpoints
  int64_t checkpoint_every = 1000;  // steps between checkpoints (and one at the end)
  int full_checkpoint_every = 8;    // every k-th checkpoint is full, the others deltas
  bool resume = false;

  std::string device = "cpu";
  int64_t progress_every = 100;  // steps between progress events
};

// Receives each JSON line (without the newline).
using EventSink = std::function<void(std::string_view line)>;

// INVALID_ARGUMENT naming the offending setting, or OK.
absl::Status ValidateConfig(const TrainerConfig& config);

// Trains as configured, emitting progress events and a final event (or an error event for a
// failure during training, such as a non-finite loss, which names the step). Returns the error
// too. Blocking; uses config.threads threads plus one reader thread. device "cuda" trains on the
// GPU (cuda/gpu_trainer.h) when built with CUDA and a device is present; otherwise UNIMPLEMENTED
// ("built without CUDA") or FAILED_PRECONDITION ("no CUDA device").
absl::Status RunTrainer(const TrainerConfig& config, const EventSink& sink);

// Formats a JSON string literal (quotes and escapes).
std::string JsonString(absl::string_view s);
// Formats a number for JSON: finite doubles with up to 6 significant digits, else null.
std::string JsonNumber(double v);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_TRAINER_H_
