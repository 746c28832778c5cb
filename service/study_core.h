// StudyCore: the study service's logic, independent of gRPC. Every mutating call validates
// first, then writes one transaction to the Store, then updates the in-memory cache; so an
// error changes nothing, and an acknowledged call is durable.
#ifndef EVOSCALE_SERVICE_STUDY_CORE_H_
#define EVOSCALE_SERVICE_STUDY_CORE_H_

#include <cstdint>
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
};

// Thread-safe. Calls on different studies run in parallel (one mutex per study); the store
// serialises their writes.
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

  TrialCounts Counts();

 private:
  struct StudyState;

  StudyCore(Store* store, Clock* clock) : store_(store), clock_(clock) {}
  absl::Status Load();
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
