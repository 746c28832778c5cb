// Checkpoints of the trainer's full state, written by shards in parallel, atomically and
// incrementally (Check-N-Run style: a full snapshot, then deltas holding only the rows changed
// and the ids evicted since the previous checkpoint).
//
// Layout under the checkpoint directory, one folder per checkpoint:
//   ckpt-<step, 12 digits>/shard-<s>.rows   rows of shard s (full or delta), written by its owner
//   ckpt-<step>/dense.bin                   MLP weights and Adam moments
//   ckpt-<step>/MANIFEST                    written last: a checkpoint exists iff this does
// Every file is written to a temporary name, synced, then renamed into place. A MANIFEST names
// the chain of checkpoints to load in order (the last full one, then each delta up to itself).
#ifndef EVOSCALE_TRAINER_CHECKPOINT_H_
#define EVOSCALE_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/criteo_reader.h"
#include "trainer/embedding_table.h"

namespace evoscale::trainer {

struct CheckpointManifest {
  int64_t step = 0;
  int64_t examples = 0;     // training examples consumed up to this checkpoint
  ReaderPosition position;  // where the training stream resumes
  int shards = 0;
  int dim = 0;
  int state_floats = 0;
  std::string optimizer;  // sparse optimizer name
  std::string mlp_sizes;  // e.g. "429,256,128,1"
  bool full = false;
  std::vector<std::string> chain;  // checkpoint folder names to load, oldest first, ends with self
};

// The folder name of the checkpoint at `step`.
std::string CheckpointName(int64_t step);

// Writes shard `shard`'s rows of checkpoint `name` in dir: every live row when `full`, else the
// rows changed and keys erased since the table's last TakeChanges; plus the occurrence counts of
// ids not yet admitted. Starts the table's next change
// interval at `mark`. Safe to call for different shards (tables) from different threads.
absl::Status WriteShardCheckpoint(const std::string& dir, const std::string& name, int shard,
                                  bool full, uint32_t mark, EmbeddingTable& table);

// Writes the dense state then the MANIFEST of checkpoint manifest.chain.back(); afterwards
// removes checkpoints older than the chain's first element, or than `keep_from` when it is
// older (a rank of a job keeps its previous checkpoint until the next one is written
// everywhere, so the job always has a step every rank can resume from).
absl::Status WriteDenseAndManifest(const std::string& dir, const CheckpointManifest& manifest,
                                   int64_t adam_step, const std::vector<float>& params,
                                   const std::vector<float>& m, const std::vector<float>& v,
                                   const std::string& keep_from = "");

// The newest complete checkpoint in dir; NOT_FOUND if there is none (or dir is missing).
absl::StatusOr<CheckpointManifest> FindNewestCheckpoint(const std::string& dir);
// The complete checkpoint of `step` in dir; NOT_FOUND if there is none.
absl::StatusOr<CheckpointManifest> FindCheckpoint(const std::string& dir, int64_t step);

// Applies shard `shard`'s files along manifest.chain to `table` (rows restored, erased keys
// removed). DATA_LOSS on a truncated or foreign file.
absl::Status LoadShardCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int shard, EmbeddingTable& table);
// Resharding (a job resumed with another number of ranks or shards): applies only the rows,
// erased keys and pending counts of shard `shard` whose key `keep` accepts, adding to what the
// table already holds from other shards (their pending counts included).
absl::Status LoadShardCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int shard, EmbeddingTable& table,
                                 const std::function<bool(uint64_t key)>& keep);

// What a shard's files hold, as ReadShardCheckpoint reads them along manifest.chain, file by
// file: the keys erased, then the pending counts (pending_start first; `newest` for the chain's
// last file), then rows_start(count) and each row: its key, last update and dim + state_floats
// values (valid during the call). row answers false when it cannot keep the row
// (RESOURCE_EXHAUSTED). Any callback but row may be empty.
struct ShardRowsVisitor {
  std::function<void(uint64_t key)> erased;
  std::function<void(bool newest)> pending_start;
  std::function<void(uint64_t key, uint32_t count, bool newest)> pending;
  std::function<absl::Status(uint64_t rows)> rows_start;
  std::function<bool(uint64_t key, uint32_t last_update, const float* values)> row;
};
// DATA_LOSS on a missing, truncated or foreign file (one of another dim or optimizer state).
absl::Status ReadShardCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int shard, const ShardRowsVisitor& visit);

// Reads the dense state of manifest.chain.back(); sizes must match the given vectors.
absl::Status LoadDenseCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int64_t* adam_step, std::vector<float>& params,
                                 std::vector<float>& m, std::vector<float>& v);

// Reads only the MLP's weights of manifest.chain.back() (not its Adam moments); params' size
// must match the file's.
absl::Status LoadDenseParams(const std::string& dir, const CheckpointManifest& manifest,
                             std::vector<float>& params);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_CHECKPOINT_H_
