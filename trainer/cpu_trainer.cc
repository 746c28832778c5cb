#include "trainer/cpu_trainer.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/checkpoint.h"
#include "trainer/criteo_reader.h"
#include "trainer/embedding_table.h"
#include "trainer/internal/run_options.h"
#include "trainer/metrics.h"
#include "trainer/mlp.h"
#include "trainer/protocol.h"
#include "trainer/stop_request.h"

namespace evoscale::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// One shard: its table (owned by one worker) and that worker's per-batch scratch.
struct Shard {
  std::unique_ptr<EmbeddingTable> table;
  std::vector<uint64_t> keys;     // ids routed here in this batch
  std::vector<uint32_t> local;    // their index in `uniques` (kNoRow: no row)
  std::vector<uint32_t> uniques;  // distinct rows of this batch
  std::vector<float> grads;       // (uniques, dim): summed gradients
  int64_t evicted = 0;
  absl::Status checkpoint_status;
};

// One training run. Each step, every worker (Worker(t)) goes through:
//   1. gather: look up (inserting) its shards' ids of the batch and copy their rows into x_;
//      copy its slice's dense features                                   -> barrier A
//   2. MLP forward/backward on its slice of the batch; the input gradient replaces x_ -> barrier B
//   3. Adam on its slice of the MLP parameters; sum each of its rows' gradients from x_ and apply
//      the sparse optimizer; evict expired rows                          -> barrier C
//   4. on checkpoint steps, write its shards' files                     -> barrier D
// Barrier C's completion (OnStepEnd) runs alone: it counts the step, checks the loss, reports
// progress, takes the next batch from the reader and decides on checkpoints; D's completion
// writes the dense state and the manifest.
class Training {
 public:
  Training(const TrainerConfig& config, const EventSink& sink)
      : config_(config),
        sink_(sink),
        threads_(config.threads),
        num_shards_(config.shards > 0 ? config.shards : config.threads),
        dim_(config.embedding_dim),
        input_(kNumCategorical * config.embedding_dim + kNumDense),
        optimizer_(config.sparse),
        start_(Clock::now()),
        barrier_a_(threads_),
        barrier_b_(threads_),
        barrier_c_(threads_, StepEnd{this}),
        barrier_d_(threads_, CheckpointEnd{this}) {}

  absl::Status Setup();
  absl::Status Train();
  absl::Status EvaluateAndReport();
  int64_t step() const { return step_; }
  bool interrupted() const { return interrupted_; }

 private:
  // EvaluateAndReport's steps: the test (or held-out) set's metrics, one batch's input rows
  // (embeddings of the trained ids, zeros for unseen ones, then the dense features), and the
  // final line's details of the tables and the model.
  absl::StatusOr<BinaryMetrics> Evaluate();
  void GatherEvalInputs(const ExampleBatch& batch, std::vector<uint32_t>* rows);
  nlohmann::ordered_json ModelDetails(uint64_t peak_rss_bytes) const;

  struct StepEnd {
    Training* t;
    void operator()() noexcept { t->OnStepEnd(); }
  };
  struct CheckpointEnd {
    Training* t;
    void operator()() noexcept { t->OnCheckpointEnd(); }
  };

  absl::Status Resume();
  absl::StatusOr<std::unique_ptr<ExampleSource>> OpenSource(bool for_eval,
                                                            ReaderPosition start) const;
  void Worker(int t);
  void Gather(Shard& shard, const std::vector<uint32_t>& positions, const ExampleBatch& batch,
              uint32_t now, float* x) const;
  void ApplyGradients(Shard& shard, const std::vector<uint32_t>& positions, uint32_t now);
  void OnStepEnd();
  void OnCheckpointEnd();
  void Fail(absl::Status status);
  bool EvictAt(int64_t step) const {
    return config_.expire_after_steps > 0 && config_.evict_every > 0 &&
           step % config_.evict_every == 0;
  }
  void Emit(const std::string& line) const { sink_(line); }

  // Constant after construction.
  const TrainerConfig& config_;
  const EventSink& sink_;
  const int threads_;
  const int num_shards_;
  const int dim_;
  const int input_;
  const SparseOptimizer optimizer_;
  const Clock::time_point start_;

