// StudyCore: the study service's logic, independent of gRPC. Every mutating call validates
// first, then writes to the Store, then updates the in-memory cache; so an error changes
// nothing, and an acknowledged call is durable. With durability "process" the write commits
// before the cache changes. With "power" it is queued and the cache changes at once (under
// the study's lock, so the queue keeps the cache's order); the call answers only once the
// write's fsync is done, and any write the database refuses stops the store (UNAVAILABLE
// until a restart reloads from the database), so no answer ever shows what is not durable.
#ifndef EVOSCALE_SERVICE_STUDY_STUDY_CORE_H_
#define EVOSCALE_SERVICE_STUDY_STUDY_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include "evoscale/v1/study.pb.h"
#include "search/types.h"
#include "service/common/clock.h"
#include "service/store/store.h"
#include "service/store/study_leases.h"
#include "service/study/study_limits.h"

namespace evoscale::service {

namespace internal {
struct StudyState;
}  // namespace internal

// Trial counts by state, for metrics.
struct TrialCounts {
  std::map<v1::Trial::State, int64_t> by_state;
  std::map<v1::Study::State, int64_t> studies_by_state;
  // The store's writes (one per mutating call) and the transactions that committed them:
  // writes / commits is the group-commit factor.
  int64_t store_writes = 0;
  int64_t store_commits = 0;
  int64_t store_checkpoint_failures = 0;
};

// Not an RPC: evoscaled's scheduler sets the resource request an ACTIVE managed trial runs
// with: at its start (right-sized), and to run it again from scratch after an OOM kill, when
// the killed run's measurements are dropped (keep_measurements false), so the trial's history
// is the new run's alone; `oom_kills` is added to the trial's usage. A trial resumed from its
// checkpoint (after a preemption or a restart) keeps its measurements.
struct RerunTrialRequest {
  std::string name;
  v1::ResourceRequest resources;
  int32_t oom_kills = 0;
  bool keep_measurements = false;
  // Metadata keys set on the trial unless it has them already: the cost model's prediction for
  // it, made before its first run (see StudyState::CostReport), stays the first one.
  std::map<std::string, std::string> metadata;
};

// Reads a study for a view computed here rather than by an RPC (the dashboard's analysis and
// trial table): `fn` gets the study (with its counters) and every trial (deleted ones as
// tombstones, STATE_UNSPECIFIED) under the study's lock, so it must be quick and must not call
// the core. Its answer comes back once every write it may have seen is durable, as any read.
// `trials_version` moves with every trial written to the study (added, changed, deleted) and
// never returns to an earlier value in this process: what was derived from the trials alone
// holds while it stays. The study's own fields (its state) do not move it.
struct ReadStudyRequest {
  std::string name;  // "studies/{s}"
  std::function<absl::StatusOr<std::string>(
      const v1::Study& study, absl::Span<const v1::Trial> trials, uint64_t trials_version)>
      fn;
  // Several replicas: a study another replica owns is read as the store holds it (every
  // acknowledged write is there), rather than answered StudyElsewhereError; `trials_version` is
  // then one never given before (nothing derived from it is reused). O(trials) a read.
  bool stored_if_elsewhere = false;
};

// A call on a study that another replica owns (several replicas on one PostgreSQL database):
// UNAVAILABLE, with the owner's gRPC address (empty when unknown: ask again) as a payload, so
// that the edge forwards the call there. StudyOwnerAddress reads it back; nullopt for any other
// status.
absl::Status StudyElsewhereError(int64_t study_id, absl::string_view address);
std::optional<std::string> StudyOwnerAddress(const absl::Status& status);

// Thread-safe. Calls on different studies run in parallel (one mutex per study); the store
// serialises their writes and commits concurrent ones together (group commit).
class StudyCore {
 public:
  // Loads every study from `store` and rebuilds the designers. `store` and `clock` must
  // outlive the core. DATA_LOSS when a stored study no longer validates or its trials are not
  // dense; the store's error when it cannot be read.
  static absl::StatusOr<std::unique_ptr<StudyCore>> Create(Store* store, Clock* clock);
  // Several replicas on one PostgreSQL database: nothing is loaded at start. A study is loaded
  // from the store on its first call here, once this replica holds its lease (Acquire); a call
  // on a study another live replica holds answers StudyElsewhereError with its address. Every
  // write is fenced with the lease's epoch; a study whose lease was lost (the heartbeat says so,
  // or a write was fenced off: IsLeaseLost) leaves the cache, and its next call looks again.
  // CreateStudy takes ids from the leases (unique across replicas) and serialises get-or-create
  // by display name through them; ListStudies reads the store. `leases` must outlive the core.
  static absl::StatusOr<std::unique_ptr<StudyCore>> CreateWithLeases(Store* store, Clock* clock,
                                                                     StudyLeases* leases);

