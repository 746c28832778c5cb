#include "trainer/protocol.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace evoscale::trainer {
namespace {

using Json = nlohmann::ordered_json;

// The JSON writer prints a double as the shortest text that reads back as the same double, so a
// value read back from printf's rounding shows the digits that format kept and no more.
double ReadBack(const std::string& printed) {
  double v = 0;
  (void)absl::SimpleAtod(printed, &v);  // printf's own output of a finite double
  return v;
}

// `v` with `decimals` digits after the point, or null when not finite.
Json Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return nullptr;
  return ReadBack(absl::StrFormat("%.*f", decimals, v));
}

std::string Dump(const Json& line) {
  return line.dump(/*indent=*/-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace

Json Figure(double v) {
  if (!std::isfinite(v)) return nullptr;
  return ReadBack(absl::StrFormat("%.6g", v));
}

std::string ProgressLine(int64_t step, int64_t examples, double elapsed_s,
                         const BinaryMetrics& window) {
  return Dump({{"event", "progress"},
               {"step", step},
               {"examples", examples},
               {"elapsed_s", Fixed(elapsed_s, 3)},
               {"metrics",
                {{"logloss", Figure(window.LogLoss())}, {"auc", Figure(window.Auc())}}}});
}

std::string CheckpointLine(int64_t step, int64_t examples, bool full, std::string_view path) {
  return Dump({{"event", "checkpoint"},
               {"step", step},
               {"examples", examples},
               {"full", full},
               {"path", path}});
}

std::string FinalLine(const FinalSummary& summary, const Json& details) {
  Json line = {{"event", "final"},
               {"examples_per_s", Fixed(summary.examples_per_s, 1)},
               {"peak_rss_bytes", summary.peak_rss_bytes},
               {"metrics", {{"auc", Figure(summary.auc)}, {"logloss", Figure(summary.logloss)}}},
               {"eval_examples", summary.eval_examples},
               {"eval_set", summary.holdout ? "holdout" : "test"},
               {"steps", summary.steps},
               {"examples", summary.examples},
               {"train_s", Fixed(summary.train_s, 3)},
               {"malformed_lines", summary.malformed_lines}};
  for (const auto& [key, value] : details.items()) line[key] = value;
  return Dump(line);
}

std::string ErrorLine(const absl::Status& status, std::optional<int64_t> step) {
  Json line = {{"event", "error"}};
  if (step.has_value()) line["step"] = *step;
  line["code"] = absl::StatusCodeToString(status.code());
  line["message"] = std::string(status.message());
  return Dump(line);
}

}  // namespace evoscale::trainer
