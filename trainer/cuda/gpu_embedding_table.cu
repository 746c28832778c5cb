#include "trainer/cuda/gpu_embedding_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer::cuda {
namespace {

constexpr uint32_t kNoRow = probe::kNoRow;
constexpr uint32_t kPending = probe::kPending;
constexpr int kThreads = 256;

unsigned Blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// The CPU table's generators (embedding_table.cc), so that a row starts with the same values.
__device__ __forceinline__ uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The table as a launch sees it, with the memory operations table_probe.h's probe runs on.
struct TableView {
  uint64_t* keys;                       // device, (slots)
  uint32_t* slot_rows;                  // device, (slots)
  float* values;                        // device, (rows, row_floats)
  uint32_t* last_update;                // device, (rows)
  uint32_t* counters;                   // device, (probe::kNumCounters)
  unsigned long long* full_rejections;  // device, (1)
  size_t slots;   // index capacity
  uint32_t rows;  // max_rows, below kPending
  int dim;
  int row_floats;
  float init_stddev;
  uint64_t seed;
  float initial_state;
  uint32_t now;  // the last update of rows this launch inserts

  __device__ size_t capacity() const { return slots; }
  __device__ uint32_t max_rows() const { return rows; }
  // Volatile: another thread may claim the slot while this one waits on it.
  __device__ uint64_t LoadKey(size_t slot) const {
    return *static_cast<const volatile uint64_t*>(&keys[slot]);
  }
  __device__ uint64_t CasKey(size_t slot, uint64_t expected, uint64_t desired) const {
    return atomicCAS(reinterpret_cast<unsigned long long*>(&keys[slot]),
                     static_cast<unsigned long long>(expected),
                     static_cast<unsigned long long>(desired));
  }
  __device__ uint32_t LoadRow(size_t slot) const {
    const uint32_t row = *static_cast<const volatile uint32_t*>(&slot_rows[slot]);
    __threadfence();  // pairs with PublishRow's: once the row is seen, so are its values
    return row;
  }
  __device__ void PublishRow(size_t slot, uint32_t row) const {
    __threadfence();  // the row's values before its number
    atomicExch(&slot_rows[slot], row);
  }
  // The fences order a row's count after its slot's claim (AddCounter) and a claim's reading
  // after the count's (LoadCounter): a probe that sees every row counted sees every claim.
  __device__ uint32_t LoadCounter(int c) const {
    const uint32_t value = *static_cast<const volatile uint32_t*>(&counters[c]);
    __threadfence();
    return value;
  }
  __device__ uint32_t CasCounter(int c, uint32_t expected, uint32_t desired) const {
    return atomicCAS(&counters[c], expected, desired);
  }
  __device__ uint32_t AddCounter(int c, uint32_t delta) const {
    __threadfence();
    return atomicAdd(&counters[c], delta);
  }
  __device__ void InitRow(uint64_t key, uint32_t row) const {
    float* emb = values + size_t(row) * row_floats;
    const uint64_t base = SplitMix(seed ^ SplitMix(key));
    for (int d = 0; d < dim; d += 2) {
      const uint64_t r = SplitMix(base + uint64_t(d));
      const float u1 = (float(r & 0xFFFFFF) + 0.5f) * (1.0f / 16777216.0f);
      const float angle = float(r >> 40) * (6.2831853f / 16777216.0f);
      const float radius = sqrtf(-2.0f * logf(u1)) * init_stddev;
      emb[d] = radius * cosf(angle);
      if (d + 1 < dim) emb[d + 1] = radius * sinf(angle);
    }
    for (int s = dim; s < row_floats; ++s) emb[s] = initial_state;
    last_update[row] = now;
  }
  __device__ void CountFullRejection() const { atomicAdd(full_rejections, 1ull); }
};

__global__ void FindOrInsertKernel(TableView t, const uint64_t* keys, size_t n, uint32_t* rows) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  rows[k] = probe::FindOrInsertKey(t, keys[k]).row;
}

__global__ void FindKernel(TableView t, const uint64_t* keys, size_t n, uint32_t* rows) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  rows[k] = probe::FindKey(t, keys[k]);
}

__device__ __forceinline__ size_t Place(RowLayout layout, int dim, size_t k) {
  return (k / layout.group) * size_t(layout.stride) + (k % layout.group) * size_t(dim);
}

__global__ void GatherKernel(const float* values, int row_floats, int dim, const uint32_t* rows,
                             size_t n, RowLayout layout, float* out) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t k = e / dim;
  const int d = int(e % dim);
  const uint32_t row = rows[k];
  out[Place(layout, dim, k) + d] = row == kNoRow ? 0.0f : values[size_t(row) * row_floats + d];
}

// Deduplication: the first batch position of each row becomes its owner...
__global__ void ClaimKernel(const uint32_t* rows, size_t n, uint32_t* owner) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n || rows[k] == kNoRow) return;
  atomicMin(&owner[rows[k]], uint32_t(k));
}

