// Online training's pushes (--serve): at a step's end, with every worker waiting, the rows
// this rank changed since its last push (their current values, versioned by the step), at most
// every push_every_s; the MLP (rank 0) at most every dense_every_s and at the end. A thread of
// its own sends them, so training goes on meanwhile; a push still waiting to be sent when the
// next is due holds training back (back-pressure: nothing is dropped). A replica that missed a
// push (down, unreachable) is asked what it holds once it answers again, and then gets every
// row changed since that version (the table keeps each row's last step) and the MLP: nothing
// is lost across a replica's restart from a checkpoint.
#ifndef EVOSCALE_TRAINER_INTERNAL_ROW_PUSHER_H_
#define EVOSCALE_TRAINER_INTERNAL_ROW_PUSHER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "trainer/internal/embedding_shard.h"
#include "trainer/mlp.h"
#include "trainer/model_sink.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer::internal {

class RowPusher {
 public:
  // One sink per replica of config.serve; rank `rank` of a job of `ranks` pushes as source
  // "rank-R-of-N" ("" alone). Turns on change tracking in `shards`.
  static absl::StatusOr<std::unique_ptr<RowPusher>> Create(const TrainerConfig& config, int rank,
                                                           int ranks,
                                                           std::vector<EmbeddingShard>& shards);
  ~RowPusher();

  // At the end of step `step` (the tables still): a push when one is due, `now` (input is
  // late: push before waiting for it) or `last` (the rows left and the MLP).
  void AtStepEnd(int64_t step, std::vector<EmbeddingShard>& shards, const Mlp& mlp, bool last,
                 bool now = false);
  // At the end of training (the tables still for good): sends what is handed over, then for
  // up to `catch_up_s` catches up every replica that missed a push (the rows since what it
  // holds, and the MLP), then stops the thread. A replica still down is counted behind.
  void Finish(int64_t step, std::vector<EmbeddingShard>& shards, const Mlp& mlp,
              double catch_up_s = 10);
  // For the final line: pushes, rows, failures, replicas behind.
  nlohmann::ordered_json Details() const;

 private:
  struct Replica {
    std::unique_ptr<ModelSink> sink;
    enum class State { kLive, kDown, kProbed } state = State::kProbed;
    int64_t holds = -1;  // kProbed: the version it holds
    int64_t acked = -1;  // the newest version it is known to hold (-1: not yet known)
  };
  struct Job {
    int64_t version = 0;
    RowPush delta;
    std::vector<std::optional<RowPush>> catch_up;  // per replica
    std::optional<DensePush> dense;
  };
  RowPusher(const TrainerConfig& config, bool dense);
  void Run();
  void Send(Job& job);
  // Logs the ids evicted at `version`, first dropping what every replica holds already.
  void LogErased(int64_t version, const std::vector<uint64_t>& erased)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WaitSent();  // until no job is pending or being sent
  void Stop();
  bool AllLive() const;

  const double push_every_s_, dense_every_s_;
  const bool pushes_dense_;  // rank 0
  std::chrono::steady_clock::time_point last_push_, last_dense_;
  int64_t dense_version_ = -1;  // the step of the last MLP handed over

  mutable absl::Mutex mu_;
  std::vector<Replica> replicas_ ABSL_GUARDED_BY(mu_);
  std::optional<Job> pending_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  int64_t pushes_ ABSL_GUARDED_BY(mu_) = 0, rows_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0, dense_pushes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t catch_ups_ ABSL_GUARDED_BY(mu_) = 0, ids_erased_ ABSL_GUARDED_BY(mu_) = 0;
  // The ids evicted at each version, kept until every replica holds that version, so that a
  // replica catching up is told of the evictions it missed too. At most kMaxErasedLog ids: past
  // that the oldest go (erased_floor_: the newest version dropped), and a replica catching up
  // from before it may keep serving ids evicted meanwhile (counted, erased_incomplete_).
  static constexpr size_t kMaxErasedLog = size_t{1} << 22;
  std::deque<std::pair<int64_t, uint64_t>> erased_log_ ABSL_GUARDED_BY(mu_);
  int64_t erased_floor_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t erased_incomplete_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_ROW_PUSHER_H_
