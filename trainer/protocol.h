// The trainer protocol's lines (DESIGN.md, "Trainer protocol"): every line the CPU trainer, the
// GPU trainer and evoscale-trainer's flag errors print is built here. Each is one JSON object,
// its fields in this order:
//   {"event":"progress","step":N,"examples":N,"elapsed_s":S,"metrics":{"logloss":..,"auc":..}}
//   {"event":"checkpoint","step":N,"examples":N,"full":B,"path":P}
//   {"event":"final","examples_per_s":..,"peak_rss_bytes":..,"metrics":{"auc":..,"logloss":..},
//    "eval_examples":N,"eval_set":"holdout"|"test","steps":N,"examples":N,"train_s":S,
//    "malformed_lines":N, ...the trainer's own fields}
//   {"event":"error","step":N,"code":C,"message":M}  (no "step" before a trainer starts)
// Figures (metrics, ratios) keep 6 significant digits, elapsed_s and train_s 3 decimals,
// examples_per_s 1 decimal; one that is not finite (a NaN AUC) is null. Strings are UTF-8: an
// invalid byte in a message or path becomes U+FFFD.
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
