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
// Online updates (ApplyRows, SwapDense) run beside the answers: the table is split into
// kShards shards by id hash, each behind its own reader/writer lock, so a push holds one shard
// at a time, briefly, and an answer waits at most for one shard's part of one push; the MLP is
// swapped as a whole (an answer in flight finishes on the one it started with).
//
// Pure C++ (no protobuf, no sockets): the gRPC edge in prediction_service.h converts.
// Thread-safe: every method may run on any number of threads at once.
#ifndef EVOSCALE_SERVE_MODEL_H_
#define EVOSCALE_SERVE_MODEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
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
  size_t memory_bytes = 0;  // table and MLP as held at load
};

// One push of rows from a trainer (ModelSyncService.PushRows, converted).
struct RowUpdate {
  std::string source;  // "rank-R-of-N", or "" for one process
  int64_t version = 0;
  int dim = 0;
  const uint64_t* keys = nullptr;
  size_t rows = 0;
  const float* values = nullptr;  // rows x dim
  size_t value_count = 0;
  const uint64_t* erased = nullptr;
  size_t erased_count = 0;
};

class Model {
 public:
  static constexpr int kShards = 16;

  // Loads the newest complete checkpoint in `dir`. FAILED_PRECONDITION naming what differs for
  // a checkpoint of another layout than the trainer's (an MLP input other than 26 x dim + 13, a
  // last layer other than 1, ranks that disagree on dim, MLP or step); NOT_FOUND when dir holds
  // no checkpoint; DATA_LOSS for a truncated or foreign file.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir);
  // The folders Load(dir) reads (dir itself, or a job's rank folders) and the complete
  // checkpoint steps they all hold, oldest first; the errors of Load for a dir without any.
  struct Checkpoints {
    std::vector<std::string> folders;
    std::vector<int64_t> steps;
  };
  static absl::StatusOr<Checkpoints> ListCheckpoints(const std::string& dir);

  // Loads the newest complete checkpoint in the directory this model came from and serves it
  // in place of this one, whole: rows, MLP, the checkpoint's step as both versions, the
  // sources' versions forgotten (a rollback, once `evoscale-serve rollback` moved the newer
  // checkpoints aside). Serialised with pushes; an answer in flight may finish on some shards
  // of either model, never a row half written. Both models are held while the new one loads
  // (twice the memory, briefly). On any error nothing changes: Load's errors, or
  // FAILED_PRECONDITION naming what differs when the checkpoint's layout is not the one served.
  absl::Status Reload();

  // P(click) of n examples: dense (n, kNumDense) already transformed (trainer::DenseFeature),
  // fids (n, kNumCategorical) as trainer::MakeFid makes them; probabilities (n).
  void Predict(const float* dense, const uint64_t* fids, int n, float* probabilities) const;
  // The same, answering logits (the trainer's evaluation scores).
  void PredictLogits(const float* dense, const uint64_t* fids, int n, float* logits) const;

  // Applies a push whole, or nothing of it: INVALID_ARGUMENT naming the field (another dim,
  // values other than rows x dim, a value not finite), FAILED_PRECONDITION for a version not
  // newer than the source's last (or the checkpoint's step). Answers the rows applied.
  absl::StatusOr<size_t> ApplyRows(const RowUpdate& update);
  // A new MLP of the served layout for version `version` (weights only, zero, to fill);
  // FAILED_PRECONDITION for a version not newer than the MLP's, INVALID_ARGUMENT for other
  // sizes than the served MLP's.
  absl::StatusOr<std::unique_ptr<trainer::Mlp>> NewDense(int64_t version,
                                                         const std::vector<int>& sizes) const;
  // Swaps `mlp` in (FAILED_PRECONDITION if a newer one came meanwhile; INVALID_ARGUMENT for
  // a weight that is not finite).
  absl::Status SwapDense(int64_t version, std::unique_ptr<trainer::Mlp> mlp);

  // For exporting the served model to another runtime (bench/serve's libtorch peer): calls
  // fn(key, embedding) for every row (dim floats), shard by shard under each shard's lock, and
  // answers the MLP being served.
  void ForEachRow(const std::function<void(uint64_t key, const float* embedding)>& fn) const;
  std::shared_ptr<const trainer::Mlp> dense() const { return mlp_.load(std::memory_order_acquire); }

  // As loaded (dir, dim, MLP sizes never change; the rest is as of the start, or the last
  // Reload where nothing else runs).
  const ModelInfo& info() const { return info_; }
  // The step of the checkpoint served (the start's, or the last Reload's).
  int64_t checkpoint_step() const { return checkpoint_step_.load(std::memory_order_acquire); }
  int64_t sparse_version() const { return sparse_version_.load(std::memory_order_acquire); }
  int64_t dense_version() const { return dense_version_.load(std::memory_order_acquire); }
  // Per source, the version last applied.
  std::map<std::string, int64_t> source_versions() const;
  size_t rows() const;
  size_t memory_bytes() const;

 private:
  // One caller's buffers: the MLP's workspace and the batch's input rows.
  struct Scratch {
    trainer::Mlp::Workspace ws;
    std::vector<float> x;        // (rows, input)
    std::vector<uint32_t> rows;  // found rows, by position
    std::vector<uint64_t> keys;  // a shard's ids
    std::vector<uint32_t> order;  // positions sorted by shard
    std::vector<uint32_t> start;  // (kShards + 1) offsets into order
  };
  struct Shard {
    mutable absl::Mutex mu;
    std::unique_ptr<trainer::EmbeddingTable> table ABSL_GUARDED_BY(mu);
  };
  static constexpr int kChunk = 256;  // examples per pass through the MLP

  Model() = default;
  static uint32_t ShardOf(uint64_t key);
  std::unique_ptr<Scratch> Acquire() const;
  void Release(std::unique_ptr<Scratch> scratch) const;
  // The embeddings of m examples' ids into s.x.
  void Gather(const uint64_t* fids, int m, Scratch& s) const;

  ModelInfo info_;
  Shard shards_[kShards];
  std::atomic<std::shared_ptr<const trainer::Mlp>> mlp_;
  int input_ = 0;
  std::atomic<int64_t> sparse_version_{0}, dense_version_{0}, checkpoint_step_{0};

  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<Scratch>> free_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex sync_mu_;  // serialises pushes of rows, and of dense swaps
  std::map<std::string, int64_t> sources_ ABSL_GUARDED_BY(sync_mu_);
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_MODEL_H_
