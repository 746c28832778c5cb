// Converts between the public API (evoscale.v1 protobuf) and search/'s plain types, and
// validates what clients send. Every error is INVALID_ARGUMENT with a message that starts
// with the path of the offending field, e.g. `spec.parameters[2].double_spec: min 5 must be
// < max 1`.
#ifndef EVOSCALE_SERVICE_STUDY_STUDY_CONVERTER_H_
#define EVOSCALE_SERVICE_STUDY_STUDY_CONVERTER_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "evoscale/v1/study.pb.h"
#include "search/early_stopping.h"
#include "search/types.h"

namespace evoscale::service {

// Size limits on what a client may store.
inline constexpr int kMaxParameters = 1000;
inline constexpr int kMaxValuesPerParameter = 10000;
inline constexpr int kMaxMetrics = 100;
inline constexpr int kMaxNameLength = 256;
inline constexpr int kMaxSettings = 100;
inline constexpr int kMaxConditionDepth = 8;

// Validates the whole spec and converts it. Field paths start with "spec.".
absl::StatusOr<search::ProblemStatement> ToProblem(const v1::StudySpec& spec);

// The objective early stopping watches: the first metric that is not a constraint.
const search::MetricConfig& PrimaryMetric(const search::ProblemStatement& problem);

// The early-stopping rule of a valid spec: its policy (COST_AWARE when none is set and the
// study has a budget and a max_step) and settings.
search::EarlyStoppingConfig ToEarlyStopping(const v1::StudySpec& spec);

// The cores a trial holds, as its cost counts them: resources.cpu_cores, 1 when unset.
double HeldCores(const v1::Trial& trial);
// What a trial has cost in core-seconds: HeldCores x its wall seconds (its usage's, else its
// latest measurement's elapsed_seconds).
double TrialCoreSeconds(const v1::Trial& trial);

// Whether a study promotes STOPPED trials back (see Trial.policy_stopped): COST_AWARE in a
// managed study whose template resumes from its checkpoint.
bool PromotesStoppedTrials(const v1::StudySpec& spec);

// Checks that `params` assign exactly the active parameters of `space`, each of the right
// type and within its bounds, and converts them. Paths start with `path` ("trial.parameters").
absl::StatusOr<search::ParameterDict> ToParameterDict(
    const search::SearchSpace& space,
    const google::protobuf::RepeatedPtrField<v1::Parameter>& params, absl::string_view path);

// Validates a measurement (finite metrics, non-empty names, step >= 0). Paths start with
// `path`.
absl::Status ValidateMeasurement(const v1::Measurement& m, absl::string_view path);
// cpu_cores, memory_bytes and gpus finite and >= 0; INVALID_ARGUMENT naming `path`.
absl::Status ValidateResources(const v1::ResourceRequest& r, absl::string_view path);
// Every figure finite and >= 0; INVALID_ARGUMENT naming the field under `path`.
absl::Status ValidateUsage(const v1::TrialUsage& u, absl::string_view path);

void SetParameters(const search::ParameterDict& params, v1::Trial* trial);
search::Trial ToSearchTrial(const v1::Trial& trial);

// The spec's metrics as the designers see them (validated as CreateStudy validates them).
absl::StatusOr<std::vector<search::MetricConfig>> MetricConfigs(const v1::StudySpec& spec);

// The ids, in order, of the optimal trials among `trials` (search::OptimalTrials over the
// SUCCEEDED ones): those tied for the best of one objective, the Pareto front of several.
std::vector<int64_t> OptimalTrialIds(absl::Span<const search::MetricConfig> metrics,
                                     absl::Span<const v1::Trial> trials);

// GetParameterImportance over `trials`: each parameter's main effect on `metric` (the primary
// objective when empty) among the SUCCEEDED trials that report it. INVALID_ARGUMENT naming the
// study's metrics for a metric it does not have.
absl::StatusOr<v1::GetParameterImportanceResponse> ParameterImportanceOf(
    const search::ProblemStatement& problem, absl::Span<const v1::Trial> trials,
    const std::string& metric);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_STUDY_CONVERTER_H_