  // Every call of the study API is Call(request) (or CallAsync): the request's type names the
  // RPC (a v1::SuggestTrialsRequest is SuggestTrials) and the result is its response (or
  // Status), as Apply's overload for that type answers it (the Result of its Applied<Result>,
  // below). Call returns once what the call wrote (or, for a read, every write it may have
  // seen) is durable. CallAsync hands the same result to `done` once it is durable: with
  // kProcessCrash before it returns; with kPowerLoss perhaps later, from the store's committer
  // thread (with no lock held), so that a gRPC handler holds no thread while the fsync runs.
  template <typename Request>
  auto Call(const Request& req);
  template <typename Request, typename Done>
  void CallAsync(const Request& req, Done done);

  // Studies and trials by state, and the store's counters. Locks each study in turn: O(trials
  // of every study).
  TrialCounts Counts();

 private:
  // What a call waits for before it answers (durability "power"): the store's ticket of the
  // batch it queued, or none (0) when it queued nothing: a read, an error, or any call with
  // durability "process" (Commit has written already). None waits for the last batch queued,
  // which a read may have seen.
  struct WriteTicket {
    uint64_t store_ticket = 0;
    int64_t fenced_study = 0;  // the study whose lease fenced the write (0 = none)
  };

  // What an Apply overload answers: the RPC's result, and the write to wait for before handing
  // it out.
  template <typename Result>
  struct Applied {
    // The result of a call that queued no write (a read, or an error).
    template <typename T, typename = std::enable_if_t<std::is_constructible_v<Result, T&&>>>
    Applied(T&& result) : result(std::forward<T>(result)) {}  // NOLINT: implicit, as StatusOr
    Applied(Result result, WriteTicket written) : result(std::move(result)), written(written) {}

    Result result;
    WriteTicket written;
  };

  // ---- The study API: what Call(request) runs, one overload per request type -------------
  // The fields that need no study are checked first; then the study (and trial) are found and
  // the study's mutex is held for the rest of the call. A call that fails changes nothing.
  // On a miss every call answers alike: a name that does not parse is INVALID_ARGUMENT naming
  // its field (`name: malformed study name "x"; want studies/{id}`, or `... want
  // studies/{id}/trials/{id}`); a study that does not exist or was deleted is NOT_FOUND
  // `study "studies/7" not found`; a trial that does not exist or was deleted is NOT_FOUND
  // `trial "studies/7/trials/3" not found`. Costs are O(1) in the study's size unless said.