  std::vector<Shard> shards_;  // shard s is touched only by worker s % threads_
  std::unique_ptr<Mlp> mlp_;
  std::vector<Mlp::Workspace> workspaces_;  // one per worker
  std::vector<Mlp::Workspace*> workspace_ptrs_;
  std::unique_ptr<BatchReader> reader_;

  // Batch buffers: workers write disjoint parts between barriers. x_ holds the MLP's input
  // (batch, input) until the backward pass, which overwrites it with the input's gradient
  // (Mlp::Backward allows dx == x); a second buffer of that size would only add to peak memory.
  std::vector<float> x_, logits_, dlogits_;
  std::vector<double> loss_parts_;  // per worker

  // Written only by barrier completions (one thread, all others waiting) and before/after the
  // workers run; read by workers after a barrier.
  std::unique_ptr<ExampleBatch> batch_;
  int64_t step_ = 0;      // steps completed (including those before a resume)
  int64_t examples_ = 0;  // training examples consumed (including before a resume)
  int64_t adam_step_ = 0;
  int64_t steps_here_ = 0, examples_here_ = 0;  // in this process
  ReaderPosition position_;
  bool checkpoint_now_ = false;
  bool evict_now_ = false;
  std::vector<std::string> chain_;
  absl::Status status_;
  BinaryMetrics window_;
  Clock::time_point train_start_;
  double train_seconds_ = 0;
  int64_t malformed_ = 0;
  int64_t checkpoints_written_ = 0;
  bool interrupted_ = false;  // stopped by RequestStop() before the data ran out

  std::barrier<> barrier_a_;               // inputs gathered
  std::barrier<> barrier_b_;               // gradients computed
  std::barrier<StepEnd> barrier_c_;        // parameters updated; next batch fetched
  std::barrier<CheckpointEnd> barrier_d_;  // shard checkpoints written
};

