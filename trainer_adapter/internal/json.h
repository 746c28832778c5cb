// A small strict JSON reader (RFC 8259) for the trainer protocol's lines: a document becomes a
// tree of JsonValue. No dependency beyond Abseil; depth is limited to 64.
#ifndef EVOSCALE_TRAINER_ADAPTER_INTERNAL_JSON_H_
#define EVOSCALE_TRAINER_ADAPTER_INTERNAL_JSON_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::trainer_adapter::internal {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in document order

  // The member `key` of an object (the last one if repeated); nullptr if absent or not an
  // object.
  const JsonValue* Find(absl::string_view key) const;
};

// INVALID_ARGUMENT with the byte offset and what was expected, for anything that is not one
// JSON value (surrounding white space allowed).
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace evoscale::trainer_adapter::internal

#endif  // EVOSCALE_TRAINER_ADAPTER_INTERNAL_JSON_H_
