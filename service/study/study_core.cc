#include "service/study/study_core.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "search/early_stopping.h"
#include "search/importance.h"
#include "search/types.h"
#include "service/study/internal/handout.h"
#include "service/study/internal/names.h"
#include "service/study/internal/proto_time.h"
#include "service/study/internal/request_checks.h"
#include "service/study/internal/study_state.h"
#include "service/study/study_converter.h"

namespace evoscale::service {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using internal::NotFoundStudy;
using internal::StudyState;
using internal::ToProto;
using internal::TrialStateName;

namespace {

// The payload of StudyElsewhereError: the owner's address.
constexpr absl::string_view kOwnerPayload = "type.evoscale.dev/study-owner";

bool IsFinal(v1::Trial::State s) {
  return s == v1::Trial::SUCCEEDED || s == v1::Trial::INFEASIBLE || s == v1::Trial::FAILED ||
         s == v1::Trial::STOPPED;
}


}  // namespace

// ---- Finding and locking -----------------------------------------------------------------
// Each holds the study's mutex from construction to destruction when the study was found
// (deleted or not), so a call's checks and writes see one state of the study. Check ok()
// before any other member.

class StudyCore::LockedStudy {
 public:
  // Finds the study of `name` (a study's name; errors name `field`) and locks it; NOT_FOUND
  // when it was deleted.
  LockedStudy(StudyCore& core, absl::string_view name, absl::string_view field) {
    // A study found lost (another replica took it over) is looked up again: it has left the
    // cache, so the next lookup adopts it or says where it is.
    for (int attempt = 0; attempt < kLookups; ++attempt) {
      absl::StatusOr<std::shared_ptr<StudyState>> found = core.FindStudy(name, field);
      if (!found.ok()) {
        status_ = found.status();
        return;
      }
      if (Lock(*std::move(found))) return;
    }
  }
  LockedStudy(const LockedStudy&) = delete;
  LockedStudy& operator=(const LockedStudy&) = delete;
  ~LockedStudy() {
    if (study_ != nullptr) study_->mu.Unlock();
  }

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  StudyState& operator*() const { return *study_; }
  StudyState* operator->() const { return study_.get(); }

 protected:
  // How often a call looks a lost study up again before it gives up (UNAVAILABLE).
  static constexpr int kLookups = 3;

  LockedStudy() = default;
  // Locks `study`; false (and unlocked) when it was lost meanwhile.
  bool Lock(std::shared_ptr<StudyState> study) {
    study_ = std::move(study);
    study_->mu.Lock();
    if (study_->lost) {
      study_->mu.Unlock();
      status_ = StudyElsewhereError(study_->id, "");
      study_.reset();
      return false;
    }
    status_ = study_->deleted ? NotFoundStudy(study_->id) : absl::OkStatus();
    return true;
  }

  std::shared_ptr<StudyState> study_;  // its mutex held when not null
  absl::Status status_;
};

class StudyCore::LockedTrial : public LockedStudy {
 public:
  // Finds the trial of `name` (a trial's name; errors name `field`) and locks its study;
  // NOT_FOUND when the study or the trial does not exist or was deleted.
  LockedTrial(StudyCore& core, absl::string_view name, absl::string_view field) {
    absl::StatusOr<std::pair<std::shared_ptr<StudyState>, int64_t>> found;
    for (int attempt = 0; attempt < kLookups; ++attempt) {
      found = core.FindTrial(name, field);
      if (!found.ok()) {
        status_ = found.status();
        return;
      }
      if (Lock(std::move(found->first))) break;
    }
    if (!status_.ok()) return;
    id_ = found->second;
    if (id_ > static_cast<int64_t>(study_->trials.size()) ||
        StudyState::IsTombstone(study_->trial(id_))) {
      status_ = absl::NotFoundError(absl::StrFormat("trial \"%s\" not found", name));
    }
  }

  int64_t id() const { return id_; }
  // The trial as the cache holds it: it changes when a write of it is applied.
  const v1::Trial& trial() const { return study_->trial(id_); }

