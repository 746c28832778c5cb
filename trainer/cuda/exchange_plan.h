// What a rank of a GPU job sends where in one step, decided on the host: the batch's ids grouped
// by the rank that owns them (the reader's shards are the job's ranks, ShardOfFid), and the batch
// position of each, where its row goes back into the MLP input and where its gradient comes
// from. No CUDA here, so it is tested in every build (gpu_logic_test).
#ifndef EVOSCALE_TRAINER_CUDA_EXCHANGE_PLAN_H_
#define EVOSCALE_TRAINER_CUDA_EXCHANGE_PLAN_H_

#include <cstdint>
#include <vector>

#include "trainer/criteo_reader.h"

namespace evoscale::trainer::cuda {

struct ExchangePlan {
  std::vector<uint64_t> send_keys;   // the ids, rank 0's first, each rank's in batch order
  std::vector<uint32_t> positions;   // send_keys[j] is the id at batch position positions[j]
  std::vector<int64_t> send_counts;  // per rank: how many of send_keys it owns
};

// The plan of `batch` (nullptr: a rank without a batch, which sends nothing) in a job of `ranks`,
// read with num_shards == ranks.
inline void PlanExchange(const ExampleBatch* batch, int ranks, ExchangePlan* plan) {
  plan->send_keys.clear();
  plan->positions.clear();
  plan->send_counts.assign(size_t(ranks), 0);
  if (batch == nullptr) return;
  for (int r = 0; r < ranks; ++r) {
    for (uint32_t p : batch->shard_positions[size_t(r)]) {
      plan->send_keys.push_back(batch->fids[p]);
      plan->positions.push_back(p);
    }
    plan->send_counts[size_t(r)] = int64_t(batch->shard_positions[size_t(r)].size());
  }
}

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_EXCHANGE_PLAN_H_
