#include "trainer/cpu_trainer.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/checkpoint.h"
#include "trainer/collectives.h"
#include "trainer/comm.h"
#include "trainer/criteo_reader.h"
#include "trainer/embedding_table.h"
#include "trainer/feature_id.h"
#include "trainer/internal/checkpoint_layout.h"
#include "trainer/internal/embedding_exchange.h"
#include "trainer/internal/embedding_shard.h"
#include "trainer/internal/row_pusher.h"
#include "trainer/internal/job_report.h"
#include "trainer/internal/run_options.h"
#include "trainer/metrics.h"
#include "trainer/mlp.h"
#include "trainer/protocol.h"
#include "trainer/stop_request.h"

namespace evoscale::trainer {
namespace {

using Clock = std::chrono::steady_clock;
using internal::EmbeddingExchange;
using internal::EmbeddingShard;
using internal::InputLayout;

// One training run, on one rank of a job (a job of one: OneProcess). Each step, every worker
// (Worker(t)) goes through:
//   1. gather: look up (inserting) its shards' ids of the batch and copy their rows into x_;
//      copy its slice's dense features                             -> inputs_gathered_
//   2. MLP forward/backward on its slice of the batch; the input gradient replaces x_
//                                                                   -> gradients_computed_
//   3. Adam on its slice of the MLP parameters; sum each of its rows' gradients from x_ and apply
//      the sparse optimizer; evict expired rows                    -> parameters_updated_
//   4. on checkpoint steps, write its shards' files               -> shards_written_
// Each barrier's completion runs alone, the other workers waiting. parameters_updated_'s
// (OnStepEnd) counts the step, checks the loss, reports progress, takes the next batch from the
// reader, agrees with the other ranks on going on and decides on checkpoints; shards_written_'s
// writes the dense state and the manifest.
//
// In a job of several processes (ranks, comm.h), each reads its own slice of the input and
// owns the rows of the global shards r*L .. r*L+L-1 (L shards a rank), which exchange_ moves:
// OnStepEnd sends the next batch's ids to their owners, phase 1 gathers the rows asked of this
// rank, inputs_gathered_'s completion sends them back into x_, gradients_computed_'s sends the
// rows' gradients to their owners and all-reduces the dense gradients, phase 3 applies what this
// rank owns. The step's loss gradient is scaled by the job's batch, so N ranks of batch/N train
// as one of batch.
class Training {
 public:
  Training(const TrainerConfig& config, const EventSink& sink, Collectives* comm)
      : config_(config),
        sink_(sink),
        comm_(comm),
        ranks_(comm->size()),
        rank_(comm->rank()),
        threads_(config.threads),
        num_shards_(config.shards > 0 ? config.shards : config.threads),
        batch_size_((config.batch_size + comm->size() - 1) / comm->size()),
        checkpoint_dir_(
            internal::RankCheckpointDir(config.checkpoint_dir, comm->rank(), comm->size())),
        dim_(config.embedding_dim),
        input_(kNumCategorical * config.embedding_dim + kNumDense),
        layout_{dim_, input_},
        optimizer_(config.sparse),
        start_(Clock::now()),
        inputs_gathered_(threads_, RowsBack{this}),
        gradients_computed_(threads_, GradientsOut{this}),
        parameters_updated_(threads_, StepEnd{this}),
        shards_written_(threads_, CheckpointEnd{this}) {}

  absl::Status Setup();
  absl::Status Train();
  absl::Status EvaluateAndReport();
  int64_t step() const { return step_; }
  bool interrupted() const { return interrupted_; }

 private:
  // The barriers' completions.
  struct RowsBack {
    Training* t;
    void operator()() noexcept { t->OnInputsGathered(); }
  };
  struct GradientsOut {
    Training* t;
    void operator()() noexcept { t->OnGradientsComputed(); }
  };
  struct StepEnd {
    Training* t;
    void operator()() noexcept { t->OnStepEnd(); }
  };
  struct CheckpointEnd {
    Training* t;
    void operator()() noexcept { t->OnCheckpointEnd(); }
  };

  // Setup: the tables, the MLP, the buffers, and what a resume loads.
  absl::Status CreateModel();
  absl::Status PrepareCheckpointDir();
  absl::Status Resume();
  // The shape checkpoint `m` (at `where`) must share with this run: embedding-dim, sparse
  // optimizer, MLP sizes, and shards when `same_shards` (resuming this run's own layout).
  absl::Status CheckShape(const CheckpointManifest& m, const std::string& where,
                          bool same_shards) const;
  // Fills each local shard with load(s), in parallel by the workers that will own them, starts
  // their change tracking at dense.step, then reads the dense state of `dense` in `dense_dir`.
  absl::Status LoadState(const std::string& dense_dir, const CheckpointManifest& dense,
                         const std::function<absl::Status(int s)>& load);
  absl::Status Reshard();
  // This rank's reader of the training or the evaluation rows.
  BatchReaderOptions ReaderFor(bool for_eval) const;

