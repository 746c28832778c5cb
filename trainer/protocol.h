// The trainer protocol's lines: every line the CPU trainer, the GPU trainer and evoscale-trainer
// print on stdout is built here. trainer/PROTOCOL.md describes the protocol (each event's
// fields, rounding, order, environment, exit codes, signals, jobs of several ranks).
#ifndef EVOSCALE_TRAINER_PROTOCOL_H_
#define EVOSCALE_TRAINER_PROTOCOL_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "trainer/metrics.h"

namespace evoscale::trainer {

// Receives each line (without the newline).
using EventSink = std::function<void(std::string_view line)>;

// A progress line; `window` holds the training examples since the previous one.
std::string ProgressLine(int64_t step, int64_t examples, double elapsed_s,
                         const BinaryMetrics& window);

// The line after a checkpoint at `path` was written (full, or a delta on the previous ones).
std::string CheckpointLine(int64_t step, int64_t examples, bool full, std::string_view path);

// What every trainer's final line starts with.
struct FinalSummary {
  double examples_per_s = 0;  // training examples per second in this process
  uint64_t peak_rss_bytes = 0;
  // On the evaluation set: the test file, or the held-out share of the training data.
  double auc = std::numeric_limits<double>::quiet_NaN();
  double logloss = std::numeric_limits<double>::quiet_NaN();
  int64_t eval_examples = 0;
  bool holdout = true;  // "eval_set": "holdout", else "test"
  int64_t steps = 0;
  int64_t examples = 0;
  double train_s = 0;
  int64_t malformed_lines = 0;
};

// The final line: `summary`'s fields, then those of the object `details` in their order.
std::string FinalLine(const FinalSummary& summary, const nlohmann::ordered_json& details);

// The error line for a failed `status`, with "step" where a trainer had started.
std::string ErrorLine(const absl::Status& status, std::optional<int64_t> step = std::nullopt);

// A figure as the lines carry it: `v` to 6 significant digits, or null when not finite.
nlohmann::ordered_json Figure(double v);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_PROTOCOL_H_
