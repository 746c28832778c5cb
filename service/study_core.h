// StudyCore: the study service's logic, independent of gRPC. Every mutating call validates
// first, then writes to the Store, then updates the in-memory cache; so an error changes
// nothing, and an acknowledged call is durable. With durability "process" the write commits
// before the cache changes. With "power" it is queued and the cache changes at once (under
// the study's lock, so the queue keeps the cache's order); the call answers only once the
// write's fsync is done, and any write the database refuses stops the store (UNAVAILABLE
// until a restart reloads from the database), so no answer ever shows what is not durable.
#ifndef EVOSCALE_SERVICE_STUDY_CORE_H_
#define EVOSCALE_SERVICE_STUDY_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.pb.h"
#include "search/designer.h"
#include "search/types.h"
#include "service/clock.h"
#include "service/store.h"

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
};

// Thread-safe. Calls on different studies run in parallel (one mutex per study); the store
// serialises their writes and commits concurrent ones together (group commit).
class StudyCore {
 public:
  // Loads every study from `store` and rebuilds the designers. `store` and `clock` must
  // outlive the core.
  static absl::StatusOr<std::unique_ptr<StudyCore>> Create(Store* store, Clock* clock);

  absl::StatusOr<v1::Study> CreateStudy(const v1::CreateStudyRequest& req);
  absl::StatusOr<v1::Study> GetStudy(const v1::GetStudyRequest& req);
  absl::StatusOr<v1::ListStudiesResponse> ListStudies(const v1::ListStudiesRequest& req);
  absl::Status DeleteStudy(const v1::DeleteStudyRequest& req);
  absl::StatusOr<v1::Study> SetStudyState(const v1::SetStudyStateRequest& req);

  absl::StatusOr<v1::SuggestTrialsResponse> SuggestTrials(const v1::SuggestTrialsRequest& req);
  absl::StatusOr<v1::Trial> CreateTrial(const v1::CreateTrialRequest& req);
  absl::StatusOr<v1::Trial> GetTrial(const v1::GetTrialRequest& req);
  absl::StatusOr<v1::ListTrialsResponse> ListTrials(const v1::ListTrialsRequest& req);
  absl::StatusOr<v1::Trial> AddTrialMeasurement(const v1::AddTrialMeasurementRequest& req);
  absl::StatusOr<v1::Trial> CompleteTrial(const v1::CompleteTrialRequest& req);
  absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> CheckTrialEarlyStoppingState(
      const v1::CheckTrialEarlyStoppingStateRequest& req);
  absl::StatusOr<v1::Trial> StopTrial(const v1::StopTrialRequest& req);
  absl::StatusOr<v1::ListOptimalTrialsResponse> ListOptimalTrials(
      const v1::ListOptimalTrialsRequest& req);

  // The same calls, finishing asynchronously: `done` gets the result once what the call wrote
  // (or, for a read, every write it may have seen) is durable. With kProcessCrash that is
  // before the call returns; with kPowerLoss `done` may run later on the store's committer
  // thread, so that a gRPC handler holds no thread while the fsync runs.
  template <typename R>
  using Done = std::function<void(R)>;
  void CreateStudyAsync(const v1::CreateStudyRequest& req, Done<absl::StatusOr<v1::Study>> done);
  void GetStudyAsync(const v1::GetStudyRequest& req, Done<absl::StatusOr<v1::Study>> done);
  void ListStudiesAsync(const v1::ListStudiesRequest& req,
                        Done<absl::StatusOr<v1::ListStudiesResponse>> done);
  void DeleteStudyAsync(const v1::DeleteStudyRequest& req, Done<absl::Status> done);
  void SetStudyStateAsync(const v1::SetStudyStateRequest& req,
                          Done<absl::StatusOr<v1::Study>> done);
  void SuggestTrialsAsync(const v1::SuggestTrialsRequest& req,
                          Done<absl::StatusOr<v1::SuggestTrialsResponse>> done);
  void CreateTrialAsync(const v1::CreateTrialRequest& req, Done<absl::StatusOr<v1::Trial>> done);
  void GetTrialAsync(const v1::GetTrialRequest& req, Done<absl::StatusOr<v1::Trial>> done);
  void ListTrialsAsync(const v1::ListTrialsRequest& req,
                       Done<absl::StatusOr<v1::ListTrialsResponse>> done);
  void AddTrialMeasurementAsync(const v1::AddTrialMeasurementRequest& req,
                                Done<absl::StatusOr<v1::Trial>> done);
  void CompleteTrialAsync(const v1::CompleteTrialRequest& req,
                          Done<absl::StatusOr<v1::Trial>> done);
  void CheckTrialEarlyStoppingStateAsync(
      const v1::CheckTrialEarlyStoppingStateRequest& req,
      Done<absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse>> done);
  void StopTrialAsync(const v1::StopTrialRequest& req, Done<absl::StatusOr<v1::Trial>> done);
  void ListOptimalTrialsAsync(const v1::ListOptimalTrialsRequest& req,
                              Done<absl::StatusOr<v1::ListOptimalTrialsResponse>> done);

  TrialCounts Counts();

 private:
  struct StudyState;

  StudyCore(Store* store, Clock* clock) : store_(store), clock_(clock) {}
  absl::Status Load();

  // The bodies of the public calls; see Durable in the .cc.
  absl::StatusOr<v1::Study> DoCreateStudy(const v1::CreateStudyRequest& req);
  absl::StatusOr<v1::Study> DoGetStudy(const v1::GetStudyRequest& req);
  absl::StatusOr<v1::ListStudiesResponse> DoListStudies(const v1::ListStudiesRequest& req);
  absl::Status DoDeleteStudy(const v1::DeleteStudyRequest& req);
  absl::StatusOr<v1::Study> DoSetStudyState(const v1::SetStudyStateRequest& req);
  absl::StatusOr<v1::SuggestTrialsResponse> DoSuggestTrials(
      const v1::SuggestTrialsRequest& req);
  absl::StatusOr<v1::Trial> DoCreateTrial(const v1::CreateTrialRequest& req);
  absl::StatusOr<v1::Trial> DoGetTrial(const v1::GetTrialRequest& req);
  absl::StatusOr<v1::ListTrialsResponse> DoListTrials(const v1::ListTrialsRequest& req);
  absl::StatusOr<v1::Trial> DoAddTrialMeasurement(const v1::AddTrialMeasurementRequest& req);
  absl::StatusOr<v1::Trial> DoCompleteTrial(const v1::CompleteTrialRequest& req);
  absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> DoCheckTrialEarlyStoppingState(
      const v1::CheckTrialEarlyStoppingStateRequest& req);
  absl::StatusOr<v1::Trial> DoStopTrial(const v1::StopTrialRequest& req);
  absl::StatusOr<v1::ListOptimalTrialsResponse> DoListOptimalTrials(
      const v1::ListOptimalTrialsRequest& req);
  // Writes `batch` (deferred sync: queues it; the public wrapper waits for it).
  absl::Status Commit(WriteBatch batch);
  template <typename R>
  R Durable(R result);
  template <typename R>
  void DurableAsync(R result, Done<R> done);
  absl::StatusOr<std::shared_ptr<StudyState>> FindStudy(absl::string_view name,
                                                        absl::string_view field);
  absl::StatusOr<std::pair<std::shared_ptr<StudyState>, int64_t>> FindTrial(
      absl::string_view name, absl::string_view field);

  Store* const store_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<StudyState>> studies_ ABSL_GUARDED_BY(mu_);
  int64_t next_study_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_CORE_H_
