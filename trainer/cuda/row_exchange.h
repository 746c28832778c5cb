// Rows between the MLP input and the flat (distinct ids, dim) buffers a GPU job exchanges:
// after the owners answer, each received row goes to every batch position of its id in the
// input; after the backward pass, those positions' gradients are summed into the id's row.
#ifndef EVOSCALE_TRAINER_CUDA_ROW_EXCHANGE_H_
#define EVOSCALE_TRAINER_CUDA_ROW_EXCHANGE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "trainer/cuda/gpu_embedding_table.h"

namespace evoscale::trainer::cuda {

// For j < n: the dim floats of src row rows[j] go where batch position positions[j] sits in
// dst (`layout`, as GpuEmbeddingTable::Gather). src (distinct ids, dim), rows and positions
// (n), dst: device.
absl::Status ScatterRows(const float* src, const uint32_t* rows, const uint32_t* positions,
                         size_t n, int dim, RowLayout layout, float* dst, cudaStream_t stream);
// The reverse, summed: dst (m, dim) is zeroed, then row rows[j] of it gets what sits at batch
// position positions[j] of src added, for j < n.
absl::Status SumRowsAt(const float* src, RowLayout layout, const uint32_t* positions,
                       const uint32_t* rows, size_t n, int dim, size_t m, float* dst,
                       cudaStream_t stream);

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_ROW_EXCHANGE_H_
