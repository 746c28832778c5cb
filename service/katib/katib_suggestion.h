// KatibSuggestion: Katib's Suggestion service (GetSuggestions, ValidateAlgorithmSettings) over
// the study core, so that a Katib experiment is an ordinary evoscale study, seen by the
// dashboard, the CLI and the study API like any other.
//
// The contract with Katib, call by call:
// - A Katib experiment is the study "katib/<experiment name>" (metadata katib.experiment),
//   created by the first GetSuggestions (CreateStudy, get-or-create) and found by the others.
//   An existing study of that name made from a different experiment spec is an error
//   (ALREADY_EXISTS from GetSuggestions, INVALID_ARGUMENT from ValidateAlgorithmSettings, as
//   Katib counts only that one as a verdict).
// - Each call carries every trial of the experiment. Those Katib reports ended are recorded
//   once, whatever the number of calls and restarts: a trial evoscale suggested (found by its
//   metadata katib.trial) completes SUCCEEDED with its observation (STOPPED when Katib stopped
//   it early) or INFEASIBLE when it FAILED, was KILLED or has no objective value; a finished
//   trial evoscale does not know (a new database, say) is added, so its result is learnt.
//   Trials still CREATED or RUNNING change nothing.
// - The answer holds exactly current_request_number assignments, each with trial_name set.
//   Before answering, each trial's name and the call's total_request_number are written into
//   its metadata (katib.trial, katib.request). So a call Katib makes again (same
//   total_request_number: it never got the answer) gets the same trials under the same names,
//   and trials suggested by a call whose answer never went out (evoscaled stopped in between)
//   are handed out first by the next call: the study holds exactly the trials Katib asked for.
//
// Thread-safe: GetSuggestions calls run one at a time (Katib calls once per experiment at a
// time anyway); ValidateAlgorithmSettings only reads. `core` must outlive this object.
#ifndef EVOSCALE_SERVICE_KATIB_KATIB_SUGGESTION_H_
#define EVOSCALE_SERVICE_KATIB_KATIB_SUGGESTION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "katib/v1beta1/suggestion.pb.h"
#include "service/katib/katib_converter.h"
#include "service/study/study_core.h"

namespace evoscale::service {

class KatibSuggestion {
 public:
  explicit KatibSuggestion(StudyCore* core) : core_(core) {}

  // See the file comment. Errors: INVALID_ARGUMENT for a bad experiment or request numbers;
  // ALREADY_EXISTS for a study of the name with another spec; FAILED_PRECONDITION when the
  // study gives fewer suggestions than asked (its search space is spent, or someone set it
  // INACTIVE); whatever the study core answers otherwise. Costs one study-core call per
  // trial recorded or handed out, plus a listing of the study's trials.
  absl::StatusOr<::api::v1::beta1::GetSuggestionsReply> GetSuggestions(
      const ::api::v1::beta1::GetSuggestionsRequest& req) ABSL_LOCKS_EXCLUDED(mu_);

  // OK when evoscale can run the experiment as given: its algorithm and settings, search space
  // and objective, and no study of its name with another spec. INVALID_ARGUMENT naming the
  // field otherwise. Creates and changes nothing.
  absl::Status ValidateAlgorithmSettings(
      const ::api::v1::beta1::ValidateAlgorithmSettingsRequest& req);

 private:
  // The study's trials, and which of them Katib knows by which name.
  struct Trials {
    void Add(v1::Trial trial);
    std::vector<v1::Trial> all;                              // in id order
    absl::flat_hash_map<std::string, size_t> by_katib_name;  // katib.trial -> index in all
    int64_t max_id = 0;
  };

  // The experiment's study, created on the first call; its Katib metadata brought up to date.
  absl::StatusOr<v1::Study> FindOrCreateStudy(const KatibExperiment& experiment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Trials> ListTrials(const std::string& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records Katib's trial `trial` if it has ended and is not recorded yet; `trials` follows
  // what this writes.
  absl::Status Record(const KatibExperiment& experiment, const v1::Study& study,
                      const ::api::v1::beta1::Trial& trial, Trials* trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The `count` trials answering request `request` (total_request_number), named and marked
  // with it.
  absl::StatusOr<std::vector<v1::Trial>> HandOut(const KatibExperiment& experiment,
                                                 const v1::Study& study, int count, int64_t request,
                                                 const Trials& trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StudyCore* const core_;
  absl::Mutex mu_;  // held through each GetSuggestions
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_KATIB_KATIB_SUGGESTION_H_
