// The embedding table on a GPU: the same contract as EmbeddingTable (collisionless: one row per
// distinct 64-bit id, rows initialised from (seed, id) exactly as the CPU table does) with
// batched device-side calls.
//
// Open addressing with linear probing in device memory: keys (capacity), each claimed slot
// pointing at a row of a fixed arena (max_rows, dim + state) handed out by an atomic counter. The
// probe (table_probe.h) reads a slot before it CASes one, and claims a slot only with a row for
// it, so the index never holds more than max_rows ids. It does not grow: capacity is fixed at
// creation (2x max_rows by default), so probes stay short. Once max_rows rows exist, new ids get
// kNoRow (zeros in, no update) and claim nothing, each counted as a full rejection, as the CPU
// table answers a full arena.
//
// Sparse optimizers: SGD and Adagrad (the row keeps Adagrad's accumulator after the embedding,
// as on the CPU); ApplyGradients sums the gradients of repeated ids first, so a row is updated
// once per batch with its summed gradient, as SparseOptimizer::Apply on the CPU.
//
// Every call is asynchronous on the stream given to Create, which all calls use; pointers marked
// "device" must be device memory. Not thread-safe.
#ifndef EVOSCALE_TRAINER_CUDA_GPU_EMBEDDING_TABLE_H_
#define EVOSCALE_TRAINER_CUDA_GPU_EMBEDDING_TABLE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/cuda/device_buffer.h"
#include "trainer/cuda/table_probe.h"
#include "trainer/sparse_optimizer.h"

namespace evoscale::trainer::cuda {

struct GpuEmbeddingTableOptions {
  int dim = 16;
  float init_stddev = 0.01f;  // rows start N(0, init_stddev^2), the CPU table's kNormal init
  uint64_t seed = 0;
  size_t max_rows = size_t{1} << 20;
  size_t capacity = 0;  // index slots; 0: 2 * max_rows
  SparseOptimizerConfig optimizer;  // kSgd or kAdagrad
};

// Where the ids of a batch sit in a row-major matrix: id k belongs to example k / group and
// fills columns [(k % group) * dim, +dim) of that example's row of `stride` floats. (group 1,
// stride dim: a plain (n, dim) matrix.)
struct RowLayout {
  int group = 1;
  int stride = 0;
};

class GpuEmbeddingTable {
 public:
  static constexpr uint32_t kNoRow = probe::kNoRow;
  // The id reserved as the empty-slot marker (no FID has its top bit set, feature_id.h).
  static constexpr uint64_t kEmptyKey = probe::kEmptyKey;

  // INVALID_ARGUMENT for a bad dim or size, UNIMPLEMENTED for FTRL/Adam, RESOURCE_EXHAUSTED if
  // device memory runs out. `stream` must outlive the table.
  static absl::StatusOr<std::unique_ptr<GpuEmbeddingTable>> Create(
      const GpuEmbeddingTableOptions& options, cudaStream_t stream);

  // rows[i] = the row of keys[i], inserting initialised rows for new ids (last update = now);
  // kNoRow when keys[i] == kEmptyKey, or for a new id when the arena is full (no slot claimed;
  // counted in FullRejections). Repeats of an id in one call get the same row. keys, rows:
  // device, (n).
  absl::Status FindOrInsert(const uint64_t* keys, size_t n, uint32_t now, uint32_t* rows);
  // The same without inserting: kNoRow on a miss.
  absl::Status Find(const uint64_t* keys, size_t n, uint32_t* rows) const;
  // Copies the embeddings of rows (device, (n)) into out (device, laid out as `layout`); zeros
  // for kNoRow.
  absl::Status Gather(const uint32_t* rows, size_t n, RowLayout layout, float* out) const;
  // One optimizer step: the gradient of rows[k] is grads at k's place in `layout` (device);
  // repeated rows are summed first. Marks the rows updated at `now`. rows: device, (n).
  absl::Status ApplyGradients(const uint32_t* rows, size_t n, RowLayout layout,
                              const float* grads, uint32_t now);

  // Rows in use (a device-to-host copy; synchronises the stream).
  absl::StatusOr<size_t> Size() const;
  // New ids answered kNoRow because the arena was full, one per occurrence, as the CPU table's
  // full_rejections() (a device-to-host copy; synchronises the stream).
  absl::StatusOr<uint64_t> FullRejections() const;
  int dim() const { return dim_; }
  int state_floats() const { return state_floats_; }
  // Device bytes held (index, arena, update scratch).
  size_t memory_bytes() const;

 private:
  GpuEmbeddingTable(const GpuEmbeddingTableOptions& options, cudaStream_t stream);
  absl::Status EnsureScratch(size_t n);

  // Constant after construction.
  const GpuEmbeddingTableOptions options_;
  const int dim_;
  const int state_floats_;
  const size_t max_rows_;
  const size_t capacity_;
  const cudaStream_t stream_;

  DeviceBuffer<uint64_t> keys_;          // device, (capacity): kEmptyKey or the slot's id
  DeviceBuffer<uint32_t> slot_rows_;     // device, (capacity): row, or kPending until published
  DeviceBuffer<float> values_;           // device, (max_rows, dim + state_floats)
  DeviceBuffer<uint32_t> last_update_;   // device, (max_rows)
  DeviceBuffer<uint32_t> owner_;         // device, (max_rows): first batch position, or kNoRow
  DeviceBuffer<uint32_t> counters_;      // device, (probe::kNumCounters), probe::TableCounter
  DeviceBuffer<unsigned long long> full_rejections_;  // device, (1)
  // Update scratch, grown to the largest batch seen.
  DeviceBuffer<uint32_t> local_;         // device, (n): batch position -> unique index
  DeviceBuffer<uint32_t> unique_rows_;   // device, (n)
  DeviceBuffer<float> unique_grads_;     // device, (n, dim)
};

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_GPU_EMBEDDING_TABLE_H_
