#include "service/katib/katib_suggestion.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace evoscale::service {
namespace {

namespace katib = ::api::v1::beta1;
using ::absl::StrCat;
using ::absl::StrFormat;

// SuggestTrials' client ids for Katib are "katib-<n>"; see HandOut.
constexpr absl::string_view kClientPrefix = "katib-";

const std::string* FindMetadata(const v1::Trial& trial, absl::string_view key) {
  auto it = trial.metadata().find(std::string(key));
  return it == trial.metadata().end() ? nullptr : &it->second;
}

bool IsFinal(v1::Trial::State s) {
  return s == v1::Trial::SUCCEEDED || s == v1::Trial::INFEASIBLE || s == v1::Trial::FAILED ||
         s == v1::Trial::STOPPED;
}

// Why a trial Katib reports ended did not succeed ("" when it did, with `measurement`).
std::string FailureOf(katib::TrialStatus::TrialConditionType condition,
                      const absl::StatusOr<v1::Measurement>& measurement) {
  const std::string& name = katib::TrialStatus::TrialConditionType_Name(condition);
  if (condition != katib::TrialStatus::SUCCEEDED && condition != katib::TrialStatus::EARLYSTOPPED) {
    return StrCat("Katib reported the trial ", name);
  }
  if (!measurement.ok()) {
    return StrCat("Katib reported the trial ", name, ", but ", measurement.status().message());
  }
  return "";
}

}  // namespace

absl::StatusOr<katib::GetSuggestionsReply> KatibSuggestion::GetSuggestions(
    const katib::GetSuggestionsRequest& req) {
  const int count = req.current_request_number();
  if (count < 1 || count > kMaxSuggestionCount) {
    return absl::InvalidArgumentError(
        StrFormat("current_request_number: %d must be in [1, %d]", count, kMaxSuggestionCount));
  }
  if (req.total_request_number() < count) {
    return absl::InvalidArgumentError(
        StrFormat("total_request_number: %d must be >= current_request_number %d (Katib sends the "
                  "experiment's requests so far, this call's included)",
                  req.total_request_number(), count));
  }
  absl::StatusOr<KatibExperiment> experiment = KatibExperiment::FromProto(req.experiment());
  if (!experiment.ok()) return experiment.status();

  absl::MutexLock lock(&mu_);
  absl::StatusOr<v1::Study> study = FindOrCreateStudy(*experiment);
  if (!study.ok()) return study.status();
  absl::StatusOr<Trials> trials = ListTrials(study->name());
  if (!trials.ok()) return trials.status();
  for (int i = 0; i < req.trials_size(); ++i) {
    if (absl::Status st = Record(*experiment, *study, req.trials(i), &*trials); !st.ok()) {
      return st;
    }
  }
  absl::StatusOr<std::vector<v1::Trial>> handed =
      HandOut(*experiment, *study, count, req.total_request_number(), *trials);
  if (!handed.ok()) return handed.status();

  katib::GetSuggestionsReply reply;
  for (const v1::Trial& trial : *handed) {
    absl::StatusOr<std::vector<katib::ParameterAssignment>> assignments =
        experiment->ToAssignments(trial);
    if (!assignments.ok()) return assignments.status();
    katib::GetSuggestionsReply::ParameterAssignments* out = reply.add_parameter_assignments();
    for (katib::ParameterAssignment& a : *assignments) *out->add_assignments() = std::move(a);
    out->set_trial_name(*FindMetadata(trial, kKatibTrialKey));
  }
  return reply;
}

