// Fuzzes the study files `evoscale study create` reads: YAML (our YAML-to-JSON conversion over
// yaml-cpp) and protobuf JSON, then the service's validation of what they give.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "service/cli/cli.h"
#include "service/study/study_converter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto format :
       {evoscale::cli::StudyFileFormat::kYaml, evoscale::cli::StudyFileFormat::kJson}) {
    absl::StatusOr<evoscale::v1::Study> study = evoscale::cli::ParseStudy(text, format, "fuzz");
    if (study.ok()) (void)evoscale::service::ToProblem(study->spec());
  }
  return 0;
}
