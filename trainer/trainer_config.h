// The settings of one training run (flags.h fills them from the command line) and their checks.
#ifndef EVOSCALE_TRAINER_TRAINER_CONFIG_H_
#define EVOSCALE_TRAINER_TRAINER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

  // Online training: the training examples without end (--train - is stdin, ending at its EOF;
  // a file is followed past its end, as tail -f does, until SIGTERM). One pass, nothing held
  // out (evaluation only on --test).
  bool stream = false;
  // Serving replicas (evoscale-serve's gRPC addresses) that get every changed row at most every
  // push_every_s seconds, and the MLP at most every dense_every_s (and at the end).
  std::vector<std::string> serve;
  double push_every_s = 1;
  double dense_every_s = 60;

  std::string device = "cpu";
  int64_t progress_every = 100;  // steps between progress events
};

// INVALID_ARGUMENT naming the offending setting (as its flag), or OK.
absl::Status ValidateConfig(const TrainerConfig& config);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_TRAINER_CONFIG_H_