 private:
  int64_t id_ = 0;
};

absl::StatusOr<std::shared_ptr<StudyState>> StudyCore::FindStudy(absl::string_view name,
                                                                 absl::string_view field) {
  absl::StatusOr<int64_t> id = internal::ParseStudyName(name, field);
  if (!id.ok()) return id.status();
  return CachedOrAdopted(*id);
}

absl::StatusOr<std::pair<std::shared_ptr<StudyState>, int64_t>> StudyCore::FindTrial(
    absl::string_view name, absl::string_view field) {
  absl::StatusOr<std::pair<int64_t, int64_t>> ids = internal::ParseTrialName(name, field);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::shared_ptr<StudyState>> study = CachedOrAdopted(ids->first);
  if (!study.ok()) return study.status();
  return std::make_pair(*std::move(study), ids->second);
}

absl::StatusOr<std::shared_ptr<StudyState>> StudyCore::CachedOrAdopted(int64_t id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = studies_.find(id);
    if (it != studies_.end()) return it->second;
    if (leases_ == nullptr) return NotFoundStudy(id);
  }
  // Take the lease first, then read: a takeover waits for the former owner's write in flight
  // (the fence holds the lease row), so what is read holds every write it acknowledged.
  absl::StatusOr<StudyLeases::Holder> holder = leases_->Acquire(id);
  if (!holder.ok()) return holder.status();
  if (!holder->ours()) return StudyElsewhereError(id, holder->address);
  absl::StatusOr<std::shared_ptr<StudyState>> state = ReplayStored(id);
  if (absl::IsNotFound(state.status())) leases_->Release(id).IgnoreError();
  if (!state.ok()) return state.status();
  (*state)->epoch = holder->epoch;
  absl::MutexLock lock(&mu_);
  // Another call may have adopted it meanwhile: the first one in stays.
  return studies_.try_emplace(id, *std::move(state)).first->second;
}

void StudyCore::DropStudy(int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = studies_.find(id);
  if (it == studies_.end()) return;
  it->second->lost = true;
  studies_.erase(it);
}

absl::Status StudyElsewhereError(int64_t study_id, absl::string_view address) {
  absl::Status st = absl::UnavailableError(
      address.empty()
          ? absl::StrFormat("study \"studies/%d\" moved to another replica; retry", study_id)
          : absl::StrFormat("study \"studies/%d\" is served by the replica at %s", study_id,
                            address));
  st.SetPayload(kOwnerPayload, absl::Cord(address));
  return st;
}

std::optional<std::string> StudyOwnerAddress(const absl::Status& status) {
  auto owner = status.GetPayload(kOwnerPayload);
  if (!owner.has_value()) return std::nullopt;
  return std::string(*owner);
}

// ---- Loading -----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<StudyCore>> StudyCore::Create(Store* store, Clock* clock) {
  std::unique_ptr<StudyCore> core(new StudyCore(store, clock, nullptr));
  if (absl::Status st = core->Load(); !st.ok()) return st;
  return core;
}

absl::StatusOr<std::unique_ptr<StudyCore>> StudyCore::CreateWithLeases(Store* store,
                                                                       Clock* clock,
                                                                       StudyLeases* leases) {
  std::unique_ptr<StudyCore> core(new StudyCore(store, clock, leases));
  leases->set_on_lost([core = core.get()](int64_t study_id) { core->DropStudy(study_id); });
  return core;
}

absl::Status StudyCore::Load() {
  absl::StatusOr<std::vector<StoredStudy>> stored = store_->LoadAll();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<int64_t> next_id = store_->NextStudyId();
  if (!next_id.ok()) return next_id.status();
  absl::MutexLock lock(&mu_);
  next_study_id_ = *next_id;
  for (StoredStudy& s : *stored) {
    absl::StatusOr<std::shared_ptr<StudyState>> state = StudyState::Replay(std::move(s));
    if (!state.ok()) return state.status();
    next_study_id_ = std::max(next_study_id_, (*state)->id + 1);
    studies_.emplace((*state)->id, *std::move(state));
  }
  return absl::OkStatus();
}

// ---- Studies -----------------------------------------------------------------------------

