// A CPU job's exchange of embedding rows between its ranks, one batch at a time (cpu_trainer.h).
// Rank r of N owns the global shards r*L .. r*L+L-1 (L local shards a rank); the reader gives
// each batch's distinct ids per global shard (ExampleBatch::shard_keys, BatchReaderOptions::
// dedupe). Per step:
//   1. SendIds: each distinct id of this rank's batch goes to its owner once; an owner learns,
//      per local shard, the ids asked of it (Asked), rank 0's first, then rank 1's...
//   2. the owner writes each asked id's row at Asked::row(k) (looked up in its shard);
//   3. ReturnRows: the rows go back to the ranks that asked, and into their MLP input at every
//      position of the batch that holds the id;
//   4. after the backward pass, SendGradients: each sent id's gradient, the sum over the
//      positions that hold it, goes to its owner, where Asked::gradient(k) answers it.
// An id asked by several ranks is asked once by each (the owner sums their gradients).
//
// Cost per step: two AllToAllVs of counts and ids, one of rows, one of gradients (payloads in
// host memory). Not thread-safe, except that between the calls above the Asked views of
// different shards may be used from different threads at once.
#ifndef EVOSCALE_TRAINER_INTERNAL_EMBEDDING_EXCHANGE_H_
#define EVOSCALE_TRAINER_INTERNAL_EMBEDDING_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "trainer/collectives.h"
#include "trainer/criteo_reader.h"

namespace evoscale::trainer::internal {

// Where a batch's embeddings sit in the MLP's input (batch, row_floats): the id at position
// p = i * kNumCategorical + f (example i, slot f) at i * row_floats + f * dim.
struct InputLayout {
  int dim = 0;
  int row_floats = 0;  // an example's input: kNumCategorical * dim, then its dense features
  size_t Offset(uint32_t p) const {
    return size_t(p / kNumCategorical) * size_t(row_floats) + size_t(p % kNumCategorical) * dim;
  }
};

class EmbeddingExchange {
 public:
  // What the ranks asked of one local shard this step: a view into the exchange, valid until
  // its next call (gradient() after SendGradients only).
  class Asked {
   public:
    size_t size() const { return size_; }
    // The k-th id asked of the shard.
    uint64_t id(size_t k) const { return ids_[index_[k]]; }
    // Where its row goes out, dim floats.
    float* row(size_t k) const { return rows_ + size_t(index_[k]) * dim_; }
    // Its gradient from the rank that asked it, dim floats.
    const float* gradient(size_t k) const { return gradients_ + size_t(index_[k]) * dim_; }

   private:
    friend class EmbeddingExchange;
    const uint32_t* index_ = nullptr;  // into the ids received, per k
    size_t size_ = 0;
    const uint64_t* ids_ = nullptr;
    float* rows_ = nullptr;
    const float* gradients_ = nullptr;
    int dim_ = 0;
  };

  // `job` moves host payloads (PayloadMemory::kHost), is not owned and outlives this.
  EmbeddingExchange(Collectives* job, int local_shards, InputLayout layout);

  // Step 1. `batch` (null: this rank has none, but still answers the others) must stay
  // unchanged until the step's last call. Fails only when a collective does.
  absl::Status SendIds(const ExampleBatch* batch);
  Asked AskedOf(int shard);
  // Step 3: the rows written at Asked::row go back; those of this rank's ids are copied into
  // `input` (the layout's, for SendIds' batch; untouched when it had none).
  absl::Status ReturnRows(float* input);
  // Step 4: `input_gradient` (the layout's) holds the gradient of SendIds' batch's input.
  absl::Status SendGradients(const float* input_gradient);

 private:
  // Per-rank counts of ids as counts of floats (rows of dim).
  std::vector<int64_t> RowCounts(const std::vector<int64_t>& ids) const;

  // Constant after construction.
  Collectives* const job_;
  const int local_shards_;
  const InputLayout layout_;

  const ExampleBatch* batch_ = nullptr;  // SendIds'
  // Each distinct id of the batch goes out once, in global shard order (so rank r gets those
  // of its shards, in order); rows come back in the same order, gradients go out in it.
  std::vector<uint64_t> send_ids_, recv_ids_;
  std::vector<int64_t> send_counts_, recv_counts_;  // per rank, in ids
  std::vector<int64_t> shard_send_, shard_recv_;    // per (rank, local shard)
  std::vector<std::vector<uint32_t>> index_;        // per local shard: into recv_ids_
  std::vector<float> rows_out_, rows_in_, gradients_out_, gradients_in_;
};

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_EMBEDDING_EXCHANGE_H_
