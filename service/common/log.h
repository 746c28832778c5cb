// LogEvent: how evoscaled logs, in one place. One JSON object per line on stderr: first
// "event" (what kind of thing happened: "store", "scheduler", "warning", ...), then the
// caller's fields in the order given. Bytes that are not UTF-8 (a trial's stderr, a path)
// become U+FFFD rather than abort the line.
//
// Quiet by default: log what an operator must act on or know (a failure, a fallback, a change
// of state), once when it starts and once when it ends; never per request or per sample
// (counters on /metrics are for those). Thread-safe: each line is one write.
#ifndef EVOSCALE_SERVICE_COMMON_LOG_H_
#define EVOSCALE_SERVICE_COMMON_LOG_H_

#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace evoscale::service {

using LogField = std::pair<const char*, std::string>;

inline void LogEvent(absl::string_view event, std::initializer_list<LogField> fields) {
  nlohmann::ordered_json line;
  line["event"] = std::string(event);
  for (const auto& [name, value] : fields) line[name] = value;
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_LOG_H_