StudyCore::Applied<absl::StatusOr<v1::Study>> StudyCore::Apply(const v1::CreateStudyRequest& req) {
  const v1::Study& in = req.study();
  if (in.display_name().size() > kMaxNameLength) {
    return InvalidArgumentError(StrCat("study.display_name: longer than ", kMaxNameLength));
  }
  absl::StatusOr<search::ProblemStatement> problem = ToProblem(in.spec());
  if (!problem.ok()) {
    return absl::Status(problem.status().code(), StrCat("study.", problem.status().message()));
  }
  if (absl::Status st = internal::ValidateMetadata(in.metadata(), "study.metadata"); !st.ok()) {
    return st;
  }
  if (leases_ != nullptr) return CreateStudyAcrossReplicas(in, *std::move(problem));
  absl::MutexLock lock(&mu_);
  // Get-or-create by display name (Vizier's semantics): creators hold mu_, so of many
  // concurrent creators of one name the first creates the study and the others find it.
  if (!in.display_name().empty()) {
    for (const auto& [id, other] : studies_) {
      if (other->display_name != in.display_name()) continue;
      absl::MutexLock other_lock(&other->mu);
      if (other->deleted) continue;
      if (google::protobuf::util::MessageDifferencer::Equals(other->study.spec(), in.spec())) {
        return other->StudyWithCounts();
      }
      return internal::DisplayNameTaken(other->study, in.spec());
    }
  }
  absl::StatusOr<std::shared_ptr<StudyState>> state =
      NewStudy(next_study_id_, in, *std::move(problem));
  if (!state.ok()) return state.status();
  absl::MutexLock study_lock(&(*state)->mu);
  WriteBatch batch;
  batch.PutStudy((*state)->id, (*state)->study);
  absl::StatusOr<WriteTicket> written = Commit(std::move(batch), nullptr);
  if (!written.ok()) return written.status();
  ++next_study_id_;
  studies_.emplace((*state)->id, *state);
  return {(*state)->StudyWithCounts(), *written};
}

absl::StatusOr<std::shared_ptr<StudyState>> StudyCore::NewStudy(int64_t id, const v1::Study& in,
                                                                search::ProblemStatement problem) {
  auto state = std::make_shared<StudyState>(id, in.display_name());
  absl::MutexLock study_lock(&state->mu);
  state->Configure(in.spec(), std::move(problem));
  if (absl::Status st = state->RebuildDesigner(); !st.ok()) {
    return absl::Status(st.code(), StrCat("study.spec.algorithm: ", st.message()));
  }
  v1::Study& study = state->study;
  study.set_name(StrCat("studies/", state->id));
  study.set_display_name(in.display_name());
  *study.mutable_spec() = in.spec();
  *study.mutable_metadata() = in.metadata();
  study.set_state(v1::Study::ACTIVE);
  *study.mutable_create_time() = ToProto(clock_->Now());
  return state;
}

StudyCore::Applied<absl::StatusOr<v1::Study>> StudyCore::Apply(const v1::GetStudyRequest& req) {
  LockedStudy study(*this, req.name(), "name");
  if (!study.ok()) return study.status();
  return study->StudyWithCounts();
}

StudyCore::Applied<absl::StatusOr<std::string>> StudyCore::Apply(const ReadStudyRequest& req) {
  LockedStudy study(*this, req.name, "name");
  if (!study.ok() && req.stored_if_elsewhere && StudyOwnerAddress(study.status()).has_value()) {
    return ReadStoredStudy(req);
  }
  if (!study.ok()) return study.status();
  return req.fn(study->StudyWithCounts(), study->trials, study->version);
}

StudyCore::Applied<absl::StatusOr<v1::ListStudiesResponse>> StudyCore::Apply(
    const v1::ListStudiesRequest& req) {
  absl::StatusOr<int> page_size = internal::PageSize(req.page_size());
  if (!page_size.ok()) return page_size.status();
  absl::StatusOr<int64_t> start = internal::PageStart(req.page_token());
  if (!start.ok()) return start.status();
  if (leases_ != nullptr) return ListStoredStudies(req, *page_size, *start);
  std::vector<std::shared_ptr<StudyState>> page;
  bool more = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = studies_.upper_bound(*start); it != studies_.end(); ++it) {
      if (static_cast<int>(page.size()) == *page_size) {
        more = true;
        break;
      }
      if (!req.display_name().empty() && it->second->display_name != req.display_name()) {
        continue;
      }
      page.push_back(it->second);
    }
  }
  v1::ListStudiesResponse resp;
  for (const auto& s : page) {
    absl::MutexLock lock(&s->mu);
    if (!s->deleted) *resp.add_studies() = s->StudyWithCounts();
  }
  if (more && !page.empty()) resp.set_next_page_token(StrCat(page.back()->id));
  return resp;
}