  // A step's phases on worker t (see the class comment), then the completions.
  void Worker(int t);
  void GatherPhase(int t, const ExampleBatch& batch, uint32_t now);
  void MlpPhase(int t, const ExampleBatch& batch, int r0, int r1);
  void UpdatePhase(int t, const ExampleBatch& batch, uint32_t now);
  void CheckpointPhase(int t);
  // A job's: the rows back to the ranks that asked, and the gradients to the owners (and the
  // dense gradients summed). A failed collective sets status_: the workers finish the step's
  // phases and its end (OnStepEnd) ends the run without calling another collective.
  void OnInputsGathered();
  void OnGradientsComputed();
  void OnStepEnd();
  // The job's progress line at rank 0: the window's metrics over every rank's examples.
  absl::Status ReportProgress();
  void OnCheckpointEnd();
  // Whether the job goes on with this step's batch: only while every rank has one, and not once
  // any was asked to stop; also counts the step's examples over the job. `stop`: this rank
  // was asked to stop. Returns the job's decision to stop.
  bool AgreeOnStep(bool stop, absl::Status failure = absl::OkStatus());
  // A failure at the end of a step: every rank agrees on it at the step's agreement.
  void StepFailed(absl::Status status);
  // After a checkpoint: `mine` is this rank's result. Every rank calls it, and all end with the
  // first failing rank's reason if any failed.
  void CheckpointFailed(absl::Status mine);
  // Ends this rank's training with `status`, without another collective: what the job agreed
  // on (AgreeOnStep, CheckpointFailed), or a failed collective.
  void Fail(absl::Status status);
  bool EvictAt(int64_t step) const {
    return config_.expire_after_steps > 0 && config_.evict_every > 0 &&
           step % config_.evict_every == 0;
  }
  // Training examples consumed by the whole job.
  absl::StatusOr<int64_t> JobExamples() {
    int64_t examples = examples_;
    absl::Status status = comm_->AllReduceSum(&examples, 1);
    if (!status.ok()) return status;
    return examples;
  }

  // EvaluateAndReport's: one evaluation batch's input rows (embeddings of the trained ids, zeros
  // for unseen ones, then the dense features) and its logits into `metrics` (internal::
  // EvaluateBatch: a job's rank without a batch only answers the others' ids), and the final
  // line's details of the tables and the model.
  absl::Status EvaluateBatch(const ExampleBatch* batch, BinaryMetrics* metrics);
  // The dense features of examples [i0, i1) of `batch` into their rows of x_.
  void CopyDense(const ExampleBatch& batch, int i0, int i1);
  absl::StatusOr<nlohmann::ordered_json> ModelDetails(uint64_t peak_rss_bytes) const;
  void Emit(const std::string& line) const { sink_(line); }

  // Constant after construction.
  const TrainerConfig& config_;
  const EventSink& sink_;
  Collectives* const comm_;
  const int ranks_;
  const int rank_;
  const int threads_;
  const int num_shards_;              // on this rank
  const int batch_size_;              // this rank's share of config.batch_size
  const std::string checkpoint_dir_;  // this rank's: DIR/rank-R-of-N in a job of several
  const int dim_;
  const int input_;
  const InputLayout layout_;  // where the batch's ids' rows go in x_
  const SparseOptimizer optimizer_;
  const Clock::time_point start_;

  std::vector<EmbeddingShard> shards_;  // shard s is touched only by worker s % threads_
  std::unique_ptr<Mlp> mlp_;
  std::vector<Mlp::Workspace> workspaces_;  // one per worker
  std::vector<Mlp::Workspace*> workspace_ptrs_;
  std::unique_ptr<BatchReader> reader_;
  std::unique_ptr<internal::RowPusher> pusher_;  // --serve: changed rows to the replicas

  // Batch buffers: workers write disjoint parts between barriers. x_ holds the MLP's input
  // (batch, input) until the backward pass, which overwrites it with the input's gradient
  // (Mlp::Backward allows dx == x); a second buffer of that size would only add to peak memory.
  std::vector<float> x_, logits_, dlogits_;
  std::vector<double> loss_parts_;  // per worker

  // A job of several ranks: the step's rows between the ranks (null in a job of one).
  std::unique_ptr<EmbeddingExchange> exchange_;
  int64_t job_batch_ = 0;  // examples of this step over all ranks
  int64_t bytes_at_train_end_ = 0;

  // Written only by barrier completions (one thread, all others waiting) and before/after the
  // workers run; read by workers after a barrier.
  std::unique_ptr<ExampleBatch> batch_;
  int64_t step_ = 0;      // steps completed (including those before a resume)
  int64_t examples_ = 0;  // training examples consumed (including before a resume)
  int64_t adam_step_ = 0;
  int64_t examples_here_ = 0;  // in this process
  ReaderPosition position_;
  bool checkpoint_now_ = false;
  bool evict_now_ = false;
  std::vector<std::string> chain_;
  std::string previous_chain_front_;  // a rank of a job: the previous checkpoint's chain start
  std::vector<std::string> resharded_from_;  // the old layout's folders, until replaced
  absl::Status status_;
  BinaryMetrics window_;
  Clock::time_point train_start_;
  double train_seconds_ = 0;
  int64_t malformed_ = 0;
  int64_t checkpoints_written_ = 0;
  bool interrupted_ = false;  // stopped by RequestStop() before the data ran out

