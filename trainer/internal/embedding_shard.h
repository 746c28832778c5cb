// One shard of the CPU trainer's embedding (cpu_trainer.h): its table and the per-batch scratch
// of the worker that owns it. A step looks the batch's ids of the shard up (GatherRows, which
// notes each distinct row once), and after the backward pass sums each row's gradients and
// applies the sparse optimizer to it once (ApplyGradients); evaluation only looks up
// (FindRows). Rows are copied out to, and gradients read from, wherever the caller says: dst(k)
// and src(k) for the k-th id of `keys`.
//
// Not thread-safe: a shard is its worker's alone (different shards may be used from different
// threads at once).
#ifndef EVOSCALE_TRAINER_INTERNAL_EMBEDDING_SHARD_H_
#define EVOSCALE_TRAINER_INTERNAL_EMBEDDING_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "trainer/embedding_table.h"
#include "trainer/sparse_optimizer.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer::internal {

struct EmbeddingShard {
  // Looks up (inserting, at logical time `now`) keys[0..m) and copies id k's row, dim floats,
  // to dst(k): zeros where the id has no row (below its occurrence threshold, or the table
  // full). Remembers the batch's distinct rows for ApplyGradients.
  template <typename Dst>
  void GatherRows(size_t m, uint32_t now, Dst dst_of);
  // After GatherRows of the same keys: sums the gradient src(k) of each keys[k] into its row's
  // and applies `optimizer` once to each distinct row, marking it updated at `now`.
  template <typename Src>
  void ApplyGradients(size_t m, uint32_t now, const SparseOptimizer& optimizer, Src src_of);
  // Looks up (never inserting) keys[0..m) and copies id k's row to dst(k), zeros for an id
  // never trained (no information).
  template <typename Dst>
  void FindRows(size_t m, Dst dst_of);

  std::unique_ptr<EmbeddingTable> table;
  std::vector<uint64_t> keys;     // the batch's ids routed here, filled by the caller
  std::vector<uint32_t> local;    // their index in `uniques` (kNoRow: no row)
  std::vector<uint32_t> uniques;  // distinct rows of this batch
  std::vector<float> grads;       // (uniques, dim): summed gradients
  std::vector<uint32_t> found;    // FindRows' rows
  int64_t evicted = 0;
  absl::Status checkpoint_status;
  // Online training with --serve: the rows updated since the last push (may repeat), and the
  // ids evicted since then.
  bool track_changed = false;
  std::vector<uint32_t> changed;
  std::vector<uint64_t> erased;
};

// The table options of each of a run's `num_shards` shards: rows of config's embedding-dim
// with the state of `optimizer` (which initialises it, and must outlive the tables), config's
// occurrence thresholds, change tracking when it checkpoints, and address space for 64 GiB of
// rows over all shards (committed as rows arrive).
EmbeddingTableOptions ShardTableOptions(const TrainerConfig& config, int num_shards,
                                        const SparseOptimizer* optimizer);

template <typename Dst>
void EmbeddingShard::GatherRows(size_t m, uint32_t now, Dst dst_of) {
  local.resize(m);
  uniques.clear();
  EmbeddingTable& t = *table;
  const size_t row_bytes = sizeof(float) * size_t(t.dim());
  // Copy each row out as soon as its lookup resolves, while it is still in cache. A row's
  // scratch word holds its index in `uniques` + 1 until ApplyGradients clears it.
  t.FindOrInsertBatch(keys.data(), m, now, [&](size_t k, uint32_t row) {
    float* dst = dst_of(k);
    if (row == EmbeddingTable::kNoRow) {
      std::memset(dst, 0, row_bytes);
      local[k] = EmbeddingTable::kNoRow;
      return;
    }
    RowHeader* h = t.header(row);
    if (h->scratch == 0) {
      uniques.push_back(row);
      h->scratch = uint32_t(uniques.size());
    }
    local[k] = h->scratch - 1;
    std::memcpy(dst, t.embedding(row), row_bytes);
  });
}

template <typename Src>
void EmbeddingShard::ApplyGradients(size_t m, uint32_t now, const SparseOptimizer& optimizer,
                                    Src src_of) {
  EmbeddingTable& t = *table;
  const int dim = t.dim();
  const size_t u = uniques.size();
  grads.assign(u * dim, 0.0f);
  for (size_t k = 0; k < m; ++k) {
    const uint32_t index = local[k];
    if (index == EmbeddingTable::kNoRow) continue;
    const float* src = src_of(k);
    float* g = grads.data() + size_t(index) * dim;
    for (int d = 0; d < dim; ++d) g[d] += src[d];
  }
  for (size_t i = 0; i < u; ++i) {
    if (i + 8 < u) __builtin_prefetch(t.header(uniques[i + 8]), 1, 3);
    const uint32_t row = uniques[i];
    optimizer.Apply(t.embedding(row), t.state(row), grads.data() + i * dim, dim);
    t.MarkUpdated(row, now);
    t.header(row)->scratch = 0;
    if (track_changed) changed.push_back(row);
  }
}

template <typename Dst>
void EmbeddingShard::FindRows(size_t m, Dst dst_of) {
  const size_t row_bytes = sizeof(float) * size_t(table->dim());
  found.resize(m);
  table->FindBatch(keys.data(), m, found.data());
  for (size_t k = 0; k < m; ++k) {
    float* dst = dst_of(k);
    if (found[k] == EmbeddingTable::kNoRow) {
      std::memset(dst, 0, row_bytes);
    } else {
      std::memcpy(dst, table->embedding(found[k]), row_bytes);
    }
  }
}

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_EMBEDDING_SHARD_H_
