#include "trainer_adapter/trial_event.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "trainer_adapter/internal/json.h"

namespace evoscale::trainer_adapter {
namespace {

using internal::JsonValue;

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("trial event: \"", field, "\": ", what));
}

// Reads an optional non-negative integer field into `out` (left as is when absent).
absl::Status Count(const JsonValue& obj, absl::string_view field, int64_t* out) {
  const JsonValue* v = obj.Find(field);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return absl::OkStatus();
  if (v->type != JsonValue::Type::kNumber || v->number < 0 || v->number > 9.0e15 ||
      v->number != std::floor(v->number)) {
    return FieldError(field, "must be a non-negative integer");
  }
  *out = static_cast<int64_t>(v->number);
  return absl::OkStatus();
}

absl::Status NonNegative(const JsonValue& obj, absl::string_view field, double* out) {
  const JsonValue* v = obj.Find(field);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return absl::OkStatus();
  if (v->type != JsonValue::Type::kNumber || v->number < 0) {
    return FieldError(field, "must be a non-negative number");
  }
  *out = v->number;
  return absl::OkStatus();
}

absl::Status Text(const JsonValue& obj, absl::string_view field, std::string* out) {
  const JsonValue* v = obj.Find(field);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return absl::OkStatus();
  if (v->type != JsonValue::Type::kString) return FieldError(field, "must be a string");
  *out = v->string;
  return absl::OkStatus();
}

absl::Status Metrics(const JsonValue& obj, std::map<std::string, double>* out) {
  const JsonValue* m = obj.Find("metrics");
  if (m == nullptr || m->type == JsonValue::Type::kNull) return absl::OkStatus();
  if (m->type != JsonValue::Type::kObject) return FieldError("metrics", "must be an object");
  for (const auto& [name, v] : m->object) {
    if (v.type == JsonValue::Type::kNull) continue;  // NaN, as the trainer prints it
    if (name.empty()) return FieldError("metrics", "a metric name is empty");
    if (v.type != JsonValue::Type::kNumber) {
      return FieldError(absl::StrCat("metrics.", name), "must be a number or null");
    }
    (*out)[name] = v.number;
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view TrialEventKindName(TrialEvent::Kind kind) {
  switch (kind) {
    case TrialEvent::Kind::kProgress: return "progress";
    case TrialEvent::Kind::kCheckpoint: return "checkpoint";
    case TrialEvent::Kind::kFinal: return "final";
    case TrialEvent::Kind::kError: return "error";
  }
  return "?";
}

absl::StatusOr<TrialEvent> ParseTrialEvent(absl::string_view line) {
  absl::StatusOr<JsonValue> doc = internal::ParseJson(line);
  if (!doc.ok()) return doc.status();
  if (doc->type != JsonValue::Type::kObject) {
    return absl::InvalidArgumentError("trial event: must be a JSON object");
  }
  const JsonValue* event = doc->Find("event");
  if (event == nullptr || event->type != JsonValue::Type::kString) {
    return FieldError("event", "missing (want progress, checkpoint, final or error)");
  }
  TrialEvent e;
  if (event->string == "progress") {
    e.kind = TrialEvent::Kind::kProgress;
  } else if (event->string == "checkpoint") {
    e.kind = TrialEvent::Kind::kCheckpoint;
  } else if (event->string == "final") {
    e.kind = TrialEvent::Kind::kFinal;
  } else if (event->string == "error") {
    e.kind = TrialEvent::Kind::kError;
  } else {
    return FieldError("event", absl::StrCat("unknown value \"", event->string,
                                            "\" (want progress, checkpoint, final or error)"));
  }
  for (absl::Status st : {Count(*doc, "step", &e.step), Count(*doc, "examples", &e.examples),
                          NonNegative(*doc, "elapsed_s", &e.elapsed_s),
                          NonNegative(*doc, "examples_per_s", &e.examples_per_s),
                          Count(*doc, "peak_rss_bytes", &e.peak_rss_bytes),
                          Text(*doc, "path", &e.path), Text(*doc, "code", &e.code),
                          Text(*doc, "message", &e.message), Metrics(*doc, &e.metrics)}) {
    if (!st.ok()) return st;
  }
  return e;
}

}  // namespace evoscale::trainer_adapter
