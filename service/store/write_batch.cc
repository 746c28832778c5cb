#include "service/store/write_batch.h"

#include <utility>

#include "absl/strings/cord.h"

namespace evoscale::service {

void WriteBatch::PutStudy(int64_t id, const v1::Study& study) {
  Op op{.kind = Op::kPutStudy, .study_id = id, .state = static_cast<int>(study.state())};
  op.text = study.display_name();
  v1::Study copy = study;
  copy.clear_name();
  copy.clear_trial_count();
  copy.clear_completed_trial_count();
  copy.SerializeToString(&op.body);
  ops_.push_back(std::move(op));
}

void WriteBatch::DeleteStudy(int64_t id) {
  ops_.push_back(Op{.kind = Op::kDeleteStudy, .study_id = id});
}

void WriteBatch::PutTrial(int64_t study_id, const v1::Trial& trial, int64_t completion_seq) {
  Op op{.kind = Op::kPutTrial,
        .study_id = study_id,
        .trial_id = trial.id(),
        .state = static_cast<int>(trial.state()),
        .completion_seq = completion_seq};
  op.text = trial.client_id();
  trial.SerializeToString(&op.body);
  ops_.push_back(std::move(op));
}

void WriteBatch::Fence(int64_t study_id, int64_t epoch) {
  ops_.push_back(Op{.kind = Op::kFence, .study_id = study_id, .completion_seq = epoch});
}

namespace {
constexpr absl::string_view kLeaseLostPayload = "evoscale.dev/lease-lost";
}  // namespace

absl::Status LeaseLostError(absl::string_view message) {
  absl::Status st = absl::AbortedError(message);
  st.SetPayload(kLeaseLostPayload, absl::Cord("1"));
  return st;
}

bool IsLeaseLost(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted &&
         status.GetPayload(kLeaseLostPayload).has_value();
}

}  // namespace evoscale::service
