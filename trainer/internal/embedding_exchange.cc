#include "trainer/internal/embedding_exchange.h"

#include <cstring>

namespace evoscale::trainer::internal {

EmbeddingExchange::EmbeddingExchange(Collectives* job, int local_shards, InputLayout layout)
    : job_(job), local_shards_(local_shards), layout_(layout), index_(size_t(local_shards)) {}

std::vector<int64_t> EmbeddingExchange::RowCounts(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> floats = ids;
  for (int64_t& n : floats) n *= layout_.dim;
  return floats;
}

absl::Status EmbeddingExchange::SendIds(const ExampleBatch* batch) {
  batch_ = batch;
  const int ranks = job_->size(), shards = local_shards_;
  send_ids_.clear();
  send_counts_.assign(ranks, 0);
  shard_send_.assign(size_t(ranks) * shards, 0);
  if (batch != nullptr) {
    for (int g = 0; g < ranks * shards; ++g) {
      const std::vector<uint64_t>& ids = batch->shard_keys[g];
      send_ids_.insert(send_ids_.end(), ids.begin(), ids.end());
      shard_send_[g] = int64_t(ids.size());
      send_counts_[g / shards] += shard_send_[g];
    }
  }
  // How many ids each shard gets from each rank, then the ids.
  const std::vector<int64_t> per_rank(ranks, shards);
  absl::Status status = AllToAllVOf(*job_, shard_send_, per_rank, &shard_recv_, per_rank);
  if (!status.ok()) return status;
  recv_counts_.assign(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    for (int l = 0; l < shards; ++l) recv_counts_[r] += shard_recv_[size_t(r) * shards + l];
  }
  status = AllToAllVOf(*job_, send_ids_, send_counts_, &recv_ids_, recv_counts_);
  if (!status.ok()) return status;
  for (auto& index : index_) index.clear();
  uint32_t offset = 0;
  for (int r = 0; r < ranks; ++r) {
    for (int l = 0; l < shards; ++l) {
      const int64_t c = shard_recv_[size_t(r) * shards + l];
      for (int64_t i = 0; i < c; ++i) index_[l].push_back(offset++);
    }
  }
  rows_out_.resize(recv_ids_.size() * size_t(layout_.dim));
  return absl::OkStatus();
}

EmbeddingExchange::Asked EmbeddingExchange::AskedOf(int shard) {
  Asked asked;
  asked.index_ = index_[shard].data();
  asked.size_ = index_[shard].size();
  asked.ids_ = recv_ids_.data();
  asked.rows_ = rows_out_.data();
  asked.gradients_ = gradients_in_.data();
  asked.dim_ = layout_.dim;
  return asked;
}

absl::Status EmbeddingExchange::ReturnRows(float* input) {
  absl::Status status =
      AllToAllVOf(*job_, rows_out_, RowCounts(recv_counts_), &rows_in_, RowCounts(send_counts_));
  if (!status.ok() || batch_ == nullptr) return status;
  // One row per distinct id of a shard (send_ids_' order), into every position holding it.
  const ExampleBatch& batch = *batch_;
  const size_t dim = size_t(layout_.dim), row_bytes = sizeof(float) * dim;
  size_t first = 0;  // the shard's first row in rows_in_
  for (size_t g = 0; g < batch.shard_positions.size(); ++g) {
    const std::vector<uint32_t>& positions = batch.shard_positions[g];
    const std::vector<uint32_t>& slots = batch.shard_slots[g];
    for (size_t k = 0; k < positions.size(); ++k) {
      std::memcpy(input + layout_.Offset(positions[k]), &rows_in_[(first + slots[k]) * dim],
                  row_bytes);
    }
    first += batch.shard_keys[g].size();
  }
  return absl::OkStatus();
}

absl::Status EmbeddingExchange::SendGradients(const float* input_gradient) {
  const size_t dim = size_t(layout_.dim);
  gradients_out_.assign(send_ids_.size() * dim, 0.0f);
  if (batch_ != nullptr) {
    // Each distinct id's gradient: the sum over the positions that hold it.
    const ExampleBatch& batch = *batch_;
    size_t first = 0;
    for (size_t g = 0; g < batch.shard_positions.size(); ++g) {
      const std::vector<uint32_t>& positions = batch.shard_positions[g];
      const std::vector<uint32_t>& slots = batch.shard_slots[g];
      for (size_t k = 0; k < positions.size(); ++k) {
        float* row = &gradients_out_[(first + slots[k]) * dim];
        const float* x = input_gradient + layout_.Offset(positions[k]);
        for (size_t d = 0; d < dim; ++d) row[d] += x[d];
      }
      first += batch.shard_keys[g].size();
    }
  }
  return AllToAllVOf(*job_, gradients_out_, RowCounts(send_counts_), &gradients_in_,
                     RowCounts(recv_counts_));
}

}  // namespace evoscale::trainer::internal