  // What the workers wait for, in a step's order (see the class comment).
  std::barrier<RowsBack> inputs_gathered_;         // a job: and the rows came back
  std::barrier<GradientsOut> gradients_computed_;  // a job: and exchanged
  std::barrier<StepEnd> parameters_updated_;       // and the next batch fetched
  std::barrier<CheckpointEnd> shards_written_;     // every shard's checkpoint file
};

absl::Status Training::Setup() {
  absl::Status status = CreateModel();
  if (status.ok()) status = PrepareCheckpointDir();
  if (status.ok() && !config_.serve.empty()) {
    absl::StatusOr<std::unique_ptr<internal::RowPusher>> pusher =
        internal::RowPusher::Create(config_, rank_, ranks_, shards_);
    if (pusher.ok()) pusher_ = *std::move(pusher);
    status = pusher.status();
  }
  if (!status.ok()) return status;
  absl::StatusOr<std::unique_ptr<ExampleSource>> source =
      internal::OpenSource(config_, /*for_eval=*/false, position_);
  if (!source.ok()) return source.status();
  reader_ = std::make_unique<BatchReader>(*std::move(source), ReaderFor(/*for_eval=*/false));
  return absl::OkStatus();
}

absl::Status Training::CreateModel() {
  const EmbeddingTableOptions options =
      internal::ShardTableOptions(config_, num_shards_, &optimizer_);
  shards_.resize(num_shards_);
  for (EmbeddingShard& shard : shards_) {
    absl::StatusOr<std::unique_ptr<EmbeddingTable>> table = EmbeddingTable::Create(options);
    if (!table.ok()) return table.status();
    shard.table = *std::move(table);
  }
  std::vector<int> sizes = {input_};
  sizes.insert(sizes.end(), config_.hidden.begin(), config_.hidden.end());
  sizes.push_back(1);
  DenseAdamConfig adam;
  adam.lr = config_.lr_dense;
  absl::StatusOr<std::unique_ptr<Mlp>> mlp = Mlp::Create(sizes, config_.seed, adam);
  if (!mlp.ok()) return mlp.status();
  mlp_ = *std::move(mlp);
  const int slice = (batch_size_ + threads_ - 1) / threads_;
  for (int t = 0; t < threads_; ++t) workspaces_.push_back(mlp_->NewWorkspace(slice));
  for (auto& ws : workspaces_) workspace_ptrs_.push_back(&ws);
  x_.assign(size_t(batch_size_) * input_, 0.0f);
  logits_.assign(batch_size_, 0.0f);
  dlogits_.assign(batch_size_, 0.0f);
  if (comm_->distributed()) {
    exchange_ = std::make_unique<EmbeddingExchange>(comm_, num_shards_, layout_);
  }
  loss_parts_.assign(threads_, 0.0);
  return absl::OkStatus();
}

absl::Status Training::PrepareCheckpointDir() {
  if (checkpoint_dir_.empty()) return absl::OkStatus();
  if (ranks_ > 1) {
    // A job's ranks checkpoint beside each other, each in its own folder.
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_dir_, ec);
    if (ec || !std::filesystem::is_directory(checkpoint_dir_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint_dir: cannot make this rank's folder ", checkpoint_dir_, ": ",
                       ec ? ec.message() : "not a directory"));
    }
  }
  if (config_.resume) return Resume();
  // A fresh run owns the directory: earlier checkpoints would otherwise look newer.
  internal::RemoveCheckpoints(checkpoint_dir_);
  return absl::OkStatus();
}

BatchReaderOptions Training::ReaderFor(bool for_eval) const {
  BatchReaderOptions options =
      internal::ReaderOptions(config_, batch_size_, num_shards_ * ranks_, for_eval);
  options.filter.ranks = ranks_;
  options.filter.rank = rank_;
  // A job sends each distinct id of a batch to its owner once (the reader finds them).
  options.dedupe = ranks_ > 1;
  return options;
}

absl::Status Training::CheckShape(const CheckpointManifest& m, const std::string& where,
                                  bool same_shards) const {
  const std::string sizes = absl::StrJoin(mlp_->sizes(), ",");
  auto mismatch = [&](const char* what, const std::string& have, const std::string& want) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", where, " has ", what, " ", have, " but this run has ", want));
  };
  if (same_shards && m.shards != num_shards_) {
    return mismatch("shards", absl::StrCat(m.shards), absl::StrCat(num_shards_));
  }
  if (m.dim != dim_) return mismatch("embedding-dim", absl::StrCat(m.dim), absl::StrCat(dim_));
  if (m.optimizer != SparseOptimizerName(config_.sparse.kind)) {
    return mismatch("optimizer-sparse", m.optimizer,
                    std::string(SparseOptimizerName(config_.sparse.kind)));
  }
  if (m.mlp_sizes != sizes) return mismatch("MLP sizes", m.mlp_sizes, sizes);
  return absl::OkStatus();
}

