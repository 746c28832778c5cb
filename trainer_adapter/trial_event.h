// The trainer protocol (trainer/PROTOCOL.md): a trial prints one JSON object per line on
// stdout. This parses those lines into events; what it keeps of each line, and which lines are
// not events, is the protocol's "What the adapter does with a line".
#ifndef EVOSCALE_TRAINER_ADAPTER_TRIAL_EVENT_H_
#define EVOSCALE_TRAINER_ADAPTER_TRIAL_EVENT_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::trainer_adapter {

struct TrialEvent {
  enum class Kind { kProgress, kCheckpoint, kFinal, kError };
  Kind kind = Kind::kProgress;
  int64_t step = -1;      // progress, checkpoint (and error, where given); -1 if absent
  int64_t examples = -1;  // progress, checkpoint; -1 if absent
  double elapsed_s = -1;  // progress; -1 if absent
  std::map<std::string, double> metrics;  // progress, final
  double examples_per_s = -1;  // final; -1 if absent
  int64_t peak_rss_bytes = -1;  // final; -1 if absent
  std::string path;             // checkpoint
  std::string code, message;    // error
};

absl::string_view TrialEventKindName(TrialEvent::Kind kind);

// Parses one line. INVALID_ARGUMENT, naming the field, for a line that is not a JSON object,
// has no known "event", or has a field of the wrong type (e.g. `"step": "x"`, a metric that is
// not a number, a negative step).
absl::StatusOr<TrialEvent> ParseTrialEvent(absl::string_view line);

}  // namespace evoscale::trainer_adapter

#endif  // EVOSCALE_TRAINER_ADAPTER_TRIAL_EVENT_H_