absl::Status KatibSuggestion::ValidateAlgorithmSettings(
    const katib::ValidateAlgorithmSettingsRequest& req) {
  absl::StatusOr<KatibExperiment> experiment = KatibExperiment::FromProto(req.experiment());
  if (!experiment.ok()) return experiment.status();
  v1::ListStudiesRequest list;
  list.set_display_name(experiment->study().display_name());
  list.set_page_size(kMaxPageSize);
  absl::StatusOr<v1::ListStudiesResponse> studies = core_->Call(list);
  if (!studies.ok()) return studies.status();
  for (const v1::Study& study : studies->studies()) {
    if (!google::protobuf::util::MessageDifferencer::Equals(study.spec(),
                                                            experiment->study().spec())) {
      return absl::InvalidArgumentError(StrFormat(
          "experiment.name: \"%s\" is evoscale study \"%s\" (%s), made from another experiment "
          "spec; delete that study or give the experiment another name",
          experiment->name(), study.name(), study.display_name()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Study> KatibSuggestion::FindOrCreateStudy(const KatibExperiment& experiment) {
  v1::CreateStudyRequest create;
  *create.mutable_study() = experiment.study();
  absl::StatusOr<v1::Study> study = core_->Call(create);
  if (!study.ok()) return study.status();
  // Katib's keys follow the experiment (its goal may have changed); other keys are the user's.
  v1::UpdateMetadataRequest update;
  for (const auto& [key, value] : experiment.study().metadata()) {
    auto it = study->metadata().find(key);
    if (it == study->metadata().end() || it->second != value) (*update.mutable_set())[key] = value;
  }
  for (const auto& [key, value] : study->metadata()) {
    if (absl::StartsWith(key, "katib.") && !experiment.study().metadata().contains(key)) {
      update.add_remove(key);
    }
  }
  if (update.set().empty() && update.remove().empty()) return study;
  update.set_name(study->name());
  absl::StatusOr<v1::UpdateMetadataResponse> updated = core_->Call(update);
  if (!updated.ok()) return updated.status();
  *study->mutable_metadata() = updated->metadata();
  return study;
}

absl::StatusOr<KatibSuggestion::Trials> KatibSuggestion::ListTrials(const std::string& study) {
  Trials trials;
  v1::ListTrialsRequest list;
  list.set_parent(study);
  list.set_page_size(kMaxPageSize);
  for (;;) {
    absl::StatusOr<v1::ListTrialsResponse> page = core_->Call(list);
    if (!page.ok()) return page.status();
    for (v1::Trial& trial : *page->mutable_trials()) trials.Add(std::move(trial));
    if (page->next_page_token().empty()) return trials;
    list.set_page_token(page->next_page_token());
  }
}

void KatibSuggestion::Trials::Add(v1::Trial trial) {
  if (const std::string* name = FindMetadata(trial, kKatibTrialKey)) {
    by_katib_name[*name] = all.size();
  }
  max_id = std::max(max_id, trial.id());
  all.push_back(std::move(trial));
}

absl::Status KatibSuggestion::Record(const KatibExperiment& experiment, const v1::Study& study,
                                     const katib::Trial& trial, Trials* trials) {
  const katib::TrialStatus::TrialConditionType condition = trial.status().condition();
  if (condition == katib::TrialStatus::CREATED || condition == katib::TrialStatus::RUNNING ||
      condition == katib::TrialStatus::UNKNOWN || trial.name().empty()) {
    return absl::OkStatus();  // not ended (or not Katib's): nothing to record yet
  }
  const absl::StatusOr<v1::Measurement> measurement = experiment.ToMeasurement(trial.status());
  const std::string failure = FailureOf(condition, measurement);

  auto known = trials->by_katib_name.find(trial.name());
  if (known == trials->by_katib_name.end()) {
    // A trial evoscale did not suggest (its database is newer than the experiment, say): its
    // result is learnt, in one write keyed by its name. Failures and early-stopped runs are
    // not: they would take two writes, and teach the designers little.
    if (!failure.empty() || condition != katib::TrialStatus::SUCCEEDED) return absl::OkStatus();
    absl::StatusOr<google::protobuf::RepeatedPtrField<v1::Parameter>> parameters =
        experiment.ToParameters(trial.spec().parameter_assignments().assignments(),
                                "trial.spec.parameter_assignments.assignments");
    if (!parameters.ok()) return absl::OkStatus();  // not of the experiment's space as it is
    v1::CreateTrialRequest create;
    create.set_parent(study.name());
    v1::Trial* t = create.mutable_trial();
    *t->mutable_parameters() = *std::move(parameters);
    *t->mutable_final_measurement() = *measurement;
    t->set_client_id("katib");
    (*t->mutable_metadata())[std::string(kKatibTrialKey)] = trial.name();
    absl::StatusOr<v1::Trial> created = core_->Call(create);
    if (absl::IsInvalidArgument(created.status())) return absl::OkStatus();  // out of range
    if (!created.ok()) return created.status();
    trials->Add(*std::move(created));
    return absl::OkStatus();
  }

  v1::Trial& ours = trials->all[known->second];
  if (IsFinal(ours.state())) return absl::OkStatus();  // recorded by an earlier call
  if (condition == katib::TrialStatus::EARLYSTOPPED && failure.empty() &&
      ours.state() == v1::Trial::ACTIVE) {
    // Stopped, then completed: STOPPED, a shortened run that never counts as the best.
    v1::StopTrialRequest stop;
    stop.set_name(ours.name());
    absl::StatusOr<v1::Trial> stopped = core_->Call(stop);
    if (!stopped.ok()) return stopped.status();
  }
  v1::CompleteTrialRequest complete;
  complete.set_name(ours.name());
  if (failure.empty()) {
    *complete.mutable_final_measurement() = *measurement;
  } else {
    complete.set_trial_infeasible(true);
    complete.set_infeasible_reason(failure);
  }
  absl::StatusOr<v1::Trial> completed = core_->Call(complete);
  if (!completed.ok()) return completed.status();
  ours = *std::move(completed);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Trial>> KatibSuggestion::HandOut(const KatibExperiment& experiment,
                                                                const v1::Study& study, int count,
                                                                int64_t request,
                                                                const Trials& trials) {
  const std::string request_text = StrCat(request);
  std::vector<v1::Trial> out;
  auto take = [&](bool (*wanted)(const v1::Trial&, const std::string&)) {
    for (const v1::Trial& t : trials.all) {
      if (static_cast<int>(out.size()) == count) return;
      if (t.state() == v1::Trial::ACTIVE && wanted(t, request_text)) out.push_back(t);
    }
  };
  // 1. This request's trials, answered before: Katib asks again, so it never got the answer.
  take([](const v1::Trial& t, const std::string& request) {
    const std::string* answered = FindMetadata(t, kKatibRequestKey);
    return answered != nullptr && *answered == request;
  });
  // 2. Trials suggested by a call that never answered (evoscaled stopped between suggesting
  // and answering): Katib never saw them.
  take([](const v1::Trial& t, const std::string&) {
    return FindMetadata(t, kKatibTrialKey) == nullptr &&
           absl::StartsWith(t.client_id(), kClientPrefix);
  });
  // 3. New suggestions, for a client id no trial has: SuggestTrials hands a client its own
  // ACTIVE trials first, and those of earlier calls are Katib's or taken above. "katib-<n>"
  // with n above every trial id is new: a call that made trials made them with ids >= its n.
  if (static_cast<int>(out.size()) < count) {
    v1::SuggestTrialsRequest suggest;
    suggest.set_parent(study.name());
    suggest.set_suggestion_count(count - static_cast<int>(out.size()));
    suggest.set_client_id(StrCat(kClientPrefix, trials.max_id + 1));
    absl::StatusOr<v1::SuggestTrialsResponse> suggested = core_->Call(suggest);
    if (!suggested.ok()) return suggested.status();
    for (v1::Trial& t : *suggested->mutable_trials()) out.push_back(std::move(t));
    if (static_cast<int>(out.size()) < count) {
      return absl::FailedPreconditionError(
          StrFormat("study \"%s\" (%s) gave %d of the %d suggestions Katib asked for: %s",
                    study.name(), study.display_name(), out.size(), count,
                    suggested->study_state() == v1::Study::ACTIVE ? "its search space is spent"
                                                                  : "it is not ACTIVE"));
    }
  }
  // 4. Each trial's Katib name and this request, written before the answer goes out.
  for (v1::Trial& t : out) {
    const std::string* named = FindMetadata(t, kKatibTrialKey);
    const std::string* answered = FindMetadata(t, kKatibRequestKey);
    if (named != nullptr && answered != nullptr && *answered == request_text) continue;
    v1::UpdateMetadataRequest update;
    update.set_name(t.name());
    (*update.mutable_set())[std::string(kKatibTrialKey)] =
        named != nullptr ? *named : experiment.TrialName(study, t.id());
    (*update.mutable_set())[std::string(kKatibRequestKey)] = request_text;
    absl::StatusOr<v1::UpdateMetadataResponse> updated = core_->Call(update);
    if (!updated.ok()) return updated.status();
    *t.mutable_metadata() = updated->metadata();
  }
  return out;
}

}  // namespace evoscale::service
