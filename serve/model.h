// The model evoscale-serve answers with: the trainer's embedding rows (one collisionless table,
// embeddings only, no optimizer state) and its MLP, loaded from a trainer checkpoint, computing
// P(click) exactly as the trainer evaluates (an id without a row, unseen or still below its
// occurrence threshold, looks up zeros).
//
// A checkpoint directory holds either one process's checkpoints (DIR/ckpt-<step>/) or a job's of
// N ranks (DIR/rank-R-of-N/ckpt-<step>/, each rank's rows its own); a job's model is the newest
// step every rank has written, its rows the union of the ranks' (ids never repeat across ranks),
// its MLP rank 0's (the ranks train it data-parallel: every rank's is the same).
//
// Pure C++ (no protobuf, no sockets): the gRPC edge in prediction_service.h converts.
// Thread-safe: Predict may run on any number of threads at once.
#ifndef EVOSCALE_SERVE_MODEL_H_
#define EVOSCALE_SERVE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "trainer/criteo_reader.h"
#include "trainer/embedding_table.h"
#include "trainer/mlp.h"

namespace evoscale::serve {

struct ModelInfo {
  std::string dir;          // the checkpoint directory given
  int64_t step = 0;         // the checkpoint's training step
  int ranks = 1;            // processes of the job that wrote it
  int dim = 0;              // embedding width
  std::vector<int> mlp_sizes;  // input width, hidden widths, 1
  std::string optimizer;    // the sparse optimizer it was trained with (not needed to serve)
  size_t rows = 0;          // embedding rows loaded
  size_t memory_bytes = 0;  // table and MLP as held
};

class Model {
 public:
  // Loads the newest complete checkpoint in `dir`. FAILED_PRECONDITION naming what differs for
  // a checkpoint of another layout than the trainer's (an MLP input other than 26 x dim + 13, a
  // last layer other than 1, ranks that disagree on dim, MLP or step); NOT_FOUND when dir holds
  // no checkpoint; DATA_LOSS for a truncated or foreign file.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir);

  // P(click) of n examples: dense (n, kNumDense) already transformed (trainer::DenseFeature),
  // fids (n, kNumCategorical) as trainer::MakeFid makes them; probabilities (n).
  void Predict(const float* dense, const uint64_t* fids, int n, float* probabilities) const;
  // The same, answering logits (the trainer's evaluation scores).
  void PredictLogits(const float* dense, const uint64_t* fids, int n, float* logits) const;

  const ModelInfo& info() const { return info_; }
  int64_t sparse_version() const { return info_.step; }
  int64_t dense_version() const { return info_.step; }

 private:
  // One caller's buffers: the MLP's workspace and the batch's input rows.
  struct Scratch {
    trainer::Mlp::Workspace ws;
    std::vector<float> x;        // (rows, input)
    std::vector<uint32_t> rows;  // (rows * kNumCategorical)
  };
  static constexpr int kChunk = 256;  // examples per pass through the MLP

  Model() = default;
  std::unique_ptr<Scratch> Acquire() const;
  void Release(std::unique_ptr<Scratch> scratch) const;

  ModelInfo info_;
  std::unique_ptr<trainer::EmbeddingTable> table_;
  std::unique_ptr<trainer::Mlp> mlp_;
  int input_ = 0;

  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<Scratch>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_MODEL_H_
