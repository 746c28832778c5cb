// The checks of request fields that the converter (study_converter.h) leaves to the core:
// metadata, the metrics a measurement must carry, and how a trial given to CreateTrial ended.
// Every error is INVALID_ARGUMENT with a message that starts with the field's path.
#ifndef EVOSCALE_SERVICE_STUDY_INTERNAL_REQUEST_CHECKS_H_
#define EVOSCALE_SERVICE_STUDY_INTERNAL_REQUEST_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"
#include "search/types.h"

namespace evoscale::service::internal {

// Study and trial metadata: keys of 1..256 bytes, values up to 64 KiB, at most 1000 keys.
absl::Status ValidateMetadata(const google::protobuf::Map<std::string, std::string>& m,
                              absl::string_view path);

// Applies an UpdateMetadataRequest's removals (each key checked, path "remove") and then its
// settings to `m`, and checks the result (path "set"). On error `m` may be half updated.
absl::Status UpdateMetadataMap(const v1::UpdateMetadataRequest& req,
                               google::protobuf::Map<std::string, std::string>* m);

// A final measurement must carry every metric of the study.
absl::Status RequireMetrics(const search::ProblemStatement& problem, const v1::Measurement& m,
                            absl::string_view path);

// An intermediate measurement names at least one of the study's metrics (others may ride
// along, as Vizier allows): a measurement of only unknown names is a typo, and would be kept
// where no chart, early stopping rule or final measurement could use it.
absl::Status RequireSomeMetric(const search::ProblemStatement& problem, const v1::Measurement& m,
                               absl::string_view path);

// A new measurement of `trial` does not go back in time: its elapsed_seconds (0 = not
// reported, always accepted) is at least that of every measurement the trial holds.
absl::Status RequireElapsedForward(const v1::Trial& trial, const v1::Measurement& m,
                                   absl::string_view path);

// What CreateTrial's `trial` says of how the trial ended, checked: its state (unset: SUCCEEDED
// with a final measurement, else REQUESTED; or REQUESTED, SUCCEEDED, STOPPED, INFEASIBLE:
// a result from elsewhere, e.g. a run another tool stopped early; or ACTIVE: a run its
// client_id (required) has started with parameters chosen elsewhere), its intermediate
// measurements, its final measurement (STOPPED: the last intermediate one when not given) and
// infeasible_reason. The answer carries those four fields only.
absl::StatusOr<v1::Trial> EndedTrial(const search::ProblemStatement& problem, const v1::Trial& in);

// Where two specs first differ, e.g. "max_trials is modified" (for ALREADY_EXISTS).
std::string FirstDifference(const v1::StudySpec& existing, const v1::StudySpec& wanted);
// CreateStudy's get-or-create when the live study `existing` of the display name has another
// spec than `wanted`: ALREADY_EXISTS naming the first difference.
absl::Status DisplayNameTaken(const v1::Study& existing, const v1::StudySpec& wanted);

// "ACTIVE", "SUCCEEDED", ... (the enum's name; `s` must be valid).
const char* TrialStateName(v1::Trial::State s);

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STUDY_INTERNAL_REQUEST_CHECKS_H_
