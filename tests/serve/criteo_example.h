// A Criteo line (label first, as the trainer's files hold it) as a Predict request's example,
// for the serve tests.
#ifndef EVOSCALE_TESTS_SERVE_CRITEO_EXAMPLE_H_
#define EVOSCALE_TESTS_SERVE_CRITEO_EXAMPLE_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "evoscale/v1/serving.pb.h"

namespace evoscale::testing {

inline v1::Example ExampleOf(const std::string& line) {
  std::vector<std::string> fields = absl::StrSplit(line, '\t');
  v1::Example e;
  for (int f = 1; f <= 13; ++f) e.add_numeric(fields[f].empty() ? 0 : std::stoll(fields[f]));
  for (int f = 14; f < int(fields.size()); ++f) e.add_categorical(fields[f]);
  return e;
}

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_SERVE_CRITEO_EXAMPLE_H_
