#include "service/study/internal/handout.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "search/types.h"
#include "service/study/internal/proto_time.h"
#include "service/study/study_converter.h"

namespace evoscale::service::internal {

void Handout::HandBackActive() {
  const google::protobuf::Timestamp now_proto = ToProto(now_);
  std::vector<v1::Trial> taken;  // stale trials this client may take over
  for (int64_t id : study_.active) {
    const v1::Trial& t = study_.trial(id);
    if (t.state() != v1::Trial::ACTIVE) continue;
    if (t.client_id() == client_) {
      if (static_cast<int>(trials_.size()) >= count_) continue;
      v1::Trial n = t;
      *n.mutable_heartbeat_time() = now_proto;
      trials_.push_back(std::move(n));
      continue;
    }
    if (FromProto(t.heartbeat_time()) + study_.heartbeat_timeout > now_) continue;  // alive
    v1::Trial n = t;
    if (t.retries() >= study_.max_retries) {
      n.set_state(v1::Trial::FAILED);
      n.set_infeasible_reason(absl::StrFormat("no heartbeat within %s, %d times",
                                              absl::FormatDuration(study_.heartbeat_timeout),
                                              t.retries() + 1));
      *n.mutable_end_time() = now_proto;
      failed_.push_back(std::move(n));
    } else {
      n.set_client_id(client_);
      n.set_retries(t.retries() + 1);
      *n.mutable_heartbeat_time() = now_proto;
      taken.push_back(std::move(n));
    }
  }
  for (v1::Trial& n : taken) {
    if (static_cast<int>(trials_.size()) >= count_) break;
    trials_.push_back(std::move(n));
  }
}

void Handout::HandOutRequested() {
  if (study_.budget_spent()) return;  // starting one would spend past the budget
  const google::protobuf::Timestamp now_proto = ToProto(now_);
  for (auto it = study_.requested.begin();
       it != study_.requested.end() && static_cast<int>(trials_.size()) < count_; ++it) {
    v1::Trial n = study_.trial(*it);
    n.set_state(v1::Trial::ACTIVE);
    n.set_client_id(client_);
    *n.mutable_start_time() = now_proto;
    *n.mutable_heartbeat_time() = now_proto;
    trials_.push_back(std::move(n));
  }
}

void Handout::PromoteStopped() {
  if (!study_.promotes || study_.budget_spent() || static_cast<int>(trials_.size()) >= count_ ||
      study_.study.state() != v1::Study::ACTIVE) {
    return;
  }
  int checked = 0;
  for (auto it = study_.completed_order.rbegin();
       it != study_.completed_order.rend() && checked < kMaxPromotionChecks; ++it) {
    const v1::Trial& t = study_.trial(*it);
    if (t.state() != v1::Trial::STOPPED || !t.policy_stopped() || t.measurements().empty() ||
        t.measurements().rbegin()->step() >= study_.early_stopping.max_step) {
      continue;
    }
    ++checked;
    if (study_.PolicyStops(t)) continue;
    v1::Trial n = t;
    n.set_state(v1::Trial::ACTIVE);
    n.set_client_id(client_);
    n.clear_final_measurement();
    n.clear_end_time();
    n.set_policy_stopped(false);
    n.set_promotions(t.promotions() + 1);
    *n.mutable_heartbeat_time() = ToProto(now_);
    trials_.push_back(std::move(n));
    return;
  }
}

absl::Status Handout::SuggestNew() {
  const v1::Study& study = study_.study;
  const int64_t max_trials = study.spec().max_trials();
  const int64_t stored = static_cast<int64_t>(study_.trials.size());
  const int64_t live = study_.live_trials();
  int64_t room = count_ - static_cast<int64_t>(trials_.size());
  if (max_trials > 0) room = std::min(room, max_trials - live);
  exhausted_ = (max_trials > 0 && live >= max_trials) || study_.budget_spent();
  if (study_.budget_spent()) room = 0;
  if (room <= 0 || study.state() != v1::Study::ACTIVE) return absl::OkStatus();
  study_.SyncDesigner();
  designer_used_ = true;
  absl::StatusOr<std::vector<search::ParameterDict>> suggestions =
      study_.designer->Suggest(static_cast<int>(room), stored);
  if (!suggestions.ok()) return suggestions.status();
  if (static_cast<int64_t>(suggestions->size()) < room) exhausted_ = true;  // space spent
  const google::protobuf::Timestamp now_proto = ToProto(now_);
  int64_t next_id = stored + 1;
  for (const search::ParameterDict& params : *suggestions) {
    v1::Trial n;
    n.set_id(next_id);
    n.set_name(absl::StrCat(study.name(), "/trials/", next_id));
    ++next_id;
    n.set_state(v1::Trial::ACTIVE);
    n.set_client_id(client_);
    SetParameters(params, &n);
    *n.mutable_resources() = study.spec().trial_template().resources();
    *n.mutable_start_time() = now_proto;
    *n.mutable_heartbeat_time() = now_proto;
    trials_.push_back(std::move(n));
  }
  return absl::OkStatus();
}

WriteBatch Handout::Batch() {
  // The budget is spent and nothing is left to hand out: the study is done; one that promotes
  // stopped trials waits for its running ones (their arrivals at a rung may promote another).
  completes_study_ = trials_.empty() && exhausted_ && study_.study.state() == v1::Study::ACTIVE &&
                     !(study_.promotes && !study_.active.empty());
  WriteBatch batch;
  int64_t seq = study_.next_completion_seq();
  failed_seq_.clear();
  for (const v1::Trial& f : failed_) {
    failed_seq_.push_back(seq);
    batch.PutTrial(study_.id, f, seq++);
  }
  for (const v1::Trial& t : trials_) batch.PutTrial(study_.id, t, 0);
  if (completes_study_) {
    v1::Study completed = study_.study;
    completed.set_state(v1::Study::COMPLETED);
    batch.PutStudy(study_.id, completed);
  }
  return batch;
}

v1::SuggestTrialsResponse Handout::Apply() && {
  for (size_t i = 0; i < failed_.size(); ++i) study_.Apply(failed_[i], failed_seq_[i]);
  for (const v1::Trial& t : trials_) study_.Apply(t, 0);
  if (completes_study_) study_.study.set_state(v1::Study::COMPLETED);
  v1::SuggestTrialsResponse resp;
  resp.mutable_trials()->Reserve(static_cast<int>(trials_.size()));
  for (v1::Trial& t : trials_) *resp.add_trials() = std::move(t);
  resp.set_study_state(study_.study.state());
  return resp;
}

void Handout::Abandon() {
  if (designer_used_) study_.RebuildDesigner().IgnoreError();
}

}  // namespace evoscale::service::internal
