// StudyState: the study core's cache of one study: its spec and state, every trial (deleted
// ones as tombstones), the indexes SuggestTrials walks (ACTIVE and STOPPING ids, REQUESTED
// ids, the completion order) and the designer fed with the completed trials. The core writes a
// change to the store first and applies it here after, so the cache never holds what the store
// refused (with durability "power": what it has not yet refused; see study_core.h).
// One mutex, `mu`, guards every member that changes; the core holds it for a whole call.
#ifndef EVOSCALE_SERVICE_STUDY_INTERNAL_STUDY_STATE_H_
#define EVOSCALE_SERVICE_STUDY_INTERNAL_STUDY_STATE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "evoscale/v1/study.pb.h"
#include "search/designer.h"
#include "search/early_stopping.h"
#include "search/types.h"
#include "service/store/store.h"

namespace evoscale::service::internal {

struct StudyState {
  StudyState(int64_t id, std::string display_name)
      : id(id), display_name(std::move(display_name)) {}

  // Rebuilds a study the store holds: its settings from its spec, then its trials (dense
  // 1..n, the completed ones in their completion order) and its designer. DATA_LOSS when the
  // stored spec no longer validates or a trial is out of sequence. The designer is fresh: it
  // sees the completed trials at the study's first suggestion (SyncDesigner).
  static absl::StatusOr<std::shared_ptr<StudyState>> Replay(StoredStudy stored);

  // Sets what is derived from the study's spec (valid; `problem` is its conversion).
  void Configure(const v1::StudySpec& spec, search::ProblemStatement problem)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  static bool IsTombstone(const v1::Trial& t) { return t.state() == v1::Trial::STATE_UNSPECIFIED; }
  // Not ended: REQUESTED, ACTIVE or STOPPING.
  static bool IsRunning(v1::Trial::State s) {
    return s == v1::Trial::REQUESTED || s == v1::Trial::ACTIVE || s == v1::Trial::STOPPING;
  }
  // Trials that count: all but the deleted ones (max_trials counts these).
  int64_t live_trials() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return static_cast<int64_t>(trials.size()) - deleted_trials;
  }
  // Trial `id`, 1..trials.size().
  v1::Trial& trial(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return trials[id - 1]; }
  // The completion sequence number the next trial to end gets (above every one given, also
  // to a trial promoted back to ACTIVE since).
  int64_t next_completion_seq() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return last_completion_seq + 1; }
  // Whether the study's budget is spent (never, without one): its trials have spent it, or
  // what is left would not pay for the cheapest full run (a SUCCEEDED trial) seen so far.
  bool budget_spent() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return budget_core_seconds > 0 &&
           (spent_core_seconds >= budget_core_seconds ||
            budget_core_seconds - spent_core_seconds < cheapest_full_run);
  }
  // How the cost model did on the study's ended trials, from what the scheduler noted on each
  // before its first run (metadata kCostModel*): recomputed when the trials moved. O(trials).
  const v1::CostModelReport& CostReport() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The study as the API answers it: with its trial counters and spending.
  v1::Study StudyWithCounts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Applies a trial that has been written to the store (completion `seq`, 0 = none or
  // unchanged) to the cache and its indexes. A new trial must be the next id; a tombstone
  // takes the trial out of the designer's history (rebuilding the designer).
  void Apply(const v1::Trial& t, int64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // The study's early-stopping rule on trial `t` now, against every other trial with a
  // measurement and the study's spending. O(measurements of the study).
  bool PolicyStops(const v1::Trial& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Brings the designer up to date with the trials completed since its last update.
  void SyncDesigner() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A fresh designer that has seen nothing (SyncDesigner then feeds it every completed trial).
  absl::Status RebuildDesigner() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Constant after construction.
  const int64_t id;
  const std::string display_name;  // a copy of study.display_name, which never changes
  // Several replicas (study_leases.h): the epoch of this replica's lease of the study, which
  // fences every write of it (0 = one replica, no fence). Set before the study is shared.
  int64_t epoch = 0;
  // Set once another replica has taken the study over: the cache is stale; a call that finds
  // it set looks the study up again (and is forwarded to its owner).
  std::atomic<bool> lost{false};

  absl::Mutex mu;
  bool deleted ABSL_GUARDED_BY(mu) = false;
  v1::Study study ABSL_GUARDED_BY(mu);  // spec and state; counters filled on read
  // Derived from study.spec at load or creation (Configure); constant afterwards.
  search::ProblemStatement problem;
  search::EarlyStoppingConfig early_stopping;
  absl::Duration heartbeat_timeout;
  int max_retries = 0;
  double budget_core_seconds = 0;  // 0 = no budget
  // COST_AWARE in a managed study whose template resumes from its checkpoint: STOPPED trials
  // the policy stopped may be promoted back (Handout::PromoteStopped).
  bool promotes = false;

  std::unique_ptr<search::Designer> designer ABSL_GUARDED_BY(mu);
  // trials[i] has id i + 1; completion_seq[i] is its order of completion (0 = not yet).
  std::vector<v1::Trial> trials ABSL_GUARDED_BY(mu);
  std::vector<int64_t> completion_seq ABSL_GUARDED_BY(mu);
  // Completed trial ids in completion order, and how many the designer has seen.
  std::vector<int64_t> completed_order ABSL_GUARDED_BY(mu);
  int64_t last_completion_seq ABSL_GUARDED_BY(mu) = 0;  // the largest given
  size_t fed_to_designer ABSL_GUARDED_BY(mu) = 0;
  std::set<int64_t> active ABSL_GUARDED_BY(mu);     // ACTIVE and STOPPING
  std::set<int64_t> requested ABSL_GUARDED_BY(mu);  // REQUESTED
  // The sum of the trials' core_seconds (Apply keeps each trial's TrialCoreSeconds there).
  double spent_core_seconds ABSL_GUARDED_BY(mu) = 0;
  // The least a SUCCEEDED trial of the study has cost (0 before the first).
  double cheapest_full_run ABSL_GUARDED_BY(mu) = 0;
  // Deleted trials stay in `trials` as tombstones (id and name only, STATE_UNSPECIFIED), so
  // ids stay dense and are never reused.
  int64_t deleted_trials ABSL_GUARDED_BY(mu) = 0;
  // Moves with every trial applied: what was derived from the trials at one version holds
  // until it moves.
  uint64_t version ABSL_GUARDED_BY(mu) = 0;
  // CostReport's answer, at the version it was computed.
  v1::CostModelReport cost_report ABSL_GUARDED_BY(mu);
  uint64_t cost_report_version ABSL_GUARDED_BY(mu) = ~uint64_t{0};
  // GetParameterImportance's answers by metric, at the version they were computed (the
  // dashboard asks every 2 s; at 10,000 trials one costs about 100 ms under the study's lock).
  std::map<std::string, std::pair<uint64_t, v1::GetParameterImportanceResponse>> importance
      ABSL_GUARDED_BY(mu);
};

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STUDY_INTERNAL_STUDY_STATE_H_