// ...owners take a unique index...
__global__ void CompactKernel(const uint32_t* rows, size_t n, const uint32_t* owner,
                              uint32_t* counters, uint32_t* unique_rows, uint32_t* local) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const uint32_t row = rows[k];
  if (row == kNoRow) {
    local[k] = kNoRow;
  } else if (owner[row] == uint32_t(k)) {
    const uint32_t u = atomicAdd(&counters[probe::kBatchUniques], 1u);
    unique_rows[u] = row;
    local[k] = u;
  }
}

// ...and every other position copies its owner's.
__global__ void ShareKernel(const uint32_t* rows, size_t n, const uint32_t* owner,
                            uint32_t* local) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const uint32_t row = rows[k];
  if (row != kNoRow && owner[row] != uint32_t(k)) local[k] = local[owner[row]];
}

__global__ void AccumulateKernel(const uint32_t* local, size_t n, int dim, RowLayout layout,
                                 const float* grads, float* unique_grads) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t k = e / dim;
  const int d = int(e % dim);
  const uint32_t u = local[k];
  if (u == kNoRow) return;
  atomicAdd(&unique_grads[size_t(u) * dim + d], grads[Place(layout, dim, k) + d]);
}

__global__ void UpdateKernel(float* values, int row_floats, int dim, uint32_t* last_update,
                             uint32_t* owner, const uint32_t* counters,
                             const uint32_t* unique_rows, const float* unique_grads, size_t n,
                             bool adagrad, float lr, float eps, uint32_t now) {
  const size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * dim) return;
  const size_t u = e / dim;
  if (u >= counters[probe::kBatchUniques]) return;
  const int d = int(e % dim);
  const uint32_t row = unique_rows[u];
  const float g = unique_grads[e];
  float* w = values + size_t(row) * row_floats;
  if (adagrad) {
    const float acc = w[dim + d] + g * g;
    w[dim + d] = acc;
    w[d] -= lr * g / (sqrtf(acc) + eps);
  } else {
    w[d] -= lr * g;
  }
  if (d == 0) {
    owner[row] = kNoRow;
    last_update[row] = now;
  }
}

}  // namespace

GpuEmbeddingTable::GpuEmbeddingTable(const GpuEmbeddingTableOptions& options,
                                     cudaStream_t stream)
    : options_(options),
      dim_(options.dim),
      state_floats_(options.optimizer.kind == SparseOptimizerKind::kAdagrad ? options.dim : 0),
      max_rows_(options.max_rows),
      capacity_(options.capacity > 0 ? options.capacity : 2 * options.max_rows),
      stream_(stream) {}

absl::StatusOr<std::unique_ptr<GpuEmbeddingTable>> GpuEmbeddingTable::Create(
    const GpuEmbeddingTableOptions& options, cudaStream_t stream) {
  if (options.dim <= 0 || options.dim > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU embedding dim ", options.dim, " outside [1, 4096]"));
  }
  if (options.max_rows == 0 || options.max_rows >= kPending) {
    return absl::InvalidArgumentError(absl::StrCat("GPU table max_rows ", options.max_rows));
  }
  if (options.capacity != 0 && options.capacity <= options.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat("GPU table capacity ", options.capacity,
                                                   " must exceed max_rows ", options.max_rows));
  }
  if (options.optimizer.kind != SparseOptimizerKind::kSgd &&
      options.optimizer.kind != SparseOptimizerKind::kAdagrad) {
    return absl::UnimplementedError(
        absl::StrCat("GPU embedding table: sparse optimizer ",
                     options.optimizer.kind == SparseOptimizerKind::kFtrl ? "ftrl" : "adam",
                     " is not implemented on CUDA (use sgd or adagrad, or --device cpu)"));
  }
  std::unique_ptr<GpuEmbeddingTable> t(new GpuEmbeddingTable(options, stream));
  const size_t row_floats = size_t(t->dim_ + t->state_floats_);
  auto keys = DeviceBuffer<uint64_t>::Filled(t->capacity_, 0xFF, stream);
  if (!keys.ok()) return keys.status();
  t->keys_ = *std::move(keys);
  // Every slot's row starts pending: a thread that finds its id claimed waits for the row.
  auto slot_rows = DeviceBuffer<uint32_t>::Filled(t->capacity_, 0xFE, stream);
  if (!slot_rows.ok()) return slot_rows.status();
  t->slot_rows_ = *std::move(slot_rows);
  auto values = DeviceBuffer<float>::Create(t->max_rows_ * row_floats, stream);
  if (!values.ok()) return values.status();
  t->values_ = *std::move(values);
  auto last_update = DeviceBuffer<uint32_t>::Filled(t->max_rows_, 0, stream);
  if (!last_update.ok()) return last_update.status();
  t->last_update_ = *std::move(last_update);
  auto owner = DeviceBuffer<uint32_t>::Filled(t->max_rows_, 0xFF, stream);
  if (!owner.ok()) return owner.status();
  t->owner_ = *std::move(owner);
  auto counters = DeviceBuffer<uint32_t>::Filled(probe::kNumCounters, 0, stream);
  if (!counters.ok()) return counters.status();
  t->counters_ = *std::move(counters);
  auto full_rejections = DeviceBuffer<unsigned long long>::Filled(1, 0, stream);
  if (!full_rejections.ok()) return full_rejections.status();
  t->full_rejections_ = *std::move(full_rejections);
  return t;
}

