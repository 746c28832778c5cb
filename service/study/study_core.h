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
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include "evoscale/v1/study.pb.h"
#include "search/designer.h"
#include "search/types.h"
#include "service/common/clock.h"
#include "service/store/store.h"

namespace evoscale::service {

inline constexpr int kMaxSuggestionCount = 1000;
inline constexpr int kMaxPageSize = 1000;
inline constexpr int kDefaultPageSize = 100;
inline constexpr double kDefaultHeartbeatTimeoutSeconds = 600;
inline constexpr int kDefaultMaxTrialRetries = 3;
inline constexpr int kMaxMeasurementsPerTrial = 100000;

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
};

// Thread-safe. Calls on different studies run in parallel (one mutex per study); the store
// serialises their writes and commits concurrent ones together (group commit).
class StudyCore {
 private:
  // The calls of the study API, one overload per request type. What they wrote may not yet be
  // durable: the public Call and CallAsync wait for that.
  absl::StatusOr<v1::Study> Apply(const v1::CreateStudyRequest& req);
  absl::StatusOr<v1::Study> Apply(const v1::GetStudyRequest& req);
  absl::StatusOr<v1::ListStudiesResponse> Apply(const v1::ListStudiesRequest& req);
  absl::Status Apply(const v1::DeleteStudyRequest& req);
  absl::StatusOr<v1::Study> Apply(const v1::SetStudyStateRequest& req);
  absl::StatusOr<v1::SuggestTrialsResponse> Apply(const v1::SuggestTrialsRequest& req);
  absl::StatusOr<v1::Trial> Apply(const v1::CreateTrialRequest& req);
  absl::StatusOr<v1::Trial> Apply(const v1::GetTrialRequest& req);
  absl::StatusOr<v1::ListTrialsResponse> Apply(const v1::ListTrialsRequest& req);
  absl::StatusOr<v1::Trial> Apply(const v1::AddTrialMeasurementRequest& req);
  absl::StatusOr<v1::Trial> Apply(const v1::CompleteTrialRequest& req);
  absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> Apply(
      const v1::CheckTrialEarlyStoppingStateRequest& req);
  absl::StatusOr<v1::Trial> Apply(const v1::StopTrialRequest& req);
  absl::StatusOr<v1::ListOptimalTrialsResponse> Apply(const v1::ListOptimalTrialsRequest& req);
  absl::Status Apply(const v1::DeleteTrialRequest& req);
  absl::StatusOr<v1::UpdateMetadataResponse> Apply(const v1::UpdateMetadataRequest& req);
  absl::StatusOr<v1::GetParameterImportanceResponse> Apply(
      const v1::GetParameterImportanceRequest& req);
  absl::StatusOr<v1::Trial> Apply(const RerunTrialRequest& req);
  absl::StatusOr<std::string> Apply(const ReadStudyRequest& req);

 public:
  // Loads every study from `store` and rebuilds the designers. `store` and `clock` must
  // outlive the core.
  static absl::StatusOr<std::unique_ptr<StudyCore>> Create(Store* store, Clock* clock);

  // Every call of the study API is Call(request) (or CallAsync): the request's type names the
  // RPC (a v1::SuggestTrialsRequest is SuggestTrials) and the result is its response (or
  // Status), as Apply's overload for that type answers it. Call returns once what the call
  // wrote (or, for a read, every write it may have seen) is durable. CallAsync hands the same
  // result to `done` once it is durable: with kProcessCrash before it returns; with kPowerLoss
  // perhaps later, from the store's committer thread (with no lock held), so that a gRPC
  // handler holds no thread while the fsync runs.
  template <typename Request>
  auto Call(const Request& req);
  template <typename Request, typename Done>
  void CallAsync(const Request& req, Done done);

  TrialCounts Counts();

 private:
  struct StudyState;

  StudyCore(Store* store, Clock* clock) : store_(store), clock_(clock) {}
  absl::Status Load();

  // Writes `batch` (deferred sync: queues it; CallAsync waits for it).
  absl::Status Commit(WriteBatch batch);
  // Calls `then` once the write queued by this thread's current call, or for a read the last
  // write queued, is durable (at once, with OK, when the store does not defer syncs).
  void WhenDurable(std::function<void(absl::Status)> then);
  absl::StatusOr<std::shared_ptr<StudyState>> FindStudy(absl::string_view name,
                                                        absl::string_view field);
  absl::StatusOr<std::pair<std::shared_ptr<StudyState>, int64_t>> FindTrial(
      absl::string_view name, absl::string_view field);
  // Writes trial `t` of `state` (whose mutex the caller holds) as STOPPING; the trial as
  // stored.
  absl::StatusOr<v1::Trial> MarkStopping(StudyState& state, const v1::Trial& t);

  Store* const store_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<StudyState>> studies_ ABSL_GUARDED_BY(mu_);
  int64_t next_study_id_ ABSL_GUARDED_BY(mu_) = 1;
};

template <typename Request>
auto StudyCore::Call(const Request& req) {
  if (!store_->defers_sync()) return Apply(req);
  std::optional<decltype(Apply(req))> out;
  absl::Notification durable;
  CallAsync(req, [&](decltype(Apply(req)) result) {
    out.emplace(std::move(result));
    durable.Notify();
  });
  durable.WaitForNotification();
  return *std::move(out);
}

template <typename Request, typename Done>
void StudyCore::CallAsync(const Request& req, Done done) {
  WhenDurable([result = Apply(req), done = std::move(done)](absl::Status st) mutable {
    if (st.ok()) {
      done(std::move(result));
    } else {
      done(decltype(result)(std::move(st)));
    }
  });
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_STUDY_CORE_H_