absl::Status Training::Setup() {
  EmbeddingTableOptions options;
  options.dim = dim_;
  options.state_floats = optimizer_.StateFloats(dim_);
  options.init_value = config_.init_stddev;
  options.seed = config_.seed;
  options.initial_capacity = 1 << 14;
  // Address space only, committed as rows arrive: 64 GiB of rows across all shards.
  options.max_rows = std::max<size_t>(
      size_t{1} << 16, (size_t{1} << 36) / num_shards_ / (16 + 4 * (dim_ + options.state_floats)));
  options.max_rows = std::min<size_t>(options.max_rows, EmbeddingTable::kNoRow - 1);
  options.track_changes = !config_.checkpoint_dir.empty();
  if (config_.min_count > 1 || !config_.min_count_by_slot.empty()) {
    options.min_count_by_slot.assign(kNumCategorical, config_.min_count);
    for (size_t s = 0; s < config_.min_count_by_slot.size() && s < kNumCategorical; ++s) {
      if (config_.min_count_by_slot[s] > 0)
        options.min_count_by_slot[s] = config_.min_count_by_slot[s];
    }
  }
  const SparseOptimizer* opt = &optimizer_;
  const int dim = dim_;
  options.init_state = [opt, dim](const float* w, float* state) { opt->InitState(w, state, dim); };
  shards_.resize(num_shards_);
  for (Shard& shard : shards_) {
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
  const int slice = (config_.batch_size + threads_ - 1) / threads_;
  for (int t = 0; t < threads_; ++t) workspaces_.push_back(mlp_->NewWorkspace(slice));
  for (auto& ws : workspaces_) workspace_ptrs_.push_back(&ws);
  x_.assign(size_t(config_.batch_size) * input_, 0.0f);
  logits_.assign(config_.batch_size, 0.0f);
  dlogits_.assign(config_.batch_size, 0.0f);
  loss_parts_.assign(threads_, 0.0);

  if (!config_.checkpoint_dir.empty()) {
    if (config_.resume) {
      absl::Status status = Resume();
      if (!status.ok()) return status;
    } else {
      // A fresh run owns the directory: earlier checkpoints would otherwise look newer.
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(config_.checkpoint_dir, ec)) {
        if (entry.path().filename().string().rfind("ckpt-", 0) == 0) {
          std::filesystem::remove_all(entry.path(), ec);
        }
      }
    }
  }
  absl::StatusOr<std::unique_ptr<ExampleSource>> source = OpenSource(false, position_);
  if (!source.ok()) return source.status();
  reader_ = std::make_unique<BatchReader>(
      *std::move(source), internal::ReaderOptions(config_, config_.batch_size, num_shards_,
                                                  /*for_eval=*/false));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExampleSource>> Training::OpenSource(bool for_eval,
                                                                    ReaderPosition start) const {
  if (config_.synthetic_rows > 0) {
    if (for_eval && !config_.test_path.empty()) return OpenCriteoFile(config_.test_path, 1);
    return MakeSyntheticSource(config_.synthetic_rows, config_.seed + 1,
                               for_eval ? 1 : config_.epochs, start);
  }
  if (for_eval) {
    return OpenCriteoFile(config_.test_path.empty() ? config_.train_path : config_.test_path, 1);
  }
  return OpenCriteoFile(config_.train_path, config_.epochs, start);
}

absl::Status Training::Resume() {
  absl::StatusOr<CheckpointManifest> found = FindNewestCheckpoint(config_.checkpoint_dir);
  if (absl::IsNotFound(found.status())) return absl::OkStatus();  // nothing yet: start fresh
  if (!found.ok()) return found.status();
  const CheckpointManifest& m = *found;
  const std::string sizes = absl::StrJoin(mlp_->sizes(), ",");
  auto mismatch = [&](const char* what, const std::string& have, const std::string& want) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", config_.checkpoint_dir, "/",
                                                      m.chain.back(), " has ", what, " ", have,
                                                      " but this run has ", want));
  };
  if (m.shards != num_shards_) {
    return mismatch("shards", absl::StrCat(m.shards), absl::StrCat(num_shards_));
  }
  if (m.dim != dim_) return mismatch("embedding-dim", absl::StrCat(m.dim), absl::StrCat(dim_));
  if (m.optimizer != SparseOptimizerName(config_.sparse.kind)) {
    return mismatch("optimizer-sparse", m.optimizer,
                    std::string(SparseOptimizerName(config_.sparse.kind)));
  }
  if (m.mlp_sizes != sizes) return mismatch("MLP sizes", m.mlp_sizes, sizes);
  // Shards load in parallel, each by the worker that will own it.
  std::vector<std::thread> loaders;
  for (int t = 0; t < threads_; ++t) {
    loaders.emplace_back([&, t] {
      for (int s = t; s < num_shards_; s += threads_) {
        shards_[s].checkpoint_status =
            LoadShardCheckpoint(config_.checkpoint_dir, m, s, *shards_[s].table);
      }
    });
  }
  for (auto& th : loaders) th.join();
  for (Shard& shard : shards_) {
    if (!shard.checkpoint_status.ok()) return shard.checkpoint_status;
    std::vector<uint32_t> rows;
    std::vector<uint64_t> erased;
    shard.table->TakeChanges(uint32_t(m.step), &rows, &erased);  // changes count from here
  }
  absl::Status status = LoadDenseCheckpoint(config_.checkpoint_dir, m, &adam_step_, mlp_->params(),
                                            mlp_->adam_m(), mlp_->adam_v());
  if (!status.ok()) return status;
  step_ = m.step;
  examples_ = m.examples;
  position_ = m.position;
  chain_ = m.chain;
  return absl::OkStatus();
}

void Training::Gather(Shard& shard, const std::vector<uint32_t>& positions,
                      const ExampleBatch& batch, uint32_t now, float* x) const {
  const size_t m = positions.size();
  shard.keys.resize(m);
  shard.local.resize(m);
  for (size_t k = 0; k < m; ++k) shard.keys[k] = batch.fids[positions[k]];
  EmbeddingTable& table = *shard.table;
  shard.uniques.clear();
  const size_t row_bytes = sizeof(float) * dim_;
  // Copy each row out as soon as its lookup resolves, while it is still in cache.
  table.FindOrInsertBatch(shard.keys.data(), m, now, [&](size_t k, uint32_t row) {
    const uint32_t p = positions[k];
    float* dst = x + size_t(p / kNumCategorical) * input_ + size_t(p % kNumCategorical) * dim_;
    if (row == EmbeddingTable::kNoRow) {
      std::memset(dst, 0, row_bytes);
      shard.local[k] = EmbeddingTable::kNoRow;
      return;
    }
    RowHeader* h = table.header(row);
    if (h->scratch == 0) {
      shard.uniques.push_back(row);
      h->scratch = uint32_t(shard.uniques.size());
    }
    shard.local[k] = h->scratch - 1;
    std::memcpy(dst, table.embedding(row), row_bytes);
  });
}

