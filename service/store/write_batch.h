// What the study store holds and writes: stored studies and trials, and the writes of one
// RPC (a WriteBatch), as every backend (internal/backend.h) applies them.
#ifndef EVOSCALE_SERVICE_STORE_WRITE_BATCH_H_
#define EVOSCALE_SERVICE_STORE_WRITE_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"

namespace evoscale::service {

// A trial as stored: the message plus the order in which it completed (0 = not completed),
// which rebuilds the designer in the same order after a restart.
struct StoredTrial {
  v1::Trial trial;  // name is filled from the ids
  int64_t completion_seq = 0;
};

struct StoredStudy {
  int64_t id = 0;
  v1::Study study;                  // name is filled from the id
  std::vector<StoredTrial> trials;  // by id ascending
};

// Which stored studies a read returns (Store::LoadStudies): ids in (after_id, through_id], in
// id order, those named `display_name` when it is not empty, at most `limit` (0 = all), with
// their trials when `with_trials`.
struct StudyQuery {
  int64_t after_id = 0;
  int64_t through_id = INT64_MAX;
  std::string display_name;
  int limit = 0;
  bool with_trials = true;
};

// The writes of one RPC, applied in one transaction: all or nothing.
class WriteBatch {
 public:
  void PutStudy(int64_t id, const v1::Study& study);
  void DeleteStudy(int64_t id);
  void PutTrial(int64_t study_id, const v1::Trial& trial, int64_t completion_seq);
  // Several replicas on one PostgreSQL database (study_leases.h): the batch commits only while
  // `epoch` is still the current epoch of `study_id`'s lease, checked in the batch's own
  // transaction, which holds the lease row against a takeover until it commits; otherwise the
  // batch fails alone with LeaseLostError. Ignored by SQLite (one process per file).
  void Fence(int64_t study_id, int64_t epoch);
  bool empty() const { return ops_.empty(); }

  // The backends (internal/backend.h) apply these.
  struct Op {
    enum Kind { kPutStudy, kDeleteStudy, kPutTrial, kFence } kind;
    int64_t study_id = 0;
    int64_t trial_id = 0;
    int state = 0;
    int64_t completion_seq = 0;  // kFence: the lease's epoch
    std::string text;  // study display name or trial client id
    std::string body;  // the serialized message (name cleared)
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// A fenced batch whose lease another replica has taken over (ABORTED, marked so): the write
// is not in the database; the study's state here is stale and must be reloaded or forwarded.
absl::Status LeaseLostError(absl::string_view message);
bool IsLeaseLost(const absl::Status& status);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_WRITE_BATCH_H_
