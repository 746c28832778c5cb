#include "trainer/internal/run_options.h"

#include <algorithm>
#include <cmath>

namespace evoscale::trainer::internal {

int64_t HoldoutEvery(double fraction) {
  return fraction > 0 ? std::max<int64_t>(2, std::llround(1.0 / fraction)) : 0;
}

BatchReaderOptions ReaderOptions(const TrainerConfig& config, int batch_size, int num_shards,
                                 bool for_eval) {
  BatchReaderOptions options;
  options.batch_size = batch_size;
  options.num_shards = num_shards;
  options.max_malformed_fraction = config.max_malformed_fraction;
  if (config.test_path.empty()) {
    options.filter.holdout_every = HoldoutEvery(config.holdout_fraction);
    options.filter.holdout = for_eval;
  }
  return options;
}

}  // namespace evoscale::trainer::internal
