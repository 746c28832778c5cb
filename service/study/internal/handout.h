// Handout: what one SuggestTrials hands out, gathered step by step under the study's lock and
// then written in one batch. The core takes the steps in order, each stopping at `count`
// trials, writes Batch(), and then either applies it (Apply) or, when the store refused it,
// Abandon()s it.
#ifndef EVOSCALE_SERVICE_STUDY_INTERNAL_HANDOUT_H_
#define EVOSCALE_SERVICE_STUDY_INTERNAL_HANDOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "evoscale/v1/study.pb.h"
#include "service/store/store.h"
#include "service/study/internal/study_state.h"

namespace evoscale::service::internal {

class Handout {
 public:
  static constexpr int kMaxPromotionChecks = 16;

  // `study`'s mutex must be held for the handout's whole life; `client` must outlive it.
  Handout(StudyState& study, const std::string& client, int count, absl::Time now)
      : study_(study), client_(client), count_(count), now_(now) {}

  // 1. The client's own ACTIVE trials (an idempotent retry), then stale trials of dead clients
  //    (or FAILED, once out of retries).
  void HandBackActive();
  // 2. REQUESTED trials (created by clients, waiting for a worker), unless the budget is spent.
  void HandOutRequested();
  // 2b. In a study that promotes (StudyState::promotes), at most one STOPPED trial the policy
  //     stopped whose rung now ranks it among those that continue: it is ACTIVE again, for
  //     this client, with its measurements (a managed trial resumes from its checkpoint).
  //     Looks at the kMaxPromotionChecks latest such trials; each check is O(measurements).
  void PromoteStopped();
  // 3. New suggestions from the designer, within max_trials and budget_core_seconds. The
  //    designer's error, if any.
  absl::Status SuggestNew();

  // The batch that writes the handout: the failed trials, the handed-out ones and, when the
  // budget is spent and nothing is left to hand out, the study COMPLETED.
  WriteBatch Batch();
  // Once Batch() is written: applies it to the cache and answers the response.
  v1::SuggestTrialsResponse Apply() &&;
  // Once the store refused Batch(): the designer, which may hold the suggestions of step 3 as
  // pending, starts afresh.
  void Abandon();

 private:
  StudyState& study_;
  const std::string& client_;
  const int count_;
  const absl::Time now_;

  std::vector<v1::Trial> trials_;  // to hand to the client, as they will be stored
  std::vector<v1::Trial> failed_;  // stale trials that ran out of retries
  bool designer_used_ = false;
  bool exhausted_ = false;  // the budget or the search space is spent
  // Set by Batch().
  std::vector<int64_t> failed_seq_;  // failed_[i]'s completion sequence number
  bool completes_study_ = false;
};

}  // namespace evoscale::service::internal

#endif  // EVOSCALE_SERVICE_STUDY_INTERNAL_HANDOUT_H_
