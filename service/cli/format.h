// What the evoscale commands print, as text: numbers, tables, parameters and metrics, and
// YAML for -o yaml. Pure functions, safe from any thread; cli.h includes this header, which is
// part of its contract.

#ifndef EVOSCALE_SERVICE_CLI_FORMAT_H_
#define EVOSCALE_SERVICE_CLI_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"

namespace evoscale::cli {

// Formats a number as printf's %g.
std::string FormatNumber(double value);

// Lays out a table: left-aligned columns two spaces apart, header first, one line per row,
// no trailing spaces. Empty cells print as "-". Rows shorter than the header are padded.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// "lr=0.001 layers=3 act=relu", in the trial's order; "-" when there are none.
std::string FormatParameters(const v1::Trial& trial);

// "loss=0.25 acc=0.9", sorted by metric name; "-" when there are none.
std::string FormatMetrics(const v1::Measurement& measurement);

// JSON text (an object, as protobuf's JSON printer writes it) as a YAML document in block
// style; strings that YAML would read as another type ("true", "1e3", "null", "") are quoted,
// so the YAML reads back as the same values. InvalidArgument when `json` does not parse.
absl::StatusOr<std::string> JsonToYaml(absl::string_view json);

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_FORMAT_H_