absl::Status GpuEmbeddingTable::FindOrInsert(const uint64_t* keys, size_t n, uint32_t now,
                                             uint32_t* rows) {
  if (n == 0) return absl::OkStatus();
  TableView t{keys_.data(),
              slot_rows_.data(),
              values_.data(),
              last_update_.data(),
              counters_.data(),
              full_rejections_.data(),
              capacity_,
              uint32_t(max_rows_),
              dim_,
              dim_ + state_floats_,
              options_.init_stddev,
              options_.seed,
              options_.optimizer.initial_accumulator,
              now};
  FindOrInsertKernel<<<Blocks(n), kThreads, 0, stream_>>>(t, keys, n, rows);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status GpuEmbeddingTable::Find(const uint64_t* keys, size_t n, uint32_t* rows) const {
  if (n == 0) return absl::OkStatus();
  // Reads keys and slot rows only.
  TableView t{keys_.data(), slot_rows_.data(), nullptr, nullptr, nullptr, nullptr, capacity_,
              uint32_t(max_rows_)};
  FindKernel<<<Blocks(n), kThreads, 0, stream_>>>(t, keys, n, rows);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status GpuEmbeddingTable::Gather(const uint32_t* rows, size_t n, RowLayout layout,
                                       float* out) const {
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim_ * layout.group;
  GatherKernel<<<Blocks(n * dim_), kThreads, 0, stream_>>>(values_.data(), dim_ + state_floats_,
                                                            dim_, rows, n, layout, out);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status GpuEmbeddingTable::EnsureScratch(size_t n) {
  for (absl::Status status : {DeviceBuffer<uint32_t>::Reserve(&local_, n, stream_),
                              DeviceBuffer<uint32_t>::Reserve(&unique_rows_, n, stream_),
                              DeviceBuffer<float>::Reserve(&unique_grads_, n * dim_, stream_)}) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status GpuEmbeddingTable::ApplyGradients(const uint32_t* rows, size_t n, RowLayout layout,
                                               const float* grads, uint32_t now) {
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim_ * layout.group;
  absl::Status status = EnsureScratch(n);
  if (!status.ok()) return status;
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(counters_.data() + probe::kBatchUniques, 0, sizeof(uint32_t), stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(unique_grads_.data(), 0, n * dim_ * sizeof(float), stream_));
  ClaimKernel<<<Blocks(n), kThreads, 0, stream_>>>(rows, n, owner_.data());
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  CompactKernel<<<Blocks(n), kThreads, 0, stream_>>>(rows, n, owner_.data(), counters_.data(),
                                                      unique_rows_.data(), local_.data());
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  ShareKernel<<<Blocks(n), kThreads, 0, stream_>>>(rows, n, owner_.data(), local_.data());
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  AccumulateKernel<<<Blocks(n * dim_), kThreads, 0, stream_>>>(local_.data(), n, dim_, layout,
                                                                grads, unique_grads_.data());
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  const bool adagrad = options_.optimizer.kind == SparseOptimizerKind::kAdagrad;
  UpdateKernel<<<Blocks(n * dim_), kThreads, 0, stream_>>>(
      values_.data(), dim_ + state_floats_, dim_, last_update_.data(), owner_.data(),
      counters_.data(), unique_rows_.data(), unique_grads_.data(), n, adagrad,
      options_.optimizer.lr, options_.optimizer.eps, now);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::StatusOr<size_t> GpuEmbeddingTable::Size() const {
  uint32_t handed_out = 0;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&handed_out,
                                                counters_.data() + probe::kRowsHandedOut,
                                                sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                                stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return size_t{handed_out};  // never above max_rows: a row is handed out only with a permit
}

absl::StatusOr<uint64_t> GpuEmbeddingTable::FullRejections() const {
  unsigned long long rejections = 0;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&rejections, full_rejections_.data(),
                                                sizeof(rejections), cudaMemcpyDeviceToHost,
                                                stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return uint64_t{rejections};
}

size_t GpuEmbeddingTable::memory_bytes() const {
  return keys_.bytes() + slot_rows_.bytes() + values_.bytes() + last_update_.bytes() +
         owner_.bytes() + counters_.bytes() + full_rejections_.bytes() + local_.bytes() +
         unique_rows_.bytes() + unique_grads_.bytes();
}

}  // namespace evoscale::trainer::cuda
