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
// A table larger than one replica is served sharded by id hash, as the trainer's ranks shard it:
// N shard replicas each load only the rows with trainer::ShardOfFid(id, N) == I (Placement) and
// answer lookups of them; a front loads only the MLP and gathers each call's rows from the
// shards through a RowSource (serve/shard_client.h, over EmbeddingService.Lookup).
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

// Which of the model's rows a replica holds.
struct Placement {
  int shard = 0;       // this replica's shard of the rows
  int shards = 1;      // of how many (1: the whole table)
  bool front = false;  // no rows: each call's looked up through a RowSource
};

struct LoadOptions {
  int shard = 0;
  int shards = 1;
  // The most bytes of rows and MLP to hold (0: no limit); past it, the load stops with
  // RESOURCE_EXHAUSTED naming --memory-budget and the rows held, rather than the process
  // growing until the kernel kills it.
  size_t memory_budget = 0;
};

// Where a front's rows are (serve/shard_client.h asks the shards).
class RowSource {
 public:
  virtual ~RowSource() = default;
  // The embeddings of n keys into out (n x dim floats; zeros for a key without a row). Answers
  // the oldest sparse version among the shards; UNAVAILABLE naming a shard that did not answer.
  virtual absl::StatusOr<int64_t> Lookup(const uint64_t* keys, size_t n, float* out) = 0;
};

struct ModelInfo {
  std::string dir;          // the checkpoint directory given
  int64_t step = 0;         // the checkpoint's training step
  int ranks = 1;            // processes of the job that wrote it
  int dim = 0;              // embedding width
  std::vector<int> mlp_sizes;  // input width, hidden widths, 1
  std::string optimizer;    // the sparse optimizer it was trained with (not needed to serve)
  size_t rows = 0;          // embedding rows loaded
  size_t memory_bytes = 0;  // table and MLP as held at load
  Placement placement;
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
  // A version's rows may come in parts, in order (part 0 .. parts - 1, parts 0 or 1: whole):
  // each applied as it comes, the version moved by the last.
  int part = 0;
  int parts = 1;
};

class Model {
 public:
  static constexpr int kShards = 16;

  // Loads the newest complete checkpoint in `dir`. FAILED_PRECONDITION naming what differs for
  // a checkpoint of another layout than the trainer's (an MLP input other than 26 x dim + 13, a
  // last layer other than 1, ranks that disagree on dim, MLP or step); NOT_FOUND when dir holds
  // no checkpoint; DATA_LOSS for a truncated or foreign file.
  // With options.shards > 1, only the rows of shard options.shard (INVALID_ARGUMENT for a
  // shard outside [0, shards)); RESOURCE_EXHAUSTED past options.memory_budget.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir,
                                                     const LoadOptions& options = {});
  // A front: the MLP of the newest complete checkpoint in `dir` (checked as Load checks it),
  // no rows; every call's rows come from the source `rows` makes once it is loaded (its
  // errors are LoadFront's).
  using RowSourceFactory =
      std::function<absl::StatusOr<std::unique_ptr<RowSource>>(const ModelInfo& info)>;
  static absl::StatusOr<std::unique_ptr<Model>> LoadFront(const std::string& dir,
                                                          const RowSourceFactory& rows);
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
  // fids (n, kNumCategorical) as trainer::MakeFid makes them; probabilities (n). Fails only on
  // a front whose RowSource fails (UNAVAILABLE naming the shard), and on a shard replica
  // (FAILED_PRECONDITION: it holds a part of the rows; its front answers).
  absl::Status Predict(const float* dense, const uint64_t* fids, int n,
                       float* probabilities) const;
  // The same, answering logits (the trainer's evaluation scores).
  absl::Status PredictLogits(const float* dense, const uint64_t* fids, int n,
                             float* logits) const;
  // A front's answer once its rows came back (serve/front_service.h): n examples' dense
  // features (n, kNumDense) and embeddings (n, kNumCategorical, dim: what RowSource::Lookup
  // answers for their fids) into probabilities (n); `version` the shards' oldest, which this
  // front's sparse_version() answers from now on.
  void ScoreRows(const float* dense, const float* rows, int n, int64_t version,
                 float* probabilities) const;
  // A shard's answer to its front: the embeddings of n keys (dim floats each, zeros for a key
  // without a row) into out; INVALID_ARGUMENT naming the first key of another shard.
  absl::Status Lookup(const uint64_t* keys, size_t n, float* out) const;

  // Applies a push whole, or nothing of it: INVALID_ARGUMENT naming the field (another dim,
  // values other than rows x dim, a value not finite, a key or erased id of another shard, a
  // part outside [0, parts)), FAILED_PRECONDITION for a version not newer than the source's
  // last (or the checkpoint's step), a part that does not follow the source's previous one,
  // and on a front (its rows are its shards'). A version's first part starts it (dropping
  // what is left of an unfinished one, whose parts applied stay: they are current values);
  // its last part moves the source's version. Answers the rows applied.
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
  static absl::StatusOr<std::unique_ptr<Model>> LoadImpl(const std::string& dir,
                                                         const LoadOptions& options, bool front);
  // The lock shard of a key this replica holds: spread over all kShards whichever replica
  // shard the key is in.
  uint32_t ShardOf(uint64_t key) const;
  // The embeddings of n <= kChunk x kNumCategorical keys, each to dst(position) (dim floats).
  template <typename Dst>
  void GatherRows(const uint64_t* keys, size_t n, Scratch& s, Dst dst) const;
  std::unique_ptr<Scratch> Acquire() const;
  void Release(std::unique_ptr<Scratch> scratch) const;
  // The embeddings of m examples' ids into s.x.
  void Gather(const uint64_t* fids, int m, Scratch& s) const;
  // The MLP's logits of n examples from their embeddings (as ScoreRows takes them).
  void LogitsFromRows(const float* dense, const float* rows, int n, float* logits) const;

  // ApplyRows' checks of a push that need no lock.
  absl::Status CheckRows(const RowUpdate& u) const;
  // INVALID_ARGUMENT naming field[i] for the first of n ids this replica's shard does not hold.
  absl::Status CheckHeld(const char* field, const uint64_t* ids, size_t n) const;

  ModelInfo info_;
  LoadOptions options_;
  uint32_t lock_spread_ = kShards;  // kShards x the replica shards
  std::unique_ptr<RowSource> remote_;  // a front's
  Shard shards_[kShards];
  std::atomic<std::shared_ptr<const trainer::Mlp>> mlp_;
  int input_ = 0;
  // A front's moves with its shards' answers (PredictLogits, ScoreRows: const).
  mutable std::atomic<int64_t> sparse_version_{0};
  std::atomic<int64_t> dense_version_{0}, checkpoint_step_{0};

  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<Scratch>> free_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex sync_mu_;  // serialises pushes of rows, and of dense swaps
  std::map<std::string, int64_t> sources_ ABSL_GUARDED_BY(sync_mu_);
  // Per source, the version whose parts are arriving and the part expected next.
  std::map<std::string, std::pair<int64_t, int>> partial_ ABSL_GUARDED_BY(sync_mu_);
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_MODEL_H_
