// Fuzzes the trainer protocol: one line of a trial's stdout -> TrialEvent.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "trainer_adapter/trial_event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)evoscale::trainer_adapter::ParseTrialEvent(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
