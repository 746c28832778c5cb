#include "trainer/internal/embedding_shard.h"

#include <algorithm>

#include "trainer/criteo_reader.h"

namespace evoscale::trainer::internal {

EmbeddingTableOptions ShardTableOptions(const TrainerConfig& config, int num_shards,
                                        const SparseOptimizer* optimizer) {
  const int dim = config.embedding_dim;
  EmbeddingTableOptions options;
  options.dim = dim;
  options.state_floats = optimizer->StateFloats(dim);
  options.init_value = config.init_stddev;
  options.seed = config.seed;
  options.initial_capacity = 1 << 14;
  options.max_rows = std::max<size_t>(
      size_t{1} << 16, (size_t{1} << 36) / num_shards / (16 + 4 * (dim + options.state_floats)));
  options.max_rows = std::min<size_t>(options.max_rows, EmbeddingTable::kNoRow - 1);
  options.track_changes = !config.checkpoint_dir.empty();
  if (config.min_count > 1 || !config.min_count_by_slot.empty()) {
    options.min_count_by_slot.assign(kNumCategorical, config.min_count);
    for (size_t s = 0; s < config.min_count_by_slot.size() && s < kNumCategorical; ++s) {
      if (config.min_count_by_slot[s] > 0)
        options.min_count_by_slot[s] = config.min_count_by_slot[s];
    }
  }
  options.init_state = [optimizer, dim](const float* w, float* state) {
    optimizer->InitState(w, state, dim);
  };
  return options;
}

}  // namespace evoscale::trainer::internal