StudyCore::Applied<absl::Status> StudyCore::Apply(const v1::DeleteStudyRequest& req) {
  auto state = FindStudy(req.name(), "name");
  if (!state.ok()) return state.status();
  // The core's mutex first, as CreateStudy takes them: the study leaves studies_ as it goes.
  absl::MutexLock lock(&mu_);
  absl::MutexLock study_lock(&(*state)->mu);
  if ((*state)->deleted) return NotFoundStudy((*state)->id);
  WriteBatch batch;
  batch.DeleteStudy((*state)->id);
  // Fenced here rather than by Commit, which would take mu_ (held) to drop a lost study: the
  // study leaves the cache below either way.
  if ((*state)->epoch > 0) batch.Fence((*state)->id, (*state)->epoch);
  absl::StatusOr<WriteTicket> written = Commit(std::move(batch), nullptr);
  if (!written.ok()) return written.status();
  (*state)->deleted = true;
  studies_.erase((*state)->id);
  return {absl::OkStatus(), *written};
}

StudyCore::Applied<absl::StatusOr<v1::Study>> StudyCore::Apply(
    const v1::SetStudyStateRequest& req) {
  if (req.state() != v1::Study::ACTIVE && req.state() != v1::Study::INACTIVE &&
      req.state() != v1::Study::COMPLETED) {
    return InvalidArgumentError(
        StrCat("state: must be ACTIVE, INACTIVE or COMPLETED, got ", req.state()));
  }
  LockedStudy study(*this, req.name(), "name");
  if (!study.ok()) return study.status();
  v1::Study next = study->study;
  next.set_state(req.state());
  absl::StatusOr<WriteTicket> written = CommitStudy(*study, std::move(next));
  if (!written.ok()) return written.status();
  return {study->StudyWithCounts(), *written};
}

StudyCore::Applied<absl::StatusOr<v1::SuggestTrialsResponse>> StudyCore::Apply(
    const v1::SuggestTrialsRequest& req) {
  if (req.suggestion_count() < 1 || req.suggestion_count() > kMaxSuggestionCount) {
    return InvalidArgumentError(absl::StrFormat("suggestion_count: %d must be in [1, %d]",
                                                req.suggestion_count(), kMaxSuggestionCount));
  }
  if (req.client_id().empty()) return InvalidArgumentError("client_id: must not be empty");
  if (req.client_id().size() > kMaxNameLength) {
    return InvalidArgumentError(StrCat("client_id: longer than ", kMaxNameLength));
  }
  LockedStudy study(*this, req.parent(), "parent");
  if (!study.ok()) return study.status();
  if (study->study.state() == v1::Study::INACTIVE) {
    return absl::FailedPreconditionError(StrCat(
        "study \"", study->study.name(), "\" is INACTIVE; set it ACTIVE to get suggestions"));
  }
  internal::Handout handout(*study, req.client_id(), req.suggestion_count(), clock_->Now());
  handout.HandBackActive();
  handout.HandOutRequested();
  handout.PromoteStopped();
  if (absl::Status st = handout.SuggestNew(); !st.ok()) return st;
  absl::StatusOr<WriteTicket> written = Commit(handout.Batch(), &*study);
  if (!written.ok()) {
    handout.Abandon();
    return written.status();
  }
  return {std::move(handout).Apply(), *written};
}

