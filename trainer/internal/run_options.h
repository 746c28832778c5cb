// What the CPU and the GPU trainer must agree on for one run: which rows are held out and how
// the readers of the training and evaluation passes are set up.
#ifndef EVOSCALE_TRAINER_INTERNAL_RUN_OPTIONS_H_
#define EVOSCALE_TRAINER_INTERNAL_RUN_OPTIONS_H_

#include <chrono>
#include <cstdint>

#include "trainer/criteo_reader.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer::internal {

// Without a test file every Nth row is held out for evaluation (N from the fraction, >= 2);
// 0 means no row is.
int64_t HoldoutEvery(double fraction);

// The reader options of the training pass (held-out rows skipped) or of the evaluation pass
// (the test file, or only the held-out rows).
BatchReaderOptions ReaderOptions(const TrainerConfig& config, int batch_size, int num_shards,
                                 bool for_eval);

inline double SecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_RUN_OPTIONS_H_