void Training::ApplyGradients(Shard& shard, const std::vector<uint32_t>& positions, uint32_t now) {
  const size_t u = shard.uniques.size();
  shard.grads.assign(u * dim_, 0.0f);
  for (size_t k = 0; k < positions.size(); ++k) {
    const uint32_t local = shard.local[k];
    if (local == EmbeddingTable::kNoRow) continue;
    const uint32_t p = positions[k];
    const float* src =
        x_.data() + size_t(p / kNumCategorical) * input_ + size_t(p % kNumCategorical) * dim_;
    float* g = shard.grads.data() + size_t(local) * dim_;
    for (int d = 0; d < dim_; ++d) g[d] += src[d];
  }
  EmbeddingTable& table = *shard.table;
  for (size_t i = 0; i < u; ++i) {
    if (i + 8 < u) __builtin_prefetch(table.header(shard.uniques[i + 8]), 1, 3);
    const uint32_t row = shard.uniques[i];
    optimizer_.Apply(table.embedding(row), table.state(row), shard.grads.data() + i * dim_, dim_);
    table.MarkUpdated(row, now);
    table.header(row)->scratch = 0;
  }
}

void Training::Worker(int t) {
  while (true) {
    const ExampleBatch* batch = batch_.get();
    if (batch == nullptr) return;
    const int n = batch->size;
    const uint32_t now = uint32_t(step_ + 1);
    // Phase 1: owners gather their shards' rows; everyone copies dense features of its slice.
    for (int s = t; s < num_shards_; s += threads_) {
      Gather(shards_[s], batch->shard_positions[s], *batch, now, x_.data());
    }
    const int r0 = int(int64_t(n) * t / threads_), r1 = int(int64_t(n) * (t + 1) / threads_);
    for (int i = r0; i < r1; ++i) {
      std::memcpy(&x_[size_t(i) * input_ + kNumCategorical * dim_],
                  &batch->dense[size_t(i) * kNumDense], sizeof(float) * kNumDense);
    }
    barrier_a_.arrive_and_wait();
    // Phase 2: the MLP on this worker's slice of the batch.
    Mlp::Workspace& ws = workspaces_[t];
    double loss = 0;
    if (r1 > r0) {
      const float* x = &x_[size_t(r0) * input_];
      mlp_->Forward(ws, x, r1 - r0, &logits_[r0]);
      const float scale = 1.0f / float(n);
      for (int i = r0; i < r1; ++i) {
        const float z = logits_[i], y = batch->labels[i];
        loss += std::max(z, 0.0f) + std::log1p(std::exp(-std::fabs(z))) - y * z;
        dlogits_[i] = (1.0f / (1.0f + std::exp(-z)) - y) * scale;
      }
      mlp_->Backward(ws, x, r1 - r0, &dlogits_[r0], &x_[size_t(r0) * input_]);
    } else {
      std::fill(ws.grads.begin(), ws.grads.end(), 0.0f);
    }
    loss_parts_[t] = loss;
    barrier_b_.arrive_and_wait();
    // Phase 3: Adam on this worker's parameter range; sparse updates of its shards.
    const size_t params = mlp_->num_params();
    mlp_->AdamStep(workspace_ptrs_, params * t / threads_, params * (t + 1) / threads_,
                   adam_step_ + 1);
    for (int s = t; s < num_shards_; s += threads_) {
      ApplyGradients(shards_[s], batch->shard_positions[s], now);
      if (evict_now_ && int64_t(now) > config_.expire_after_steps) {
        shards_[s].evicted +=
            int64_t(shards_[s].table->EvictOlderThan(uint32_t(now - config_.expire_after_steps)));
      }
    }
    barrier_c_.arrive_and_wait();
    if (checkpoint_now_) {
      const bool full = chain_.empty() || int(chain_.size()) >= config_.full_checkpoint_every;
      for (int s = t; s < num_shards_; s += threads_) {
        shards_[s].checkpoint_status =
            WriteShardCheckpoint(config_.checkpoint_dir, CheckpointName(step_), s, full,
                                 uint32_t(step_), *shards_[s].table);
      }
      barrier_d_.arrive_and_wait();
    }
  }
}