absl::Status Training::LoadState(const std::string& dense_dir, const CheckpointManifest& dense,
                                 const std::function<absl::Status(int s)>& load) {
  std::vector<std::thread> loaders;
  for (int t = 0; t < threads_; ++t) {
    loaders.emplace_back([&, t] {
      for (int s = t; s < num_shards_; s += threads_) shards_[s].checkpoint_status = load(s);
    });
  }
  for (auto& th : loaders) th.join();
  for (EmbeddingShard& shard : shards_) {
    if (!shard.checkpoint_status.ok()) return shard.checkpoint_status;
    std::vector<uint32_t> rows;
    std::vector<uint64_t> erased;
    shard.table->TakeChanges(uint32_t(dense.step), &rows, &erased);  // changes count from here
  }
  return LoadDenseCheckpoint(dense_dir, dense, &adam_step_, mlp_->params(), mlp_->adam_m(),
                             mlp_->adam_v());
}

// Resumes from a checkpoint of another number of ranks (or shards): at the newest step every
// old rank has, each local shard takes the rows its range of the id hash owns from every old
// shard; the dense state is rank 0's (the same on all). The stream resumes at the old ranks'
// earliest position, so up to one batch per old rank is read twice. The next checkpoint starts
// a full chain in this layout; once every rank has written it, the old layout is removed.
absl::Status Training::Reshard() {
  absl::StatusOr<std::vector<std::string>> found =
      internal::FindOtherLayout(config_.checkpoint_dir, ranks_);
  if (!found.ok() || found->empty()) return found.status();
  const std::vector<std::string>& old = *found;
  int64_t step = -1;
  for (const std::string& dir : old) {
    absl::StatusOr<CheckpointManifest> newest = FindNewestCheckpoint(dir);
    if (!newest.ok()) return newest.status();
    step = step < 0 ? newest->step : std::min(step, newest->step);
  }
  std::vector<CheckpointManifest> ms;
  for (const std::string& dir : old) {
    absl::StatusOr<CheckpointManifest> m = FindCheckpoint(dir, step);
    if (!m.ok()) return m.status();
    ms.push_back(*std::move(m));
  }
  const CheckpointManifest& m0 = ms[0];
  absl::Status status =
      CheckShape(m0, absl::StrCat(old[0], "/", CheckpointName(step)), /*same_shards=*/false);
  if (!status.ok()) return status;
  const uint32_t global = uint32_t(ranks_ * num_shards_);
  status = LoadState(old[0], m0, [&](int s) {
    const uint32_t mine = uint32_t(rank_ * num_shards_ + s);
    const auto keep = [&](uint64_t key) { return ShardOfFid(key, global) == mine; };
    for (size_t q = 0; q < old.size(); ++q) {
      for (int os = 0; os < ms[q].shards; ++os) {
        absl::Status st = LoadShardCheckpoint(old[q], ms[q], os, *shards_[s].table, keep);
        if (!st.ok()) return st;
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  int64_t examples = 0;
  position_ = ms[0].position;
  for (const CheckpointManifest& m : ms) {
    examples += m.examples;
    const ReaderPosition& p = m.position;
    if (std::tie(p.epoch, p.row, p.offset) <
        std::tie(position_.epoch, position_.row, position_.offset)) {
      position_ = p;
    }
  }
  // The job's count, shared so that the ranks' sum is the old one.
  examples_ = examples / ranks_ + (rank_ == 0 ? examples % ranks_ : 0);
  step_ = step;
  chain_.clear();
  previous_chain_front_.clear();
  resharded_from_ = old;
  return absl::OkStatus();
}

absl::Status Training::Resume() {
  absl::StatusOr<CheckpointManifest> found = FindNewestCheckpoint(checkpoint_dir_);
  // Every rank resumes from the same step: the newest all have. A crash while the job
  // checkpointed leaves some ranks one checkpoint ahead; each keeps its previous one until the
  // next is written everywhere (OnCheckpointEnd), so the older step is still there.
  const int64_t step = found.ok() ? found->step : absl::IsNotFound(found.status()) ? -1 : -2;
  int64_t lo = step, hi = step;
  absl::Status agreed = comm_->AllReduceMin(&lo, 1);
  if (agreed.ok()) agreed = comm_->AllReduceMax(&hi, 1);
  if (!agreed.ok()) return agreed;
  if (lo < 0 && hi >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "some ranks have no readable checkpoint in ", config_.checkpoint_dir,
        " and others one of step ", hi, ": a job resumes only from a step every rank has"));
  }
  if (found.ok() && found->step != lo) {
    // This rank's newer one is from the interrupted checkpoint: gone, so that it cannot be
    // mistaken for the resumed run's.
    internal::RemoveCheckpoints(checkpoint_dir_, /*newer_than=*/lo);
    found = FindCheckpoint(checkpoint_dir_, lo);
  }
  // Nothing of this layout: a checkpoint of another number of ranks is resharded, else the run
  // starts fresh.
  if (absl::IsNotFound(found.status())) return Reshard();
  if (!found.ok()) return found.status();
  const CheckpointManifest& m = *found;
  absl::Status status =
      CheckShape(m, absl::StrCat(checkpoint_dir_, "/", m.chain.back()), /*same_shards=*/true);
  if (!status.ok()) return status;
  status = LoadState(checkpoint_dir_, m, [&](int s) {
    return LoadShardCheckpoint(checkpoint_dir_, m, s, *shards_[s].table);
  });
  if (!status.ok()) return status;
  step_ = m.step;
  examples_ = m.examples;
  position_ = m.position;
  chain_ = m.chain;
  previous_chain_front_ = m.chain.front();
  return absl::OkStatus();
}

void Training::Worker(int t) {
  while (true) {
    const ExampleBatch* batch = batch_.get();
    if (batch == nullptr) return;
    const int n = batch->size;
    const uint32_t now = uint32_t(step_ + 1);
    const int r0 = int(int64_t(n) * t / threads_), r1 = int(int64_t(n) * (t + 1) / threads_);
    GatherPhase(t, *batch, now);
    CopyDense(*batch, r0, r1);
    inputs_gathered_.arrive_and_wait();
    MlpPhase(t, *batch, r0, r1);
    gradients_computed_.arrive_and_wait();
    UpdatePhase(t, *batch, now);
    parameters_updated_.arrive_and_wait();
    if (checkpoint_now_) {
      CheckpointPhase(t);
      shards_written_.arrive_and_wait();
    }
  }
}

// Owners gather their shards' rows: those of the batch's ids, or in a job those the ranks
// asked for (the exchange sends them back at inputs_gathered_).
void Training::GatherPhase(int t, const ExampleBatch& batch, uint32_t now) {
  for (int s = t; s < num_shards_; s += threads_) {
    EmbeddingShard& shard = shards_[s];
    if (exchange_ == nullptr) {
      const std::vector<uint32_t>& positions = batch.shard_positions[s];
      shard.keys.resize(positions.size());
      for (size_t k = 0; k < positions.size(); ++k) shard.keys[k] = batch.fids[positions[k]];
      shard.GatherRows(positions.size(), now,
                       [&](size_t k) { return x_.data() + layout_.Offset(positions[k]); });
    } else {
      const EmbeddingExchange::Asked asked = exchange_->AskedOf(s);
      shard.keys.resize(asked.size());
      for (size_t k = 0; k < asked.size(); ++k) shard.keys[k] = asked.id(k);
      shard.GatherRows(asked.size(), now, [&](size_t k) { return asked.row(k); });
    }
  }
}

// The MLP on examples [r0, r1) of the batch: its loss part, its parameters' gradients in its
// workspace, and its input's gradient over its rows of x_.
void Training::MlpPhase(int t, const ExampleBatch& batch, int r0, int r1) {
  Mlp::Workspace& ws = workspaces_[t];
  double loss = 0;
  if (r1 > r0) {
    const float* x = &x_[size_t(r0) * input_];
    mlp_->Forward(ws, x, r1 - r0, &logits_[r0]);
    const float scale = 1.0f / float(job_batch_);
    for (int i = r0; i < r1; ++i) {
      const float z = logits_[i], y = batch.labels[i];
      loss += std::max(z, 0.0f) + std::log1p(std::exp(-std::fabs(z))) - y * z;
      dlogits_[i] = (1.0f / (1.0f + std::exp(-z)) - y) * scale;
    }
    mlp_->Backward(ws, x, r1 - r0, &dlogits_[r0], &x_[size_t(r0) * input_]);
  } else {
    std::fill(ws.grads.begin(), ws.grads.end(), 0.0f);
  }
  loss_parts_[t] = loss;
}

// Adam on this worker's parameter range; the sparse updates and evictions of its shards.
void Training::UpdatePhase(int t, const ExampleBatch& batch, uint32_t now) {
  const size_t params = mlp_->num_params();
  mlp_->AdamStep(workspace_ptrs_, params * t / threads_, params * (t + 1) / threads_,
                 adam_step_ + 1);
  for (int s = t; s < num_shards_; s += threads_) {
    EmbeddingShard& shard = shards_[s];
    if (exchange_ == nullptr) {
      const std::vector<uint32_t>& positions = batch.shard_positions[s];
      shard.ApplyGradients(positions.size(), now, optimizer_,
                           [&](size_t k) { return x_.data() + layout_.Offset(positions[k]); });
    } else {
      const EmbeddingExchange::Asked asked = exchange_->AskedOf(s);
      shard.ApplyGradients(asked.size(), now, optimizer_,
                           [&](size_t k) { return asked.gradient(k); });
    }
    if (evict_now_ && int64_t(now) > config_.expire_after_steps) {
      shard.evicted += int64_t(shard.table->EvictOlderThan(
          uint32_t(now - config_.expire_after_steps), shard.track_changed ? &shard.erased : nullptr));
    }
  }
}

void Training::CheckpointPhase(int t) {
  const bool full = chain_.empty() || int(chain_.size()) >= config_.full_checkpoint_every;
  for (int s = t; s < num_shards_; s += threads_) {
    shards_[s].checkpoint_status = WriteShardCheckpoint(checkpoint_dir_, CheckpointName(step_), s,
                                                        full, uint32_t(step_), *shards_[s].table);
  }
}

void Training::Fail(absl::Status status) {
  status_ = std::move(status);
  checkpoint_now_ = false;
  if (batch_ != nullptr) reader_->Recycle(std::move(batch_));
  batch_.reset();
}

void Training::CheckpointFailed(absl::Status mine) {
  // Every rank reaches this point of the step (the next step's batch is agreed and exchanged
  // already): the job ends here on all of them, each with the first failing rank's reason,
  // which rank 0 reports, rather than with MPI_Abort and no word from rank 0.
  absl::Status first = comm_->FirstFailure(mine);
  if (!first.ok()) Fail(std::move(first));
}

void Training::OnStepEnd() {
  if (!status_.ok()) {
    // A collective of this step failed: the job is over, without another one.
    Fail(status_);
    return;
  }
  const int n = batch_->size;
  ++step_;
  ++adam_step_;
  examples_ += n;
  examples_here_ += n;
  double loss = 0;
  for (double part : loss_parts_) loss += part;
  if (!std::isfinite(loss)) {
    StepFailed(
        absl::InternalError(absl::StrCat("non-finite training loss (", loss, ") at step ", step_)));
    return;
  }
  if (config_.progress_every > 0) window_.Add(logits_.data(), batch_->labels.data(), size_t(n));
  if (config_.progress_every > 0 && step_ % config_.progress_every == 0) {
    if (absl::Status status = ReportProgress(); !status.ok()) {
      Fail(std::move(status));
      return;
    }
  }
  position_ = batch_->end;
  reader_->Recycle(std::move(batch_));
  // Pushed when due, and while input is late (a stream's rows never wait on its pauses).
  if (pusher_ != nullptr) {
    pusher_->AtStepEnd(step_, shards_, *mlp_, false);
    while (!reader_->WaitReady(0.02)) pusher_->AtStepEnd(step_, shards_, *mlp_, false, true);
  }
  const bool last = config_.max_steps > 0 && step_ >= config_.max_steps;
  if (!last) {
    absl::StatusOr<std::unique_ptr<ExampleBatch>> next = reader_->Next();
    if (!next.ok()) {
      StepFailed(next.status());
      return;
    }
    batch_ = *std::move(next);
  }
  if (AgreeOnStep(batch_ != nullptr && StopRequested())) {
    // Asked to stop: this step is the last; its checkpoint (below) is where a resume starts.
    interrupted_ = true;
    reader_->Recycle(std::move(batch_));
    batch_.reset();
  }
  if (!status_.ok()) return;  // another rank failed: the job ends without a checkpoint
  if (pusher_ != nullptr && batch_ == nullptr) pusher_->AtStepEnd(step_, shards_, *mlp_, true);
  checkpoint_now_ = !checkpoint_dir_.empty() &&
                    ((config_.checkpoint_every > 0 && step_ % config_.checkpoint_every == 0) ||
                     batch_ == nullptr);
  evict_now_ = EvictAt(step_ + 1);
  if (exchange_ != nullptr && batch_ != nullptr) {
    absl::Status status = exchange_->SendIds(batch_.get());
    if (!status.ok()) Fail(std::move(status));
  }
}

absl::Status Training::ReportProgress() {
  std::vector<float> logits, labels;
  absl::Status status = comm_->GatherToRoot(window_.logits(), &logits);
  if (status.ok()) status = comm_->GatherToRoot(window_.labels(), &labels);
  if (!status.ok()) return status;
  const absl::StatusOr<int64_t> examples = JobExamples();
  if (!examples.ok()) return examples.status();
  if (rank_ == 0) {
    BinaryMetrics job;
    job.Add(logits.data(), labels.data(), logits.size());
    Emit(ProgressLine(step_, *examples, internal::SecondsSince(start_), job));
  }
  window_.Clear();
  return absl::OkStatus();
}

void Training::StepFailed(absl::Status status) {
  // The others are about to agree on the next step: they learn of this failure there.
  if (batch_ != nullptr) reader_->Recycle(std::move(batch_));
  batch_.reset();
  AgreeOnStep(false, std::move(status));
}

bool Training::AgreeOnStep(bool stop, absl::Status failure) {
  int64_t v[4] = {batch_ == nullptr ? 1 : 0, stop ? 1 : 0, batch_ != nullptr ? batch_->size : 0,
                  failure.ok() ? 0 : 1};
  if (absl::Status status = comm_->AllReduceSum(v, 4); !status.ok()) {
    Fail(std::move(status));
    return false;
  }
  job_batch_ = v[2];
  if (v[3] > 0) {
    // A rank failed: the job ends here on every rank, each with that rank's reason (rank 0
    // reports it); no checkpoint of a step that failed.
    Fail(comm_->FirstFailure(failure));
    return false;
  }
  if (v[0] > 0 && batch_ != nullptr) {
    // Another rank's slice ran out: the job's training ends here for all (each rank leaves at
    // most one batch unread).
    reader_->Recycle(std::move(batch_));
    batch_.reset();
  }
  return v[0] == 0 && v[1] > 0;
}

void Training::OnInputsGathered() {
  if (exchange_ != nullptr && status_.ok()) status_ = exchange_->ReturnRows(x_.data());
}

void Training::OnGradientsComputed() {
  if (exchange_ == nullptr || !status_.ok()) return;
  status_ = exchange_->SendGradients(x_.data());
  if (!status_.ok()) return;
  // The dense gradients: summed over this rank's workers, then over the job.
  std::vector<float>& sum = workspaces_[0].grads;
  for (size_t t = 1; t < workspaces_.size(); ++t) {
    std::vector<float>& g = workspaces_[t].grads;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
    std::fill(g.begin(), g.end(), 0.0f);
  }
  status_ = comm_->AllReduceSum(sum.data(), sum.size());
}

void Training::OnCheckpointEnd() {
  absl::Status written;
  for (EmbeddingShard& shard : shards_) written.Update(shard.checkpoint_status);
  if (!written.ok()) {
    CheckpointFailed(std::move(written));
    return;
  }
  const bool full = chain_.empty() || int(chain_.size()) >= config_.full_checkpoint_every;
  if (full) chain_.clear();
  chain_.push_back(CheckpointName(step_));
  CheckpointManifest m;
  m.step = step_;
  m.examples = examples_;
  m.position = position_;
  m.shards = num_shards_;
  m.dim = dim_;
  m.state_floats = optimizer_.StateFloats(dim_);
  m.optimizer = std::string(SparseOptimizerName(config_.sparse.kind));
  m.mlp_sizes = absl::StrJoin(mlp_->sizes(), ",");
  m.full = full;
  m.chain = chain_;
  // A rank of a job keeps its previous checkpoint (see Resume).
  absl::Status status =
      WriteDenseAndManifest(checkpoint_dir_, m, adam_step_, mlp_->params(), mlp_->adam_m(),
                            mlp_->adam_v(), ranks_ > 1 ? previous_chain_front_ : "");
  previous_chain_front_ = chain_.front();
  // The job learns here whether every rank wrote its part.
  CheckpointFailed(std::move(status));
  if (!status_.ok()) return;
  ++checkpoints_written_;
  if (!resharded_from_.empty()) {
    // Once every rank has its first checkpoint in this layout (a rank that failed to write would
    // have ended the job), the old layout goes, so no later resume can take it for the newest.
    int64_t everywhere = 1;
    status = comm_->AllReduceMin(&everywhere, 1);
    if (!status.ok()) {
      Fail(std::move(status));
      return;
    }
    if (everywhere == 1 && rank_ == 0) {
      internal::RetireLayout(config_.checkpoint_dir, resharded_from_);
    }
    if (everywhere == 1) resharded_from_.clear();
  }
  const absl::StatusOr<int64_t> examples = JobExamples();
  if (!examples.ok()) {
    Fail(examples.status());
    return;
  }
  Emit(CheckpointLine(step_, *examples, full, checkpoint_dir_ + "/" + chain_.back()));
}

absl::Status Training::Train() {
  absl::StatusOr<std::unique_ptr<ExampleBatch>> first = reader_->Next();
  if (first.ok()) batch_ = *std::move(first);
  if (config_.max_steps > 0 && step_ >= config_.max_steps) batch_.reset();
  // A rank that cannot read its first batch ends the job, each rank with its reason.
  AgreeOnStep(false, first.status());
  if (status_.ok() && exchange_ != nullptr && batch_ != nullptr) {
    status_ = exchange_->SendIds(batch_.get());
  }
  if (!status_.ok()) return status_;
  evict_now_ = EvictAt(step_ + 1);
  train_start_ = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads_; ++t) workers.emplace_back([this, t] { Worker(t); });
  Worker(0);
  for (auto& w : workers) w.join();
  if (pusher_ != nullptr) pusher_->Finish(step_, shards_, *mlp_);
  train_seconds_ = internal::SecondsSince(train_start_);
  bytes_at_train_end_ = comm_->bytes_sent();
  malformed_ = reader_->malformed();
  reader_.reset();
  return status_;
}

absl::Status Training::EvaluateBatch(const ExampleBatch* batch, BinaryMetrics* metrics) {
  if (exchange_ == nullptr) {
    // The trained rows of the batch's ids (looked up, never inserted).
    for (int s = 0; s < num_shards_; ++s) {
      EmbeddingShard& shard = shards_[s];
      const std::vector<uint32_t>& positions = batch->shard_positions[s];
      shard.keys.resize(positions.size());
      for (size_t k = 0; k < positions.size(); ++k) shard.keys[k] = batch->fids[positions[k]];
      shard.FindRows(positions.size(),
                     [&](size_t k) { return x_.data() + layout_.Offset(positions[k]); });
    }
  } else {
    // A job: the rows the ranks ask of this one, then this batch's rows from their owners.
    absl::Status status = exchange_->SendIds(batch);
    if (!status.ok()) return status;
    for (int s = 0; s < num_shards_; ++s) {
      const EmbeddingExchange::Asked asked = exchange_->AskedOf(s);
      EmbeddingShard& shard = shards_[s];
      shard.keys.resize(asked.size());
      for (size_t k = 0; k < asked.size(); ++k) shard.keys[k] = asked.id(k);
      shard.FindRows(asked.size(), [&](size_t k) { return asked.row(k); });
    }
    status = exchange_->ReturnRows(x_.data());
    if (!status.ok() || batch == nullptr) return status;
  }
  const int n = batch->size;
  CopyDense(*batch, 0, n);
  Mlp::Workspace& ws = workspaces_[0];
  for (int r0 = 0; r0 < n; r0 += ws.max_rows) {
    const int r1 = std::min(n, r0 + ws.max_rows);
    mlp_->Forward(ws, &x_[size_t(r0) * input_], r1 - r0, &logits_[r0]);
  }
  metrics->Add(logits_.data(), batch->labels.data(), size_t(n));
  return absl::OkStatus();
}

void Training::CopyDense(const ExampleBatch& batch, int i0, int i1) {
  for (int i = i0; i < i1; ++i) {
    std::memcpy(&x_[size_t(i) * input_ + kNumCategorical * dim_],
                &batch.dense[size_t(i) * kNumDense], sizeof(float) * kNumDense);
  }
}

absl::StatusOr<nlohmann::ordered_json> Training::ModelDetails(uint64_t peak_rss_bytes) const {
  size_t rows = 0, table_bytes = 0, payload = 0, pending = 0, full = 0;
  int64_t evicted = 0;
  std::vector<size_t> shard_rows;
  for (const EmbeddingShard& shard : shards_) {
    rows += shard.table->size();
    table_bytes += shard.table->memory_bytes();
    payload += shard.table->payload_bytes();
    pending += shard.table->pending_count();
    full += shard.table->full_rejections();
    evicted += shard.evicted;
    shard_rows.push_back(shard.table->size());
  }
  // The job's tables: sums over the ranks, and in a job of several each rank's own size.
  std::vector<int64_t> rank_table_bytes;
  absl::Status status = comm_->distributed()
                            ? comm_->AllGather(int64_t(table_bytes), &rank_table_bytes)
                            : absl::OkStatus();
  int64_t v[6] = {int64_t(rows),    int64_t(table_bytes), int64_t(payload),
                  int64_t(pending), int64_t(full),        evicted};
  if (status.ok()) status = comm_->AllReduceSum(v, 6);
  if (!status.ok()) return status;
  rows = size_t(v[0]), table_bytes = size_t(v[1]), payload = size_t(v[2]);
  pending = size_t(v[3]), full = size_t(v[4]), evicted = v[5];
  const double peak = double(peak_rss_bytes);
  // What the model must occupy however it is stored: per row its id, embedding and optimizer
  // state; the MLP's weights and Adam moments.
  const size_t model_bytes = payload + rows * sizeof(uint64_t) + mlp_->memory_bytes();
  return nlohmann::ordered_json{
      {"table",
       {{"rows", rows},
        {"bytes", table_bytes},
        {"bytes_per_row", Figure(rows > 0 ? double(table_bytes) / double(rows) : 0)},
        {"payload_bytes", payload},
        {"evicted", evicted},
        {"pending_ids", pending},
        {"full_rejections", full},
        {"shard_rows", shard_rows}}},
      {"dense_bytes", mlp_->memory_bytes()},
      {"model_bytes", model_bytes},
      {"rss_over_model", Figure(model_bytes > 0 ? peak / double(model_bytes) : 0)},
      {"rss_over_payload", Figure(payload > 0 ? peak / double(payload + mlp_->memory_bytes()) : 0)},
      {"threads", threads_},
      {"shards", num_shards_},
      {"ranks", ranks_},
      {"rank_table_bytes", rank_table_bytes},
      {"isa", mlp_->isa()},
      {"checkpoints", checkpoints_written_}};
}

absl::Status Training::EvaluateAndReport() {
  absl::StatusOr<BinaryMetrics> metrics = internal::EvaluateJob(
      *comm_, config_, internal::OpenSource(config_, /*for_eval=*/true),
      ReaderFor(/*for_eval=*/true),
      [this](const ExampleBatch* batch, BinaryMetrics* m) { return EvaluateBatch(batch, m); });
  if (!metrics.ok()) return metrics.status();
  internal::RankTraining mine;
  mine.steps = step_;
  mine.examples = examples_;
  mine.examples_here = examples_here_;
  mine.train_s = train_seconds_;
  mine.malformed_lines = malformed_;
  mine.bytes_sent = bytes_at_train_end_;
  absl::StatusOr<internal::JobSummary> job =
      internal::SummarizeJob(*comm_, mine, *metrics, config_.test_path.empty());
  if (!job.ok()) return job.status();
  absl::StatusOr<nlohmann::ordered_json> details = ModelDetails(job->summary.peak_rss_bytes);
  if (!details.ok()) return details.status();
  if (comm_->distributed()) {
    (*details)["bytes_exchanged_per_example"] = Figure(job->bytes_exchanged_per_example);
  }
  if (pusher_ != nullptr) (*details)["serve"] = pusher_->Details();
  Emit(FinalLine(job->summary, *details));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunCpuTrainer(const TrainerConfig& config, const EventSink& sink, int64_t* step) {
  absl::StatusOr<Collectives*> comm = JobWorld();
  if (!comm.ok()) return comm.status();
  Training training(config, sink, *comm);
  absl::Status status = training.Setup();
  // A rank that failed to set up would leave the others waiting in the first step: all stop,
  // with the first failing rank's reason.
  status = (*comm)->FirstFailure(status);
  if (status.ok()) status = training.Train();
  // A stream ends when it is stopped: that is its end, not an interruption.
  if (status.ok() && training.interrupted() && !config.stream) {
    status = absl::AbortedError(absl::StrCat(
        "stopped at step ", training.step(),
        config.checkpoint_dir.empty() ? " (no checkpoint_dir: nothing saved)"
                                      : absl::StrCat("; checkpoint in ", config.checkpoint_dir)));
  }
  if (status.ok()) status = training.EvaluateAndReport();
  *step = training.step();
  return status;
}

}  // namespace evoscale::trainer
