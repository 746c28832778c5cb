#include "service/store/write_batch.h"

#include <utility>

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

}  // namespace evoscale::service