  // CreateStudy: validates `study` (INVALID_ARGUMENT with its "study." path) and creates it
  // ACTIVE. Get-or-create by display_name: a live study of that name and an equal spec is
  // answered as it is; one whose spec differs is ALREADY_EXISTS naming the first difference.
  // Holds the core's mutex, so creators serialise; O(studies) with a display_name.
  Applied<absl::StatusOr<v1::Study>> Apply(const v1::CreateStudyRequest& req);
  // GetStudy: the study with its counters (trial_count, completed_trial_count).
  Applied<absl::StatusOr<v1::Study>> Apply(const v1::GetStudyRequest& req);
  // ListStudies: studies in id order, those of `display_name` when given; page_size 0 is
  // kDefaultPageSize, beyond [0, kMaxPageSize] INVALID_ARGUMENT, as is a malformed page_token.
  // A study deleted while its page is read is left out (the page is shorter). O(page), or
  // O(studies after the page's start) with a display_name.
  Applied<absl::StatusOr<v1::ListStudiesResponse>> Apply(const v1::ListStudiesRequest& req);
  // DeleteStudy: deletes the study and its trials.
  Applied<absl::Status> Apply(const v1::DeleteStudyRequest& req);
  // SetStudyState: ACTIVE, INACTIVE or COMPLETED (else INVALID_ARGUMENT, before the lookup).
  Applied<absl::StatusOr<v1::Study>> Apply(const v1::SetStudyStateRequest& req);
  // SuggestTrials: up to suggestion_count ([1, kMaxSuggestionCount]) trials for client_id
  // (non-empty, at most kMaxNameLength bytes): the client's own ACTIVE trials again (a retry
  // is idempotent), stale trials of clients whose heartbeat expired (FAILED once out of
  // retries), REQUESTED trials, then new ones from the designer within max_trials. An INACTIVE
  // study is FAILED_PRECONDITION; a COMPLETED one gets no new trials; a study whose budget or
  // space is spent, with nothing left to hand out, becomes COMPLETED (study_state says so).
  // Cost: the designer's update and suggestion, under the study's lock.
  Applied<absl::StatusOr<v1::SuggestTrialsResponse>> Apply(const v1::SuggestTrialsRequest& req);
  // CreateTrial: adds a trial with the given parameters (checked against the space),
  // REQUESTED, or ended as its state and measurements say (EndedTrial's rules);
  // FAILED_PRECONDITION once the study holds max_trials live trials.
  Applied<absl::StatusOr<v1::Trial>> Apply(const v1::CreateTrialRequest& req);
  // GetTrial: the trial.
  Applied<absl::StatusOr<v1::Trial>> Apply(const v1::GetTrialRequest& req);
  // ListTrials: live trials in id order, those in `state` when set (an unknown state is
  // INVALID_ARGUMENT); pages as ListStudies. O(trials after the page's start).
  Applied<absl::StatusOr<v1::ListTrialsResponse>> Apply(const v1::ListTrialsRequest& req);
  // AddTrialMeasurement: appends a valid measurement naming at least one of the study's
  // metrics, and refreshes the heartbeat. FAILED_PRECONDITION unless the trial is ACTIVE or
  // STOPPING; RESOURCE_EXHAUSTED once it holds kMaxMeasurementsPerTrial.
  Applied<absl::StatusOr<v1::Trial>> Apply(const v1::AddTrialMeasurementRequest& req);
  // CompleteTrial: ends the trial INFEASIBLE (trial_infeasible), else SUCCEEDED (STOPPED when
  // it was STOPPING) with the final measurement, or without one the last intermediate
  // measurement, carrying every metric. FAILED_PRECONDITION when it has already ended.
  Applied<absl::StatusOr<v1::Trial>> Apply(const v1::CompleteTrialRequest& req);
  // CheckTrialEarlyStoppingState: whether the trial should stop: true once STOPPING; for an
  // ACTIVE trial the study's rule decides, and a trial it stops is written STOPPING. Cost:
  // O(measurements of the study) when the study has a rule.
  Applied<absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse>> Apply(
      const v1::CheckTrialEarlyStoppingStateRequest& req);
  // StopTrial: an ACTIVE trial becomes STOPPING (a STOPPING one is answered as it is); any
  // other state is FAILED_PRECONDITION.
  Applied<absl::StatusOr<v1::Trial>> Apply(const v1::StopTrialRequest& req);
  // ListOptimalTrials: the SUCCEEDED trials tied for the best objective, or the Pareto front
  // of several. O(trials).
  Applied<absl::StatusOr<v1::ListOptimalTrialsResponse>> Apply(
      const v1::ListOptimalTrialsRequest& req);
  // DeleteTrial: the trial becomes a tombstone (its id is never reused). A completed trial
  // leaves the designer's history: the next suggestion feeds it every completed trial again.
  Applied<absl::Status> Apply(const v1::DeleteTrialRequest& req);
  // UpdateMetadata: removes and then sets keys of the study's metadata, or of a trial's when
  // `name` is a trial's; INVALID_ARGUMENT when a key or the result breaks the limits.
  Applied<absl::StatusOr<v1::UpdateMetadataResponse>> Apply(const v1::UpdateMetadataRequest& req);
  // GetParameterImportance: each parameter's main effect on `metric` (the first objective when
  // empty; INVALID_ARGUMENT when not the study's) over the SUCCEEDED trials. Kept per metric
  // until a trial changes; recomputing costs about 100 ms at 10,000 trials.
  Applied<absl::StatusOr<v1::GetParameterImportanceResponse>> Apply(
      const v1::GetParameterImportanceRequest& req);
  // RerunTrial (not an RPC; see RerunTrialRequest): FAILED_PRECONDITION unless ACTIVE.
  Applied<absl::StatusOr<v1::Trial>> Apply(const RerunTrialRequest& req);
  // ReadStudy (not an RPC; see ReadStudyRequest): `fn`'s answer.
  Applied<absl::StatusOr<std::string>> Apply(const ReadStudyRequest& req);

  class LockedStudy;  // a study found by name, its mutex held
  class LockedTrial;  // a trial found by name, its study's mutex held

  StudyCore(Store* store, Clock* clock, StudyLeases* leases)
      : store_(store), clock_(clock), leases_(leases) {}
  absl::Status Load();

