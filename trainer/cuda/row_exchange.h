// Rows between the MLP input and the flat (n, dim) buffers a GPU job exchanges: after the
// owners answer, each received row goes to its batch position in the input; after the backward
// pass, each position's gradient leaves in the same order.
#ifndef EVOSCALE_TRAINER_CUDA_ROW_EXCHANGE_H_
#define EVOSCALE_TRAINER_CUDA_ROW_EXCHANGE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "trainer/cuda/gpu_embedding_table.h"

namespace evoscale::trainer::cuda {

// For j < n: the dim floats of src row j go where batch position positions[j] sits in dst
// (`layout`, as GpuEmbeddingTable::Gather). src (n, dim), positions (n), dst: device.
absl::Status ScatterRows(const float* src, const uint32_t* positions, size_t n, int dim,
                         RowLayout layout, float* dst, cudaStream_t stream);
// The reverse: row j of dst (n, dim) is what sits at batch position positions[j] of src.
absl::Status GatherRowsAt(const float* src, RowLayout layout, const uint32_t* positions, size_t n,
                          int dim, float* dst, cudaStream_t stream);

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_ROW_EXCHANGE_H_
