// Escapes text for a JSON string literal (quotes, backslash, control characters), for the
// service's hand-written JSON: HTTP error bodies and structured log lines.
#ifndef EVOSCALE_SERVICE_INTERNAL_JSON_ESCAPE_H_
#define EVOSCALE_SERVICE_INTERNAL_JSON_ESCAPE_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace evoscale::service::internal {

inline std::string JsonEscape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00",
                          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_INTERNAL_JSON_ESCAPE_H_
