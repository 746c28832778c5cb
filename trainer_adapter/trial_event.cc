#include "trainer_adapter/trial_event.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace evoscale::trainer_adapter {
namespace {

using Json = nlohmann::json;

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("trial event: \"", field, "\": ", what));
}

// The member `field` of the object `obj`; nullptr when it is absent or null.
const Json* Find(const Json& obj, const char* field) {
  auto it = obj.find(field);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// Reads an optional non-negative integer field into `out` (left as is when absent). An integer
// is read as one, so that every count the trainer prints (any int64) comes back exact; a number
// with a fraction or an exponent counts when it is whole and small enough for a double to hold
// it exactly.
absl::Status Count(const Json& obj, const char* field, int64_t* out) {
  const Json* v = Find(obj, field);
  if (v == nullptr) return absl::OkStatus();
  if (v->is_number_unsigned()) {
    const uint64_t number = v->get<uint64_t>();
    if (number <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      *out = static_cast<int64_t>(number);
      return absl::OkStatus();
    }
  } else if (v->is_number_integer()) {  // written with a '-': only -0 is a count
    if (v->get<int64_t>() == 0) {
      *out = 0;
      return absl::OkStatus();
    }
  } else if (v->is_number_float()) {
    const double number = v->get<double>();
    if (number >= 0 && number <= 9.0e15 && number == std::floor(number)) {
      *out = static_cast<int64_t>(number);
      return absl::OkStatus();
    }
  }
  return FieldError(field, "must be a non-negative integer");
}

absl::Status NonNegative(const Json& obj, const char* field, double* out) {
  const Json* v = Find(obj, field);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number() || v->get<double>() < 0) {
    return FieldError(field, "must be a non-negative number");
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

absl::Status Text(const Json& obj, const char* field, std::string* out) {
  const Json* v = Find(obj, field);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_string()) return FieldError(field, "must be a string");
  *out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status Metrics(const Json& obj, std::map<std::string, double>* out) {
  const Json* m = Find(obj, "metrics");
  if (m == nullptr) return absl::OkStatus();
  if (!m->is_object()) return FieldError("metrics", "must be an object");
  for (const auto& [name, v] : m->items()) {
    if (v.is_null()) continue;  // NaN, as the trainer prints it
    if (name.empty()) return FieldError("metrics", "a metric name is empty");
    if (!v.is_number()) {
      return FieldError(absl::StrCat("metrics.", name), "must be a number or null");
    }
    (*out)[name] = v.get<double>();
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
  Json doc;
  try {
    doc = Json::parse(line.begin(), line.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("trial event: not JSON: ", e.what()));
  }
  if (!doc.is_object()) return absl::InvalidArgumentError("trial event: must be a JSON object");
  const Json* event = Find(doc, "event");
  if (event == nullptr || !event->is_string()) {
    return FieldError("event", "missing (want progress, checkpoint, final or error)");
  }
  const std::string& kind = event->get_ref<const std::string&>();
  TrialEvent e;
  if (kind == "progress") {
    e.kind = TrialEvent::Kind::kProgress;
  } else if (kind == "checkpoint") {
    e.kind = TrialEvent::Kind::kCheckpoint;
  } else if (kind == "final") {
    e.kind = TrialEvent::Kind::kFinal;
  } else if (kind == "error") {
    e.kind = TrialEvent::Kind::kError;
  } else {
    return FieldError("event", absl::StrCat("unknown value \"", kind,
                                            "\" (want progress, checkpoint, final or error)"));
  }
  for (absl::Status st : {Count(doc, "step", &e.step), Count(doc, "examples", &e.examples),
                          NonNegative(doc, "elapsed_s", &e.elapsed_s),
                          NonNegative(doc, "examples_per_s", &e.examples_per_s),
                          Count(doc, "peak_rss_bytes", &e.peak_rss_bytes),
                          Text(doc, "path", &e.path), Text(doc, "code", &e.code),
                          Text(doc, "message", &e.message), Metrics(doc, &e.metrics)}) {
    if (!st.ok()) return st;
  }
  return e;
}

}  // namespace evoscale::trainer_adapter