void Training::Fail(absl::Status status) {
  status_ = std::move(status);
  checkpoint_now_ = false;
  if (batch_ != nullptr) reader_->Recycle(std::move(batch_));
  batch_.reset();
}

void Training::OnStepEnd() {
  const int n = batch_->size;
  ++step_;
  ++adam_step_;
  ++steps_here_;
  examples_ += n;
  examples_here_ += n;
  double loss = 0;
  for (double part : loss_parts_) loss += part;
  if (!std::isfinite(loss)) {
    Fail(
        absl::InternalError(absl::StrCat("non-finite training loss (", loss, ") at step ", step_)));
    return;
  }
  if (config_.progress_every > 0) window_.Add(logits_.data(), batch_->labels.data(), size_t(n));
  if (config_.progress_every > 0 && step_ % config_.progress_every == 0) {
    Emit(ProgressLine(step_, examples_, internal::SecondsSince(start_), window_));
    window_.Clear();
  }
  position_ = batch_->end;
  reader_->Recycle(std::move(batch_));
  const bool last = config_.max_steps > 0 && step_ >= config_.max_steps;
  if (!last) {
    absl::StatusOr<std::unique_ptr<ExampleBatch>> next = reader_->Next();
    if (!next.ok()) {
      Fail(next.status());
      return;
    }
    batch_ = *std::move(next);
  }
  if (batch_ != nullptr && StopRequested()) {
    // Asked to stop: this step is the last; its checkpoint (below) is where a resume starts.
    interrupted_ = true;
    reader_->Recycle(std::move(batch_));
    batch_.reset();
  }
  checkpoint_now_ = !config_.checkpoint_dir.empty() &&
                    ((config_.checkpoint_every > 0 && step_ % config_.checkpoint_every == 0) ||
                     batch_ == nullptr);
  evict_now_ = EvictAt(step_ + 1);
}

void Training::OnCheckpointEnd() {
  for (Shard& shard : shards_) {
    if (!shard.checkpoint_status.ok()) {
      Fail(shard.checkpoint_status);
      return;
    }
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
  absl::Status status = WriteDenseAndManifest(config_.checkpoint_dir, m, adam_step_, mlp_->params(),
                                              mlp_->adam_m(), mlp_->adam_v());
  if (!status.ok()) {
    Fail(status);
    return;
  }
  ++checkpoints_written_;
  Emit(CheckpointLine(step_, examples_, full, config_.checkpoint_dir + "/" + chain_.back()));
}

absl::Status Training::Train() {
  absl::StatusOr<std::unique_ptr<ExampleBatch>> first = reader_->Next();
  if (!first.ok()) return first.status();
  batch_ = *std::move(first);
  if (config_.max_steps > 0 && step_ >= config_.max_steps) batch_.reset();
  evict_now_ = EvictAt(step_ + 1);
  train_start_ = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads_; ++t) workers.emplace_back([this, t] { Worker(t); });
  Worker(0);
  for (auto& w : workers) w.join();
  train_seconds_ = internal::SecondsSince(train_start_);
  malformed_ = reader_->malformed();
  reader_.reset();
  return status_;
}