// ---- Trials ------------------------------------------------------------------------------

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::Apply(const v1::CreateTrialRequest& req) {
  LockedStudy study(*this, req.parent(), "parent");
  if (!study.ok()) return study.status();
  StudyState& s = *study;
  absl::StatusOr<search::ParameterDict> params =
      ToParameterDict(s.problem.space, req.trial().parameters(), "trial.parameters");
  if (!params.ok()) return params.status();
  absl::StatusOr<v1::Trial> ended = internal::EndedTrial(s.problem, req.trial());
  if (!ended.ok()) return ended.status();
  const int64_t max_trials = s.study.spec().max_trials();
  if (absl::Status st = internal::ValidateMetadata(req.trial().metadata(), "trial.metadata");
      !st.ok()) {
    return st;
  }
  if (max_trials > 0 && s.live_trials() >= max_trials) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "study \"%s\" already holds max_trials=%d trials", s.study.name(), max_trials));
  }
  if (ended->state() == v1::Trial::ACTIVE && s.budget_spent()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("study \"%s\" has spent its budget_core_seconds=%g", s.study.name(),
                        s.budget_core_seconds));
  }
  const google::protobuf::Timestamp now = ToProto(clock_->Now());
  v1::Trial t;
  t.set_id(static_cast<int64_t>(s.trials.size()) + 1);
  t.set_name(StrCat(s.study.name(), "/trials/", t.id()));
  SetParameters(*params, &t);
  t.set_client_id(req.trial().client_id());
  *t.mutable_metadata() = req.trial().metadata();
  *t.mutable_resources() = s.study.spec().trial_template().resources();
  t.set_state(ended->state());
  *t.mutable_measurements() = ended->measurements();
  int64_t seq = 0;
  if (ended->state() == v1::Trial::ACTIVE) {  // its client runs it from now
    *t.mutable_start_time() = now;
    *t.mutable_heartbeat_time() = now;
  } else if (ended->state() != v1::Trial::REQUESTED) {  // it ended elsewhere
    if (ended->has_final_measurement()) *t.mutable_final_measurement() = ended->final_measurement();
    t.set_infeasible_reason(ended->infeasible_reason());
    *t.mutable_start_time() = now;
    *t.mutable_end_time() = now;
    seq = s.next_completion_seq();
  }
  absl::StatusOr<WriteTicket> written = CommitTrial(s, t, seq);
  if (!written.ok()) return written.status();
  return {std::move(t), *written};
}

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::Apply(const v1::GetTrialRequest& req) {
  LockedTrial trial(*this, req.name(), "name");
  if (!trial.ok()) return trial.status();
  return trial.trial();
}

