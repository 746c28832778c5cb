// The study API's resource names ("studies/{id}", "studies/{id}/trials/{id}") and list pages,
// parsed. Ids are canonical decimal (digits only, no sign, spaces or leading zeros), so a study
// or trial has one name. Every error is INVALID_ARGUMENT naming the field.
#ifndef EVOSCALE_SERVICE_STUDY_INTERNAL_NAMES_H_
#define EVOSCALE_SERVICE_STUDY_INTERNAL_NAMES_H_

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::service::internal {

// The study id of "studies/{id}"; else `field: malformed study name "NAME"; want studies/{id}`.
absl::StatusOr<int64_t> ParseStudyName(absl::string_view name, absl::string_view field);

// The (study, trial) ids of "studies/{id}/trials/{id}".
absl::StatusOr<std::pair<int64_t, int64_t>> ParseTrialName(absl::string_view name,
                                                           absl::string_view field);

// A list's page size: 0 is kDefaultPageSize; beyond [0, kMaxPageSize] is an error.
absl::StatusOr<int> PageSize(int32_t page_size);

// Where a page starts: the id of the last item of the previous page (its opaque token), 0 for
// the first page.
absl::StatusOr<int64_t> PageStart(absl::string_view token);

// NOT_FOUND: study "studies/{id}" not found.
absl::Status NotFoundStudy(int64_t id);

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STUDY_INTERNAL_NAMES_H_