absl::StatusOr<BinaryMetrics> Training::Evaluate() {
  absl::StatusOr<std::unique_ptr<ExampleSource>> source = OpenSource(true, {});
  if (!source.ok()) return source.status();
  const BatchReaderOptions options =
      internal::ReaderOptions(config_, config_.batch_size, num_shards_, /*for_eval=*/true);
  BinaryMetrics metrics;
  if (config_.test_path.empty() && options.filter.holdout_every <= 0) return metrics;
  BatchReader reader(*std::move(source), options);
  Mlp::Workspace& ws = workspaces_[0];
  std::vector<uint32_t> rows;
  while (true) {
    absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
    if (!got.ok()) return got.status();
    std::unique_ptr<ExampleBatch> batch = *std::move(got);
    if (batch == nullptr) break;
    const int n = batch->size;
    GatherEvalInputs(*batch, &rows);
    for (int r0 = 0; r0 < n; r0 += ws.max_rows) {
      const int r1 = std::min(n, r0 + ws.max_rows);
      mlp_->Forward(ws, &x_[size_t(r0) * input_], r1 - r0, &logits_[r0]);
    }
    metrics.Add(logits_.data(), batch->labels.data(), size_t(n));
    reader.Recycle(std::move(batch));
  }
  return metrics;
}

void Training::GatherEvalInputs(const ExampleBatch& batch, std::vector<uint32_t>* rows) {
  for (int s = 0; s < num_shards_; ++s) {
    Shard& shard = shards_[s];
    const auto& positions = batch.shard_positions[s];
    shard.keys.resize(positions.size());
    rows->resize(positions.size());
    for (size_t k = 0; k < positions.size(); ++k) shard.keys[k] = batch.fids[positions[k]];
    shard.table->FindBatch(shard.keys.data(), positions.size(), rows->data());
    for (size_t k = 0; k < positions.size(); ++k) {
      const uint32_t p = positions[k];
      float* dst =
          x_.data() + size_t(p / kNumCategorical) * input_ + size_t(p % kNumCategorical) * dim_;
      if ((*rows)[k] == EmbeddingTable::kNoRow) {
        std::memset(dst, 0, sizeof(float) * dim_);  // never trained: no information
      } else {
        std::memcpy(dst, shard.table->embedding((*rows)[k]), sizeof(float) * dim_);
      }
    }
  }
  for (int i = 0; i < batch.size; ++i) {
    std::memcpy(&x_[size_t(i) * input_ + kNumCategorical * dim_],
                &batch.dense[size_t(i) * kNumDense], sizeof(float) * kNumDense);
  }
}

nlohmann::ordered_json Training::ModelDetails(uint64_t peak_rss_bytes) const {
  size_t rows = 0, table_bytes = 0, payload = 0, pending = 0, full = 0;
  int64_t evicted = 0;
  std::vector<size_t> shard_rows;
  for (const Shard& shard : shards_) {
    rows += shard.table->size();
    table_bytes += shard.table->memory_bytes();
    payload += shard.table->payload_bytes();
    pending += shard.table->pending_count();
    full += shard.table->full_rejections();
    evicted += shard.evicted;
    shard_rows.push_back(shard.table->size());
  }
  const double peak = double(peak_rss_bytes);
  // What the model must occupy however it is stored: per row its id, embedding and optimizer
  // state; the MLP's weights and Adam moments.
  const size_t model_bytes = payload + rows * sizeof(uint64_t) + mlp_->memory_bytes();
  return {
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
      {"rss_over_payload",
       Figure(payload > 0 ? peak / double(payload + mlp_->memory_bytes()) : 0)},
      {"threads", threads_},
      {"shards", num_shards_},
      {"isa", mlp_->isa()},
      {"checkpoints", checkpoints_written_}};
}

absl::Status Training::EvaluateAndReport() {
  absl::StatusOr<BinaryMetrics> metrics = Evaluate();
  if (!metrics.ok()) return metrics.status();
  FinalSummary summary;
  summary.examples_per_s = train_seconds_ > 0 ? double(examples_here_) / train_seconds_ : 0;
  summary.peak_rss_bytes = PeakRssBytes();
  summary.auc = metrics->Auc();
  summary.logloss = metrics->LogLoss();
  summary.eval_examples = int64_t(metrics->count());
  summary.holdout = config_.test_path.empty();
  summary.steps = step_;
  summary.examples = examples_;
  summary.train_s = train_seconds_;
  summary.malformed_lines = malformed_;
  Emit(FinalLine(summary, ModelDetails(summary.peak_rss_bytes)));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunCpuTrainer(const TrainerConfig& config, const EventSink& sink, int64_t* step) {
  Training training(config, sink);
  absl::Status status = training.Setup();
  if (status.ok()) status = training.Train();
  if (status.ok() && training.interrupted()) {
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
