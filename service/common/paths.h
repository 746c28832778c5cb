// File names evoscaled and its clients agree on.
#ifndef EVOSCALE_SERVICE_COMMON_PATHS_H_
#define EVOSCALE_SERVICE_COMMON_PATHS_H_

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace evoscale::service {

// The telemetry database beside a study database: "x.db" -> "x.telemetry.db", "x" ->
// "x.telemetry.db".
inline std::string TelemetryPathFor(absl::string_view db_path) {
  absl::string_view base = db_path;
  if (base.size() > 3 && absl::EndsWith(base, ".db")) base.remove_suffix(3);
  return absl::StrCat(base, ".telemetry.db");
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_PATHS_H_