StudyCore::Applied<absl::StatusOr<v1::ListTrialsResponse>> StudyCore::Apply(
    const v1::ListTrialsRequest& req) {
  absl::StatusOr<int> page_size = internal::PageSize(req.page_size());
  if (!page_size.ok()) return page_size.status();
  absl::StatusOr<int64_t> start = internal::PageStart(req.page_token());
  if (!start.ok()) return start.status();
  if (!v1::Trial::State_IsValid(req.state())) {
    return InvalidArgumentError(StrCat("state: unknown trial state ", req.state()));
  }
  LockedStudy study(*this, req.parent(), "parent");
  if (!study.ok()) return study.status();
  v1::ListTrialsResponse resp;
  const int64_t n = static_cast<int64_t>(study->trials.size());
  for (int64_t id = *start + 1; id <= n; ++id) {
    const v1::Trial& t = study->trial(id);
    if (StudyState::IsTombstone(t)) continue;
    if (req.state() != v1::Trial::STATE_UNSPECIFIED && t.state() != req.state()) continue;
    if (resp.trials_size() == *page_size) {
      resp.set_next_page_token(StrCat(resp.trials(resp.trials_size() - 1).id()));
      break;
    }
    *resp.add_trials() = t;
  }
  return resp;
}

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::Apply(
    const v1::AddTrialMeasurementRequest& req) {
  if (absl::Status st = ValidateMeasurement(req.measurement(), "measurement"); !st.ok()) {
    return st;
  }
  if (req.measurement().metrics().empty()) {
    return InvalidArgumentError("measurement.metrics: at least one metric is required");
  }
  LockedTrial trial(*this, req.trial_name(), "trial_name");
  if (!trial.ok()) return trial.status();
  if (absl::Status st =
          internal::RequireSomeMetric(trial->problem, req.measurement(), "measurement");
      !st.ok()) {
    return st;
  }
  const v1::Trial& t = trial.trial();
  if (t.state() != v1::Trial::ACTIVE && t.state() != v1::Trial::STOPPING) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is %s; measurements need ACTIVE or STOPPING", t.name(),
                        TrialStateName(t.state())));
  }
  if (t.measurements_size() >= kMaxMeasurementsPerTrial) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "trial \"%s\" already holds %d measurements", t.name(), kMaxMeasurementsPerTrial));
  }
  if (absl::Status st = internal::RequireElapsedForward(t, req.measurement(), "measurement");
      !st.ok()) {
    return st;
  }
  v1::Trial n = t;
  *n.add_measurements() = req.measurement();
  *n.mutable_heartbeat_time() = ToProto(clock_->Now());
  absl::StatusOr<WriteTicket> written = CommitTrial(*trial, n, 0);
  if (!written.ok()) return written.status();
  return {std::move(n), *written};
}

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::Apply(
    const v1::CompleteTrialRequest& req) {
  if (absl::Status st = ValidateMeasurement(req.final_measurement(), "final_measurement");
      !st.ok()) {
    return st;
  }
  if (req.infeasible_reason().size() > 4096) {
    return InvalidArgumentError("infeasible_reason: longer than 4096 bytes");
  }
  if (absl::Status st = ValidateUsage(req.usage(), "usage"); !st.ok()) return st;
  LockedTrial trial(*this, req.name(), "name");
  if (!trial.ok()) return trial.status();
  const v1::Trial& t = trial.trial();
  if (IsFinal(t.state())) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is already %s", t.name(), TrialStateName(t.state())));
  }
  v1::Trial n = t;
  const google::protobuf::Timestamp now = ToProto(clock_->Now());
  if (req.trial_infeasible()) {
    n.set_state(v1::Trial::INFEASIBLE);
    n.set_infeasible_reason(req.infeasible_reason());
    if (req.final_measurement().metrics_size() > 0) {
      *n.mutable_final_measurement() = req.final_measurement();
    }
  } else {
    v1::Measurement fm = req.final_measurement();
    // As Vizier: without a final measurement, the last intermediate one is final.
    if (fm.metrics().empty() && t.measurements_size() > 0) {
      fm = t.measurements(t.measurements_size() - 1);
    }
    if (fm.metrics().empty()) {
      return InvalidArgumentError(
          "final_measurement.metrics: empty, and the trial has no measurement to use instead");
    }
    if (absl::Status st = internal::RequireMetrics(trial->problem, fm, "final_measurement");
        !st.ok()) {
      return st;
    }
    // A trial stopped early ends STOPPED: its final measurement is that of a shortened run.
    n.set_state(t.state() == v1::Trial::STOPPING ? v1::Trial::STOPPED : v1::Trial::SUCCEEDED);
    *n.mutable_final_measurement() = std::move(fm);
  }
  if (req.has_usage()) *n.mutable_usage() = req.usage();
  if (!n.has_start_time()) *n.mutable_start_time() = now;
  *n.mutable_end_time() = now;
  *n.mutable_heartbeat_time() = now;
  absl::StatusOr<WriteTicket> written = CommitTrial(*trial, n, trial->next_completion_seq());
  if (!written.ok()) return written.status();
  return {std::move(n), *written};
}

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::Apply(const RerunTrialRequest& req) {
  if (absl::Status st = ValidateResources(req.resources, "resources"); !st.ok()) return st;
  if (req.oom_kills < 0) return InvalidArgumentError("oom_kills: must be >= 0");
  LockedTrial trial(*this, req.name, "name");
  if (!trial.ok()) return trial.status();
  const v1::Trial& t = trial.trial();
  if (t.state() != v1::Trial::ACTIVE) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is %s; only an ACTIVE trial runs again", t.name(),
                        TrialStateName(t.state())));
  }
  v1::Trial n = t;
  *n.mutable_resources() = req.resources;
  for (const auto& [key, value] : req.metadata) n.mutable_metadata()->insert({key, value});
  if (!req.keep_measurements) n.clear_measurements();
  n.mutable_usage()->set_oom_kills(t.usage().oom_kills() + req.oom_kills);
  *n.mutable_heartbeat_time() = ToProto(clock_->Now());
  absl::StatusOr<WriteTicket> written = CommitTrial(*trial, n, 0);
  if (!written.ok()) return written.status();
  return {std::move(n), *written};
}

