#include "trainer/cuda/gpu_embedding_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer::cuda {
namespace {

constexpr uint32_t kNoRow = GpuEmbeddingTable::kNoRow;
constexpr uint64_t kEmptyKey = GpuEmbeddingTable::kEmptyKey;
// A slot's row until its inserter publishes one (a byte pattern, so memset can fill it).
constexpr uint32_t kPending = 0xFEFEFEFEu;
constexpr int kThreads = 256;

unsigned Blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// The CPU table's generators (embedding_table.cc), so that a row starts with the same values.
__device__ __forceinline__ uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ size_t Home(uint64_t key, size_t capacity) {
  key ^= key >> 33;
  key *= 0xFF51AFD7ED558CCDull;
  key ^= key >> 33;
  key *= 0xC4CEB9FE1A85EC53ull;
  key ^= key >> 33;
  return size_t(((key >> 32) * uint64_t(capacity)) >> 32);
}

struct TableView {
  uint64_t* keys;         // device, (capacity)
  uint32_t* slot_rows;    // device, (capacity)
  float* values;          // device, (max_rows, row_floats)
  uint32_t* last_update;  // device, (max_rows)
  uint32_t* counters;     // device, (2)
  size_t capacity;
  size_t max_rows;
  int dim;
  int row_floats;
  float init_stddev;
  uint64_t seed;
  float initial_state;
};

__device__ void InitRow(const TableView& t, uint64_t key, uint32_t row) {
  float* emb = t.values + size_t(row) * t.row_floats;
  const uint64_t base = SplitMix(t.seed ^ SplitMix(key));
  for (int d = 0; d < t.dim; d += 2) {
    const uint64_t r = SplitMix(base + uint64_t(d));
    const float u1 = (float(r & 0xFFFFFF) + 0.5f) * (1.0f / 16777216.0f);
    const float angle = float(r >> 40) * (6.2831853f / 16777216.0f);
    const float radius = sqrtf(-2.0f * logf(u1)) * t.init_stddev;
    emb[d] = radius * cosf(angle);
    if (d + 1 < t.dim) emb[d + 1] = radius * sinf(angle);
  }
  for (int s = t.dim; s < t.row_floats; ++s) emb[s] = t.initial_state;
}

__global__ void FindOrInsertKernel(TableView t, const uint64_t* keys, size_t n, uint32_t now,
                                   uint32_t* rows) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const uint64_t key = keys[k];
  uint32_t result = kNoRow;
  if (key != kEmptyKey) {
    size_t i = Home(key, t.capacity);
    for (size_t probes = 0; probes < t.capacity; ++probes) {
      const unsigned long long prev =
          atomicCAS(reinterpret_cast<unsigned long long*>(&t.keys[i]),
                    static_cast<unsigned long long>(kEmptyKey), static_cast<unsigned long long>(key));
      if (prev == kEmptyKey) {
        // This thread inserted the id: take a row, initialise it, then publish it.
        uint32_t row = atomicAdd(&t.counters[0], 1u);
        if (row >= t.max_rows) {
          row = kNoRow;
        } else {
          InitRow(t, key, row);
          t.last_update[row] = now;
        }
        __threadfence();
        atomicExch(&t.slot_rows[i], row);
        result = row;
        break;
      }
      if (prev == key) {
        // Inserted by another thread (perhaps in this very launch): wait for its row.
        const volatile uint32_t* published = &t.slot_rows[i];
        uint32_t row;
        while ((row = *published) == kPending) {
        }
        __threadfence();
        result = row;
        break;
      }
      i = i + 1 == t.capacity ? 0 : i + 1;
    }
  }
  rows[k] = result;
}

__global__ void FindKernel(TableView t, const uint64_t* keys, size_t n, uint32_t* rows) {
  const size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const uint64_t key = keys[k];
  uint32_t result = kNoRow;
  if (key != kEmptyKey) {
    size_t i = Home(key, t.capacity);
    for (size_t probes = 0; probes < t.capacity; ++probes) {
      const uint64_t here = t.keys[i];
      if (here == key) {
        const uint32_t row = t.slot_rows[i];
        result = row == kPending ? kNoRow : row;
        break;
      }
      if (here == kEmptyKey) break;
      i = i + 1 == t.capacity ? 0 : i + 1;
    }
  }
  rows[k] = result;
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
    const uint32_t u = atomicAdd(&counters[1], 1u);
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
  if (u >= counters[1]) return;
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
  auto counters = DeviceBuffer<uint32_t>::Filled(2, 0, stream);
  if (!counters.ok()) return counters.status();
  t->counters_ = *std::move(counters);
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
              capacity_,
              max_rows_,
              dim_,
              dim_ + state_floats_,
              options_.init_stddev,
              options_.seed,
              options_.optimizer.initial_accumulator};
  FindOrInsertKernel<<<Blocks(n), kThreads, 0, stream_>>>(t, keys, n, now, rows);
  EVOSCALE_CUDA_RETURN_IF_LAUNCH_FAILED();
  return absl::OkStatus();
}

absl::Status GpuEmbeddingTable::Find(const uint64_t* keys, size_t n, uint32_t* rows) const {
  if (n == 0) return absl::OkStatus();
  TableView t{keys_.data(), slot_rows_.data(), nullptr, nullptr, nullptr, capacity_,
              max_rows_,    dim_,              0,       0.0f,    0,       0.0f};
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
  if (local_.size() >= n) return absl::OkStatus();
  auto local = DeviceBuffer<uint32_t>::Create(n, stream_);
  if (!local.ok()) return local.status();
  auto unique_rows = DeviceBuffer<uint32_t>::Create(n, stream_);
  if (!unique_rows.ok()) return unique_rows.status();
  auto unique_grads = DeviceBuffer<float>::Create(n * dim_, stream_);
  if (!unique_grads.ok()) return unique_grads.status();
  local_ = *std::move(local);
  unique_rows_ = *std::move(unique_rows);
  unique_grads_ = *std::move(unique_grads);
  return absl::OkStatus();
}

absl::Status GpuEmbeddingTable::ApplyGradients(const uint32_t* rows, size_t n, RowLayout layout,
                                               const float* grads, uint32_t now) {
  if (n == 0) return absl::OkStatus();
  if (layout.stride == 0) layout.stride = dim_ * layout.group;
  absl::Status status = EnsureScratch(n);
  if (!status.ok()) return status;
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(counters_.data() + 1, 0, sizeof(uint32_t), stream_));
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
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&handed_out, counters_.data(), sizeof(uint32_t),
                                                cudaMemcpyDeviceToHost, stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return std::min<size_t>(handed_out, max_rows_);
}

size_t GpuEmbeddingTable::memory_bytes() const {
  return keys_.bytes() + slot_rows_.bytes() + values_.bytes() + last_update_.bytes() +
         owner_.bytes() + counters_.bytes() + local_.bytes() + unique_rows_.bytes() +
         unique_grads_.bytes();
}

}  // namespace evoscale::trainer::cuda