  // Writes `batch`, fenced with `study`'s lease when it has one: with durability "process" at
  // once; with "power" it queues it, and the ticket is what the call waits for. A write fenced
  // off drops the study from the cache (DropStudy).
  absl::StatusOr<WriteTicket> Commit(WriteBatch batch, const internal::StudyState* study);
  // Writes trial `t` of `study` (whose mutex the caller holds) with completion `seq` (0 = none,
  // or the trial's own, unchanged) and, once written, applies it to the cache. Sets what `t`
  // has cost (core_seconds) first, so the answer shows it.
  absl::StatusOr<WriteTicket> CommitTrial(internal::StudyState& study, v1::Trial& t,
                                          int64_t seq);
  // Writes `next` as `study`'s own fields (spec, state, metadata) and, once written, keeps it.
  absl::StatusOr<WriteTicket> CommitStudy(internal::StudyState& study, v1::Study next);
  // Writes trial `t` of `study` (whose mutex the caller holds) as STOPPING; the trial as
  // stored.
  Applied<absl::StatusOr<v1::Trial>> MarkStopping(internal::StudyState& study, const v1::Trial& t,
                                                  bool by_policy);
  // Calls `then` once `written`, or with none the last write queued, is durable (at once,
  // with OK, when the store does not defer syncs).
  void WhenDurable(WriteTicket written, std::function<void(absl::Status)> then);

  // The study or (study, trial id) of a name, not locked (the trial may not exist): errors as
  // the API's list above says.
  absl::StatusOr<std::shared_ptr<internal::StudyState>> FindStudy(absl::string_view name,
                                                                  absl::string_view field);
  absl::StatusOr<std::pair<std::shared_ptr<internal::StudyState>, int64_t>> FindTrial(
      absl::string_view name, absl::string_view field);
  // The study of `id` from the cache or, with leases, adopted: its lease taken and the study
  // loaded from the store (NOT_FOUND when it does not exist; StudyElsewhereError when another
  // live replica holds it).
  absl::StatusOr<std::shared_ptr<internal::StudyState>> CachedOrAdopted(int64_t id);
  // The study as the store holds it now, replayed and not cached; NotFoundStudy when it does
  // not exist. O(trials).
  absl::StatusOr<std::shared_ptr<internal::StudyState>> ReplayStored(int64_t id);
  // Leases only: ReadStudy of a study another replica owns, as the store holds it.
  Applied<absl::StatusOr<std::string>> ReadStoredStudy(const ReadStudyRequest& req);
  // Leases only: the study leaves the cache (marked lost); its next call looks it up again.
  void DropStudy(int64_t id);
  // A new ACTIVE study of id `id` as `in` asks (valid; `problem` is its spec's conversion),
  // not yet written; INVALID_ARGUMENT when its algorithm's settings are refused.
  absl::StatusOr<std::shared_ptr<internal::StudyState>> NewStudy(int64_t id, const v1::Study& in,
                                                                 search::ProblemStatement problem);
  // Leases only: CreateStudy's get-or-create and ListStudies, read from the store.
  Applied<absl::StatusOr<v1::Study>> CreateStudyAcrossReplicas(const v1::Study& in,
                                                               search::ProblemStatement problem);
  Applied<absl::StatusOr<v1::ListStudiesResponse>> ListStoredStudies(
      const v1::ListStudiesRequest& req, int page_size, int64_t start);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  StudyLeases* const leases_;  // null: one replica, every study loaded at start

  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<internal::StudyState>> studies_ ABSL_GUARDED_BY(mu_);
  int64_t next_study_id_ ABSL_GUARDED_BY(mu_) = 1;
};

template <typename Request>
auto StudyCore::Call(const Request& req) {
  if (!store_->defers_sync()) return Apply(req).result;
  std::optional<decltype(Apply(req).result)> out;
  absl::Notification durable;
  CallAsync(req, [&](decltype(Apply(req).result) result) {
    out.emplace(std::move(result));
    durable.Notify();
  });
  durable.WaitForNotification();
  return *std::move(out);
}

template <typename Request, typename Done>
void StudyCore::CallAsync(const Request& req, Done done) {
  auto applied = Apply(req);
  WhenDurable(applied.written, [result = std::move(applied.result),
                                done = std::move(done)](absl::Status st) mutable {
    if (st.ok()) {
      done(std::move(result));
    } else {
      done(decltype(result)(std::move(st)));
    }
  });
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_STUDY_CORE_H_
