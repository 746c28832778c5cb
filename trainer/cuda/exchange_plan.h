// What a rank of a GPU job sends where in one step, decided on the host: the batch's distinct
// ids grouped by the rank that owns them (the reader's shards are the job's ranks, ShardOfFid),
// and for every id of the batch its position, where its row goes back into the MLP input and
// where its gradient comes from, and which sent id it is. No CUDA here, so it is tested in
// every build (gpu_logic_test).
#ifndef EVOSCALE_TRAINER_CUDA_EXCHANGE_PLAN_H_
#define EVOSCALE_TRAINER_CUDA_EXCHANGE_PLAN_H_

#include <cstdint>
#include <vector>

#include "trainer/criteo_reader.h"

namespace evoscale::trainer::cuda {

struct ExchangePlan {
  // The batch's distinct ids, rank 0's first, each rank's in order of first position: each
  // goes to its owner once.
  std::vector<uint64_t> send_keys;
  // Every id of the batch, grouped by owner: it sits at batch position positions[j], and its
  // row is send_keys[rows[j]] (where the owner's answer lands, and its gradient is summed).
  std::vector<uint32_t> positions;
  std::vector<uint32_t> rows;
  std::vector<int64_t> send_counts;  // per rank: how many of send_keys it owns
};

// The plan of `batch` (nullptr: a rank without a batch, which sends nothing) in a job of `ranks`,
// read with num_shards == ranks and dedupe (ExampleBatch::shard_keys, shard_slots).
inline void PlanExchange(const ExampleBatch* batch, int ranks, ExchangePlan* plan) {
  plan->send_keys.clear();
  plan->positions.clear();
  plan->rows.clear();
  plan->send_counts.assign(size_t(ranks), 0);
  if (batch == nullptr) return;
  for (int r = 0; r < ranks; ++r) {
    const uint32_t first = uint32_t(plan->send_keys.size());
    const std::vector<uint64_t>& keys = batch->shard_keys[size_t(r)];
    plan->send_keys.insert(plan->send_keys.end(), keys.begin(), keys.end());
    const std::vector<uint32_t>& positions = batch->shard_positions[size_t(r)];
    plan->positions.insert(plan->positions.end(), positions.begin(), positions.end());
    for (uint32_t slot : batch->shard_slots[size_t(r)]) plan->rows.push_back(first + slot);
    plan->send_counts[size_t(r)] = int64_t(keys.size());
  }
}

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_EXCHANGE_PLAN_H_
