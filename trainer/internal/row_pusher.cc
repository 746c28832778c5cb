#include "trainer/internal/row_pusher.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer::internal {
namespace {

// The rows of `shards` that `pick` accepts, their current embeddings as one push.
template <typename Pick>
RowPush Collect(int64_t version, std::vector<EmbeddingShard>& shards, Pick pick) {
  RowPush push;
  push.version = version;
  push.dim = shards.empty() ? 0 : shards[0].table->dim();
  for (EmbeddingShard& shard : shards) {
    const EmbeddingTable& t = *shard.table;
    pick(shard, [&](uint32_t row) {
      push.keys.push_back(t.header(row)->key);
      const float* e = t.embedding(row);
      push.values.insert(push.values.end(), e, e + t.dim());
    });
  }
  return push;
}

}  // namespace

RowPusher::RowPusher(const TrainerConfig& config, bool dense)
    : push_every_s_(config.push_every_s),
      dense_every_s_(config.dense_every_s),
      pushes_dense_(dense),
      last_push_(std::chrono::steady_clock::now()),
      last_dense_(last_push_) {}

absl::StatusOr<std::unique_ptr<RowPusher>> RowPusher::Create(const TrainerConfig& config,
                                                             int rank, int ranks,
                                                             std::vector<EmbeddingShard>& shards) {
  std::unique_ptr<RowPusher> p(new RowPusher(config, rank == 0));
  const std::string source = ranks > 1 ? absl::StrCat("rank-", rank, "-of-", ranks) : "";
  {
    absl::MutexLock lock(&p->mu_);
    for (const std::string& address : config.serve) {
      absl::StatusOr<std::unique_ptr<ModelSink>> sink = ConnectModelSink(address, source);
      if (!sink.ok()) return sink.status();
      Replica r;
      r.sink = *std::move(sink);
      r.state = Replica::State::kDown;  // asked what it holds before its first push
      p->replicas_.push_back(std::move(r));
    }
  }
  for (EmbeddingShard& shard : shards) shard.track_changed = true;
  p->thread_ = std::thread([p = p.get()] { p->Run(); });
  return p;
}

RowPusher::~RowPusher() { Stop(); }

void RowPusher::AtStepEnd(int64_t step, std::vector<EmbeddingShard>& shards, const Mlp& mlp,
                          bool last, bool at_once) {
  const auto now = std::chrono::steady_clock::now();
  bool urgent = false;  // rows to send, or a replica to catch up
  for (const EmbeddingShard& shard : shards) {
    urgent = urgent || !shard.changed.empty() || !shard.erased.empty();
  }
  {
    absl::MutexLock lock(&mu_);
    for (const Replica& r : replicas_) urgent = urgent || r.state == Replica::State::kProbed;
  }
  if (!last && !(at_once && urgent) &&
      std::chrono::duration<double>(now - last_push_).count() < push_every_s_) {
    return;
  }
  // Back-pressure: the previous push must have left before this one is made.
  mu_.LockWhen(absl::Condition(
      +[](std::optional<Job>* pending) { return !pending->has_value(); }, &pending_));
  Job job;
  job.version = step;
  job.delta = Collect(step, shards, [](EmbeddingShard& shard, auto add) {
    std::sort(shard.changed.begin(), shard.changed.end());
    shard.changed.erase(std::unique(shard.changed.begin(), shard.changed.end()),
                        shard.changed.end());
    const EmbeddingTable& table = *shard.table;
    for (uint32_t row : shard.changed) {
      // Once ids were evicted, a row changed before may since have been freed: only live ones.
      if (shard.erased.empty() || table.Find(table.header(row)->key) == row) add(row);
    }
    shard.changed.clear();
  });
  for (EmbeddingShard& shard : shards) {
    job.delta.erased.insert(job.delta.erased.end(), shard.erased.begin(), shard.erased.end());
    shard.erased.clear();
  }
  LogErased(step, job.delta.erased);
  bool any_catch_up = false;
  for (const Replica& r : replicas_) {
    std::optional<RowPush> catch_up;
    if (r.state == Replica::State::kProbed) {
      const int64_t since = r.holds;
      catch_up = Collect(step, shards, [since](EmbeddingShard& shard, auto add) {
        shard.table->ForEachRow([&](uint32_t row) {
          if (int64_t(shard.table->header(row)->last_update) > since) add(row);
        });
      });
      for (const auto& [version, key] : erased_log_) {
        if (version > since) catch_up->erased.push_back(key);
      }
      erased_incomplete_ += since < erased_floor_;
      any_catch_up = true;
    }
    job.catch_up.push_back(std::move(catch_up));
  }
  if (pushes_dense_ && (step > dense_version_ || any_catch_up) &&
      (last || any_catch_up ||
       std::chrono::duration<double>(now - last_dense_).count() >= dense_every_s_)) {
    job.dense = DensePush{step, mlp.sizes(), mlp.params()};
    last_dense_ = now;
    dense_version_ = step;
  }
  pending_ = std::move(job);
  last_push_ = now;
  mu_.Unlock();
}