StudyCore::Applied<absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse>> StudyCore::Apply(
    const v1::CheckTrialEarlyStoppingStateRequest& req) {
  LockedTrial trial(*this, req.trial_name(), "trial_name");
  if (!trial.ok()) return trial.status();
  const v1::Trial& t = trial.trial();
  v1::CheckTrialEarlyStoppingStateResponse resp;
  if (t.state() == v1::Trial::STOPPING) {
    resp.set_should_stop(true);
    return resp;
  }
  if (t.state() != v1::Trial::ACTIVE ||
      trial->early_stopping.policy == search::EarlyStoppingPolicy::kNone) {
    return resp;
  }
  resp.set_should_stop(trial->PolicyStops(t));
  if (!resp.should_stop()) return resp;
  // As Vizier: the decision is kept (the trial is STOPPING), so the client's CompleteTrial
  // ends it STOPPED and later checks answer the same.
  Applied<absl::StatusOr<v1::Trial>> stopping = MarkStopping(*trial, t, /*by_policy=*/true);
  if (!stopping.result.ok()) return stopping.result.status();
  return {std::move(resp), stopping.written};
}

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::Apply(const v1::StopTrialRequest& req) {
  LockedTrial trial(*this, req.name(), "name");
  if (!trial.ok()) return trial.status();
  const v1::Trial& t = trial.trial();
  if (t.state() == v1::Trial::STOPPING) return t;
  if (t.state() != v1::Trial::ACTIVE) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is %s; only ACTIVE trials can be stopped", t.name(),
                        TrialStateName(t.state())));
  }
  return MarkStopping(*trial, t, /*by_policy=*/false);
}

StudyCore::Applied<absl::StatusOr<v1::Trial>> StudyCore::MarkStopping(StudyState& study,
                                                                      const v1::Trial& t,
                                                                      bool by_policy) {
  v1::Trial n = t;
  n.set_state(v1::Trial::STOPPING);
  n.set_policy_stopped(by_policy);
  absl::StatusOr<WriteTicket> written = CommitTrial(study, n, 0);
  if (!written.ok()) return written.status();
  return {std::move(n), *written};
}

StudyCore::Applied<absl::Status> StudyCore::Apply(const v1::DeleteTrialRequest& req) {
  LockedTrial trial(*this, req.name(), "name");
  if (!trial.ok()) return trial.status();
  v1::Trial tombstone;
  tombstone.set_id(trial.id());
  tombstone.set_name(trial.trial().name());
  absl::StatusOr<WriteTicket> written = CommitTrial(*trial, tombstone, 0);
  if (!written.ok()) return written.status();
  return {absl::OkStatus(), *written};
}

StudyCore::Applied<absl::StatusOr<v1::UpdateMetadataResponse>> StudyCore::Apply(
    const v1::UpdateMetadataRequest& req) {
  v1::UpdateMetadataResponse resp;
  if (!absl::StrContains(req.name(), "/trials/")) {
    LockedStudy study(*this, req.name(), "name");
    if (!study.ok()) return study.status();
    v1::Study next = study->study;
    if (absl::Status st = internal::UpdateMetadataMap(req, next.mutable_metadata()); !st.ok()) {
      return st;
    }
    absl::StatusOr<WriteTicket> written = CommitStudy(*study, std::move(next));
    if (!written.ok()) return written.status();
    *resp.mutable_metadata() = study->study.metadata();
    return {std::move(resp), *written};
  }
  LockedTrial trial(*this, req.name(), "name");
  if (!trial.ok()) return trial.status();
  v1::Trial n = trial.trial();
  if (absl::Status st = internal::UpdateMetadataMap(req, n.mutable_metadata()); !st.ok()) {
    return st;
  }
  // The trial keeps its place in the completion order.
  absl::StatusOr<WriteTicket> written =
      CommitTrial(*trial, n, trial->completion_seq[trial.id() - 1]);
  if (!written.ok()) return written.status();
  *resp.mutable_metadata() = n.metadata();
  return {std::move(resp), *written};
}

// ---- Analysis ----------------------------------------------------------------------------

StudyCore::Applied<absl::StatusOr<v1::GetParameterImportanceResponse>> StudyCore::Apply(
    const v1::GetParameterImportanceRequest& req) {
  LockedStudy study(*this, req.parent(), "parent");
  if (!study.ok()) return study.status();
  StudyState& s = *study;
  // Cached per metric until the study's next change ("" is the primary metric's entry).
  if (auto cached = s.importance.find(req.metric());
      cached != s.importance.end() && cached->second.first == s.version) {
    return cached->second.second;
  }
  absl::StatusOr<v1::GetParameterImportanceResponse> resp =
      ParameterImportanceOf(s.problem, s.trials, req.metric());
  if (resp.ok()) s.importance[req.metric()] = {s.version, *resp};
  return resp;
}

