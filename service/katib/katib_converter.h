// Converts between Katib's Suggestion API (api.v1.beta1, proto/katib/v1beta1/suggestion.proto)
// and the study API: a Katib experiment becomes an evoscale study spec, evoscale trials become
// Katib parameter assignments, and Katib's trials and observations come back as evoscale
// parameters and measurements.
//
// How Katib's search space maps onto a study spec:
//   DOUBLE min..max                  -> double_spec (LOG scale when distribution LOG_UNIFORM)
//   INT min..max (step empty or 1)   -> integer_spec (LOG scale likewise)
//   DOUBLE or INT with a step        -> discrete_spec {min, min+step, ... <= max}: Katib's step
//                                       means "only these values", which a discrete parameter
//                                       keeps exactly (and the GA still orders them)
//   DISCRETE list                    -> discrete_spec (values as numbers; answered as written)
//   CATEGORICAL list                 -> categorical_spec
//   distribution NORMAL, LOG_NORMAL  -> INVALID_ARGUMENT (evoscale samples within bounds)
// The objective metric is the study's one metric (goal from ObjectiveSpec.type); additional
// metrics are not objectives: they ride along in each final measurement, and their names, with
// ObjectiveSpec.goal (Katib stops the experiment on it), are in the study's metadata. Budget
// and parallelism stay Katib's: the study has no max_trials, and its trials are never handed to
// another client (Katib owns their lifetimes, which may be long).
//
// Every error is INVALID_ARGUMENT naming the Katib field, e.g.
// `experiment.spec.algorithm.algorithm_settings["population_size"]: must be an integer in
// [4, 10000], got "x"`. The rules are the study API's (ToProblem): a spec this accepts, a
// study accepts.
#ifndef EVOSCALE_SERVICE_KATIB_KATIB_CONVERTER_H_
#define EVOSCALE_SERVICE_KATIB_KATIB_CONVERTER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"
#include "katib/v1beta1/suggestion.pb.h"

namespace evoscale::service {

// Study display names are "katib/" + the experiment's name.
inline constexpr absl::string_view kKatibStudyPrefix = "katib/";
// Metadata keys. Study: the experiment's name. Trial: the name Katib knows it by, and the
// total_request_number of the GetSuggestions call it was answered to.
inline constexpr absl::string_view kKatibExperimentKey = "katib.experiment";
inline constexpr absl::string_view kKatibTrialKey = "katib.trial";
inline constexpr absl::string_view kKatibRequestKey = "katib.request";

// A validated Katib experiment and its study. Immutable; copyable.
class KatibExperiment {
 public:
  // Validates `experiment` and converts it (see the file comment). Costs O(values).
  static absl::StatusOr<KatibExperiment> FromProto(const ::api::v1::beta1::Experiment& experiment);

  const std::string& name() const { return name_; }
  // display_name, spec and metadata of the experiment's study (what CreateStudy takes).
  const v1::Study& study() const { return study_; }

  // The trial's parameters as Katib assignments, in the experiment's parameter order: numbers
  // of a list or a step as Katib wrote them, others in the shortest form that reads back
  // exactly. FAILED_PRECONDITION when the trial lacks a parameter of the experiment.
  absl::StatusOr<std::vector<::api::v1::beta1::ParameterAssignment>> ToAssignments(
      const v1::Trial& trial) const;
  // Katib's assignments of a trial as study parameters (typed; the study checks their range).
  // INVALID_ARGUMENT naming `path` when one is unknown, missing or not a number.
  absl::StatusOr<google::protobuf::RepeatedPtrField<v1::Parameter>> ToParameters(
      const google::protobuf::RepeatedPtrField<::api::v1::beta1::ParameterAssignment>& assignments,
      absl::string_view path) const;
  // A finished Katib trial's final measurement: the objective metric (required: INVALID_ARGUMENT
  // saying why when it is missing or not a number) and the additional metrics that are numbers;
  // elapsed_seconds from the trial's start and completion times when both are given.
  absl::StatusOr<v1::Measurement> ToMeasurement(const ::api::v1::beta1::TrialStatus& status) const;

  // The name Katib gives the study's trial `trial_id`: "<experiment>-<study tag>-<trial id>",
  // a valid Kubernetes name of at most 63 characters (the experiment's name shortened when
  // needed). The tag comes from the study's create_time, so a study made again from scratch
  // (a new database) never repeats the names of an earlier one.
  std::string TrialName(const v1::Study& study, int64_t trial_id) const;

 private:
  // One Katib parameter and how its values are written.
  struct Parameter {
    std::string name;
    ::api::v1::beta1::ParameterType type = ::api::v1::beta1::UNKNOWN_TYPE;
    // Numbers of a list or a step: (value, as Katib writes it), sorted by value. Empty for a
    // DOUBLE or INT without step and for CATEGORICAL.
    std::vector<std::pair<double, std::string>> grid;
  };

  KatibExperiment() = default;
  // Katib's parameter `in` (at `path`) as the study's parameter `out`, and how its values are
  // written into `p`.
  static absl::Status ConvertParameter(const ::api::v1::beta1::ParameterSpec& in,
                                       const std::string& path, v1::ParameterSpec* out,
                                       Parameter* p);

  std::string name_;
  v1::Study study_;
  std::vector<Parameter> parameters_;
  std::string objective_metric_;
  std::vector<std::string> additional_metrics_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_KATIB_KATIB_CONVERTER_H_
