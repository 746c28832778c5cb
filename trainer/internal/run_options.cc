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
  if (config.test_path.empty() && !config.stream) {  // a stream holds nothing out
    options.filter.holdout_every = HoldoutEvery(config.holdout_fraction);
    options.filter.holdout = for_eval;
  }
  return options;
}

absl::StatusOr<std::unique_ptr<ExampleSource>> OpenSource(const TrainerConfig& config,
                                                          bool for_eval, ReaderPosition start) {
  if (config.synthetic_rows > 0) {
    if (for_eval && !config.test_path.empty()) return OpenCriteoFile(config.test_path, 1);
    return MakeSyntheticSource(config.synthetic_rows, config.seed + 1, for_eval ? 1 : config.epochs,
                               start);
  }
  if (for_eval && config.stream && config.test_path.empty()) {
    // Nothing to evaluate on (a stream holds nothing out): EvaluateJob reads no rows of this.
    return MakeSyntheticSource(1, 0, 1);
  }
  if (for_eval) {
    return OpenCriteoFile(config.test_path.empty() ? config.train_path : config.test_path, 1);
  }
  if (config.stream) return OpenCriteoStream(config.train_path, start);
  return OpenCriteoFile(config.train_path, config.epochs, start);
}

}  // namespace evoscale::trainer::internal