StudyCore::Applied<absl::StatusOr<v1::ListOptimalTrialsResponse>> StudyCore::Apply(
    const v1::ListOptimalTrialsRequest& req) {
  LockedStudy study(*this, req.parent(), "parent");
  if (!study.ok()) return study.status();
  v1::ListOptimalTrialsResponse resp;
  for (int64_t id : OptimalTrialIds(study->problem.metrics, study->trials)) {
    *resp.add_optimal_trials() = study->trial(id);
  }
  return resp;
}

TrialCounts StudyCore::Counts() {
  std::vector<std::shared_ptr<StudyState>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : studies_) all.push_back(s);
  }
  TrialCounts c;
  for (const auto& s : all) {
    absl::MutexLock lock(&s->mu);
    if (s->deleted) continue;
    ++c.studies_by_state[s->study.state()];
    for (const v1::Trial& t : s->trials) {
      if (!StudyState::IsTombstone(t)) ++c.by_state[t.state()];
    }
  }
  c.store_writes = static_cast<int64_t>(store_->last_ticket());
  c.store_commits = store_->commits();
  c.store_checkpoint_failures = store_->checkpoint_failures();
  return c;
}

// ---- Writes and durability ---------------------------------------------------------------
// With a store that defers syncs (kPowerLoss), a mutation is applied to the cache and queued
// under the study's lock, and the call waits for its fsync after the lock is released, so
// concurrent writers of one study share fsyncs (group commit). Reads wait for the last queued
// write, so no answer ever shows a write that is not yet durable. With kProcessCrash, Commit
// writes synchronously and Call/CallAsync add nothing.

absl::StatusOr<StudyCore::WriteTicket> StudyCore::Commit(WriteBatch batch,
                                                         const StudyState* study) {
  const int64_t fenced = study != nullptr && study->epoch > 0 ? study->id : 0;
  if (fenced != 0) batch.Fence(study->id, study->epoch);
  if (!store_->defers_sync()) {
    if (absl::Status st = store_->Write(std::move(batch)); !st.ok()) {
      if (fenced != 0 && IsLeaseLost(st)) DropStudy(fenced);
      return st;
    }
    return WriteTicket{};
  }
  absl::StatusOr<uint64_t> ticket = store_->Enqueue(std::move(batch));
  if (!ticket.ok()) return ticket.status();
  return WriteTicket{.store_ticket = *ticket, .fenced_study = fenced};
}

absl::StatusOr<StudyCore::WriteTicket> StudyCore::CommitTrial(StudyState& study, v1::Trial& t,
                                                              int64_t seq) {
  if (!StudyState::IsTombstone(t)) t.set_core_seconds(TrialCoreSeconds(t));
  WriteBatch batch;
  batch.PutTrial(study.id, t, seq);
  absl::StatusOr<WriteTicket> written = Commit(std::move(batch), &study);
  if (written.ok()) study.Apply(t, seq);
  return written;
}

absl::StatusOr<StudyCore::WriteTicket> StudyCore::CommitStudy(StudyState& study, v1::Study next) {
  WriteBatch batch;
  batch.PutStudy(study.id, next);
  absl::StatusOr<WriteTicket> written = Commit(std::move(batch), &study);
  if (written.ok()) study.study = std::move(next);
  return written;
}

void StudyCore::WhenDurable(WriteTicket written, std::function<void(absl::Status)> then) {
  if (!store_->defers_sync()) {
    then(absl::OkStatus());
    return;
  }
  const uint64_t ticket = written.store_ticket != 0 ? written.store_ticket : store_->last_ticket();
  if (written.fenced_study == 0) {
    store_->OnDurable(ticket, std::move(then));
    return;
  }
  // The cache holds the write already: when the lease fenced it off, the study is stale here.
  store_->OnDurable(ticket, [this, study = written.fenced_study,
                             then = std::move(then)](absl::Status st) {
    if (IsLeaseLost(st)) DropStudy(study);
    then(std::move(st));
  });
}

}  // namespace evoscale::service