void RowPusher::LogErased(int64_t version, const std::vector<uint64_t>& erased) {
  int64_t everyone = std::numeric_limits<int64_t>::max();
  for (const Replica& r : replicas_) everyone = std::min(everyone, r.acked);
  while (!erased_log_.empty() && erased_log_.front().first <= everyone) erased_log_.pop_front();
  for (uint64_t key : erased) erased_log_.emplace_back(version, key);
  while (erased_log_.size() > kMaxErasedLog) {
    erased_floor_ = std::max(erased_floor_, erased_log_.front().first);
    erased_log_.pop_front();
  }
}

void RowPusher::Run() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RowPusher* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return p->pending_.has_value() || p->done_;
          },
          this));
      if (!pending_.has_value()) return;
      job = *std::move(pending_);
      pending_.reset();
      busy_ = true;
    }
    Send(job);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void RowPusher::Send(Job& job) {
  // The replicas are touched only here, and by AtStepEnd under mu_ while this thread waits
  // for a job (it reads their states): each state change is made under mu_.
  std::vector<Replica>* replicas;
  {
    absl::MutexLock lock(&mu_);
    replicas = &replicas_;
  }
  for (size_t i = 0; i < replicas->size(); ++i) {
    Replica& r = (*replicas)[i];
    absl::Status status;
    if (r.state == Replica::State::kDown) {
      // Not sent to: what does it hold? It gets everything after that at the next push.
      absl::StatusOr<int64_t> holds = r.sink->AppliedVersion();
      absl::MutexLock lock(&mu_);
      if (holds.ok()) {
        r.state = Replica::State::kProbed;
        r.holds = *holds;
        r.acked = *holds;
      }
      continue;
    }
    const bool catching_up = r.state == Replica::State::kProbed;
    // Probed after this job was made: its catch-up comes with the next one.
    if (catching_up && !job.catch_up[i].has_value()) continue;
    const RowPush& rows = catching_up ? *job.catch_up[i] : job.delta;
    // FAILED_PRECONDITION: the replica holds this version or a newer one already (the MLP of
    // this step sent before, a checkpoint at least this new): nothing is missing.
    if (!rows.keys.empty() || !rows.erased.empty() || catching_up) {
      status = r.sink->PushRows(rows);
    }
    if (absl::IsFailedPrecondition(status)) status = absl::OkStatus();
    if (status.ok() && job.dense.has_value()) status = r.sink->PushDense(*job.dense);
    if (absl::IsFailedPrecondition(status)) status = absl::OkStatus();
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      r.state = Replica::State::kLive;
      r.acked = std::max(r.acked, job.version);
      ++pushes_;
      rows_ += int64_t(rows.keys.size());
      ids_erased_ += int64_t(rows.erased.size());
      dense_pushes_ += job.dense.has_value();
      catch_ups_ += catching_up;
    } else {
      r.state = Replica::State::kDown;
      ++failures_;
    }
  }
}

void RowPusher::WaitSent() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](RowPusher* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !p->pending_.has_value() && !p->busy_;
      },
      this));
}

bool RowPusher::AllLive() const {
  absl::MutexLock lock(&mu_);
  for (const Replica& r : replicas_) {
    if (r.state != Replica::State::kLive) return false;
  }
  return true;
}

void RowPusher::Finish(int64_t step, std::vector<EmbeddingShard>& shards, const Mlp& mlp,
                       double catch_up_s) {
  WaitSent();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(catch_up_s);
  while (!AllLive() && std::chrono::steady_clock::now() < deadline) {
    // A probe of the replicas down, or the catch-up of those that answered.
    AtStepEnd(step, shards, mlp, /*last=*/true);
    WaitSent();
    if (!AllLive()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Stop();
}

void RowPusher::Stop() {
  WaitSent();
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

nlohmann::ordered_json RowPusher::Details() const {
  absl::MutexLock lock(&mu_);
  int64_t behind = 0;
  for (const Replica& r : replicas_) behind += r.state != Replica::State::kLive;
  return {{"replicas", replicas_.size()}, {"pushes", pushes_},  {"rows_pushed", rows_},
          {"dense_pushes", dense_pushes_},  {"catch_ups", catch_ups_}, {"failures", failures_},
          {"replicas_behind", behind}, {"ids_erased", ids_erased_},
          {"catch_ups_missing_evictions", erased_incomplete_}};
}

}  // namespace evoscale::trainer::internal
