// What the CPU and the GPU trainer must agree on for one run: which rows are held out and how
// the readers of the training and evaluation passes are set up.
#ifndef EVOSCALE_TRAINER_INTERNAL_RUN_OPTIONS_H_
#define EVOSCALE_TRAINER_INTERNAL_RUN_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
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

// The rows of the training pass (config's epochs, from `start`) or of the evaluation pass (the
// test file, else the training rows once, whose held-out ones the reader keeps): config's
// synthetic rows or Criteo file. NOT_FOUND for a missing file.
absl::StatusOr<std::unique_ptr<ExampleSource>> OpenSource(const TrainerConfig& config,
                                                          bool for_eval, ReaderPosition start = {});

inline double SecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_RUN_OPTIONS_H_
