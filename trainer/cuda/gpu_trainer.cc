#include "trainer/cuda/gpu_trainer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trainer/collectives.h"
#include "trainer/comm.h"
#include "trainer/criteo_reader.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/device_buffer.h"
#include "trainer/cuda/exchange_plan.h"
#include "trainer/cuda/gpu_embedding_table.h"
#include "trainer/cuda/gpu_mlp.h"
#include "trainer/cuda/nccl_comm.h"
#include "trainer/cuda/row_exchange.h"
#include "trainer/internal/job_report.h"
#include "trainer/internal/run_options.h"
#include "trainer/metrics.h"
#include "trainer/mlp.h"
#include "trainer/protocol.h"

namespace evoscale::trainer::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// An owned stream, destroyed after everything allocated on it (declare it first).
class Stream {
 public:
  ~Stream() {
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
  }
  absl::Status Init() {
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return absl::OkStatus();
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class GpuTraining {
 public:
  GpuTraining(const TrainerConfig& config, const GpuJob& job, const EventSink& sink)
      : config_(config),
        job_(job),
        sink_(sink),
        dim_(config.embedding_dim),
        input_(kNumCategorical * config.embedding_dim + kNumDense),
        batch_((config.batch_size + job.size - 1) / job.size),
        start_(Clock::now()) {}

  absl::Status Setup();
  absl::Status Train();
  absl::Status EvaluateAndReport();
  int64_t step() const { return step_; }

 private:
  BatchReaderOptions ReaderFor(bool for_eval) const;
  absl::Status JoinJob();
  // Uploads a batch and fills x_ (device) with its embeddings and dense features. In a job,
  // batch may be null (this rank's slice ran out during evaluation): it still answers the
  // others' ids.
  absl::Status Load(const ExampleBatch* batch, bool insert, uint32_t now);
  // A job: the batch's ids to their owners, the rows back into x_ (plan_, recv_counts_ and the
  // exchange buffers then describe the step).
  absl::Status ExchangeRows(const ExampleBatch* batch, bool insert, uint32_t now);
  // A job, after the backward pass: the rows' gradients (in x_) to their owners, applied there.
  absl::Status ExchangeGradients(uint32_t now);
  // The first n logits to host_logits_ once the step's work is done (through the communicator
  // in a job: a dead peer ends the wait).
  absl::Status LogitsToHost(int n);
  // One training step on the device: the batch's rows in, forward and backward, the dense and
  // sparse updates (over the job in a job), and the logits back in host_logits_. The loss is
  // the mean over `scale_examples` examples (the job's batch).
  absl::Status Step(const ExampleBatch& batch, int64_t scale_examples);
  // The progress line of the job's `window` (rank 0 emits it), which then starts again.
  absl::Status ReportProgress(BinaryMetrics* window);
  // A job: whether every rank has a batch for this step (job_batch_ then counts the job's
  // examples), or the first failure of any rank (`mine`: this rank's).
  absl::StatusOr<bool> AgreeOnStep(const ExampleBatch* batch, const absl::Status& mine);
  // One evaluation batch's logits into `metrics` (internal::EvaluateBatch: in a job, a rank
  // without a batch only answers the others' ids).
  absl::Status EvaluateBatch(const ExampleBatch* batch, BinaryMetrics* metrics);
  // The final line's details of the table, the model and the device.
  absl::StatusOr<nlohmann::ordered_json> Details(const trainer::internal::JobSummary& job);

  // Constant after construction.
  const TrainerConfig& config_;
  const GpuJob job_;
  const EventSink& sink_;
  const int dim_;
  const int input_;
  const int batch_;
  const Clock::time_point start_;

  Stream stream_;  // first: outlives every buffer below
  std::unique_ptr<GpuEmbeddingTable> table_;
  std::unique_ptr<GpuMlp> mlp_;
  size_t mlp_params_ = 0;
  DeviceBuffer<uint64_t> fids_;     // device, (batch, 26)
  DeviceBuffer<uint32_t> rows_;     // device, (batch, 26)
  DeviceBuffer<float> dense_;       // device, (batch, 13)
  DeviceBuffer<float> labels_;      // device, (batch)
  DeviceBuffer<float> x_;           // device, (batch, input): MLP input, then its gradient
  DeviceBuffer<float> logits_;      // device, (batch)
  DeviceBuffer<float> dlogits_;     // device, (batch)
  std::vector<float> host_logits_;  // host, (batch)

  // A job of several ranks (null: one process).
  std::unique_ptr<NcclComm> comm_;
  // The job's collectives: comm_'s, or alone_'s in a job of one.
  OneProcess alone_;
  Collectives* job_comm_ = &alone_;
  ExchangePlan plan_;                 // this step's ids by owner
  std::vector<int64_t> recv_counts_;  // per rank: ids this rank answers for it
  DeviceBuffer<uint64_t> send_keys_;  // device, plan_.send_keys
  DeviceBuffer<uint32_t> positions_;  // device, plan_.positions
  DeviceBuffer<uint32_t> rows_sent_;  // device, plan_.rows
  DeviceBuffer<uint64_t> recv_keys_;  // device, the ids asked of this rank
  DeviceBuffer<uint32_t> recv_rows_;  // device, their rows here
  DeviceBuffer<float> owned_;         // device, (asked, dim): their rows, then their gradients
  DeviceBuffer<float> asked_;         // device, (sent, dim): rows of the sent ids, then grads
  int64_t job_batch_ = 0;             // this step's examples over the job
  int64_t bytes_at_train_end_ = 0;

  int64_t step_ = 0, examples_ = 0;  // examples: the job's
  int64_t examples_here_ = 0;        // this rank's
  double train_seconds_ = 0;
  int64_t malformed_ = 0;
};

BatchReaderOptions GpuTraining::ReaderFor(bool for_eval) const {
  BatchReaderOptions options =
      trainer::internal::ReaderOptions(config_, batch_, job_.size, for_eval);
  options.filter.ranks = job_.size;
  options.filter.rank = job_.rank;
  options.dedupe = job_.size > 1;  // each distinct id of a batch travels once
  return options;
}

absl::Status GpuTraining::JoinJob() {
  const NcclComm::ShareId share = [this](ncclUniqueId* id) -> absl::Status {
    if (job_.mpi != nullptr) return job_.mpi->Broadcast(id, sizeof(*id), 0);
    const std::string mine(reinterpret_cast<const char*>(id), sizeof(*id));
    absl::StatusOr<std::string> got =
        ShareThroughFile(job_.rendezvous_file, job_.rank, mine, sizeof(*id), job_.stall_timeout_s);
    if (!got.ok()) return got.status();
    std::memcpy(id, got->data(), sizeof(*id));
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<NcclComm>> comm =
      NcclComm::Create(job_.rank, job_.size, share, stream_.get(), job_.stall_timeout_s);
  if (!comm.ok()) return comm.status();
  comm_ = *std::move(comm);
  job_comm_ = comm_.get();
  return absl::OkStatus();
}

absl::Status GpuTraining::Setup() {
  if (!config_.checkpoint_dir.empty() || config_.resume) {
    return absl::UnimplementedError("--device cuda does not write or resume checkpoints yet");
  }
  if (config_.min_count > 1 || !config_.min_count_by_slot.empty() ||
      config_.expire_after_steps > 0) {
    return absl::UnimplementedError(
        "--device cuda has no occurrence thresholds or expiry yet (use --device cpu)");
  }
  if (job_.size > 1) {
    int devices = 0;
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices));
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaSetDevice(job_.local_rank % std::max(devices, 1)));
  }
  absl::Status status = stream_.Init();
  if (!status.ok()) return status;
  if (job_.size > 1) {
    status = JoinJob();
    if (!status.ok()) return status;
  }
  cudaStream_t s = stream_.get();
  GpuEmbeddingTableOptions options;
  options.dim = dim_;
  options.init_stddev = config_.init_stddev;
  options.seed = config_.seed;
  options.optimizer = config_.sparse;
  // Rows for every id a run can see, up to 16M (2 GiB at dim 16 with Adagrad): the index does
  // not grow on the GPU.
  const int64_t rows_per_epoch =
      config_.synthetic_rows > 0 ? config_.synthetic_rows : int64_t{1} << 22;
  // A rank of a job owns its share of them, with a quarter to spare for the hash's imbalance.
  const int64_t job_rows =
      std::clamp<int64_t>(rows_per_epoch * kNumCategorical, 1 << 16, int64_t{1} << 24);
  options.max_rows =
      size_t(job_.size == 1 ? job_rows : std::max<int64_t>(1 << 16, job_rows / job_.size * 5 / 4));
  absl::StatusOr<std::unique_ptr<GpuEmbeddingTable>> table = GpuEmbeddingTable::Create(options, s);
  if (!table.ok()) return table.status();
  table_ = *std::move(table);

  // The CPU Mlp gives the initial weights, so both devices start from the same model.
  std::vector<int> sizes = {input_};
  sizes.insert(sizes.end(), config_.hidden.begin(), config_.hidden.end());
  sizes.push_back(1);
  DenseAdamConfig adam;
  adam.lr = config_.lr_dense;
  absl::StatusOr<std::unique_ptr<Mlp>> cpu_mlp = Mlp::Create(sizes, config_.seed, adam);
  if (!cpu_mlp.ok()) return cpu_mlp.status();
  GpuAdamConfig gpu_adam{adam.lr, adam.beta1, adam.beta2, adam.eps};
  absl::StatusOr<std::unique_ptr<GpuMlp>> mlp =
      GpuMlp::Create(sizes, (*cpu_mlp)->params(), gpu_adam, batch_, s);
  if (!mlp.ok()) return mlp.status();
  mlp_ = *std::move(mlp);
  mlp_params_ = mlp_->num_params();

  const size_t ids = size_t(batch_) * kNumCategorical;
  auto fids = DeviceBuffer<uint64_t>::Create(ids, s);
  auto rows = DeviceBuffer<uint32_t>::Create(ids, s);
  auto dense = DeviceBuffer<float>::Create(size_t(batch_) * kNumDense, s);
  auto labels = DeviceBuffer<float>::Create(batch_, s);
  auto x = DeviceBuffer<float>::Create(size_t(batch_) * input_, s);
  auto logits = DeviceBuffer<float>::Create(batch_, s);
  auto dlogits = DeviceBuffer<float>::Create(batch_, s);
  for (const absl::Status& st : {fids.status(), rows.status(), dense.status(), labels.status(),
                                 x.status(), logits.status(), dlogits.status()}) {
    if (!st.ok()) return st;
  }
  fids_ = *std::move(fids);
  rows_ = *std::move(rows);
  dense_ = *std::move(dense);
  labels_ = *std::move(labels);
  x_ = *std::move(x);
  logits_ = *std::move(logits);
  dlogits_ = *std::move(dlogits);
  host_logits_.assign(batch_, 0.0f);
  return absl::OkStatus();
}

absl::Status GpuTraining::Load(const ExampleBatch* batch, bool insert, uint32_t now) {
  cudaStream_t s = stream_.get();
  const int n = batch == nullptr ? 0 : batch->size;
  const size_t ids = size_t(n) * kNumCategorical;
  // The host batch stays untouched until the next synchronisation (at the end of the step).
  if (n > 0) {
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dense_.data(), batch->dense.data(),
                                                  size_t(n) * kNumDense * sizeof(float),
                                                  cudaMemcpyHostToDevice, s));
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(labels_.data(), batch->labels.data(),
                                                  size_t(n) * sizeof(float), cudaMemcpyHostToDevice,
                                                  s));
  }
  absl::Status status;
  if (comm_ != nullptr) {
    status = ExchangeRows(batch, insert, now);
  } else {
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        fids_.data(), batch->fids.data(), ids * sizeof(uint64_t), cudaMemcpyHostToDevice, s));
    status = insert ? table_->FindOrInsert(fids_.data(), ids, now, rows_.data())
                    : table_->Find(fids_.data(), ids, rows_.data());
    const RowLayout layout{kNumCategorical, input_};
    if (status.ok()) status = table_->Gather(rows_.data(), ids, layout, x_.data());
  }
  if (!status.ok() || n == 0) return status;
  return CopyColumns(dense_.data(), n, kNumDense, x_.data(), input_, kNumCategorical * dim_, s);
}

absl::Status GpuTraining::ExchangeRows(const ExampleBatch* batch, bool insert, uint32_t now) {
  cudaStream_t s = stream_.get();
  PlanExchange(batch, job_.size, &plan_);
  // The counts first (synchronous: the buffers' sizes depend on them), then the ids.
  absl::Status status = comm_->AllToAll(plan_.send_counts, &recv_counts_);
  if (!status.ok()) return status;
  const size_t sent = plan_.send_keys.size(), ids = plan_.positions.size();
  size_t asked = 0;
  for (int64_t c : recv_counts_) asked += size_t(c);
  // Grown to the largest step seen, never shrunk (the counts vary per step).
  for (const absl::Status& st :
       {DeviceBuffer<uint64_t>::Reserve(&send_keys_, sent, s),
        DeviceBuffer<uint32_t>::Reserve(&positions_, ids, s),
        DeviceBuffer<uint32_t>::Reserve(&rows_sent_, ids, s),
        DeviceBuffer<uint64_t>::Reserve(&recv_keys_, asked, s),
        DeviceBuffer<uint32_t>::Reserve(&recv_rows_, asked, s),
        DeviceBuffer<float>::Reserve(&owned_, asked * dim_, s),
        DeviceBuffer<float>::Reserve(&asked_, sent * dim_, s)}) {
    if (!st.ok()) return st;
  }
  if (sent > 0) {
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(send_keys_.data(), plan_.send_keys.data(),
                                                  sent * sizeof(uint64_t), cudaMemcpyHostToDevice,
                                                  s));
  }
  if (ids > 0) {
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(positions_.data(), plan_.positions.data(),
                                                  ids * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                                  s));
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(rows_sent_.data(), plan_.rows.data(),
                                                  ids * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                                  s));
  }
  status = comm_->AllToAllV(send_keys_.data(), plan_.send_counts, recv_keys_.data(), recv_counts_,
                            sizeof(uint64_t));
  if (!status.ok()) return status;
  // This rank's rows of the ids asked of it, in the order asked.
  status = insert ? table_->FindOrInsert(recv_keys_.data(), asked, now, recv_rows_.data())
                  : table_->Find(recv_keys_.data(), asked, recv_rows_.data());
  if (status.ok())
    status = table_->Gather(recv_rows_.data(), asked, RowLayout{1, dim_}, owned_.data());
  if (status.ok()) {
    status = comm_->AllToAllV(owned_.data(), recv_counts_, asked_.data(), plan_.send_counts,
                              sizeof(float) * dim_);
  }
  if (!status.ok()) return status;
  return ScatterRows(asked_.data(), rows_sent_.data(), positions_.data(), ids, dim_,
                     RowLayout{kNumCategorical, input_}, x_.data(), s);
}

absl::Status GpuTraining::ExchangeGradients(uint32_t now) {
  cudaStream_t s = stream_.get();
  const size_t sent = plan_.send_keys.size(), ids = plan_.positions.size();
  size_t asked = 0;
  for (int64_t c : recv_counts_) asked += size_t(c);
  // Each sent id's gradient: the sum over the positions that hold it.
  absl::Status status = SumRowsAt(x_.data(), RowLayout{kNumCategorical, input_},
                                  positions_.data(), rows_sent_.data(), ids, dim_, sent,
                                  asked_.data(), s);
  if (status.ok()) {
    status = comm_->AllToAllV(asked_.data(), plan_.send_counts, owned_.data(), recv_counts_,
                              sizeof(float) * dim_);
  }
  if (!status.ok()) return status;
  return table_->ApplyGradients(recv_rows_.data(), asked, RowLayout{1, dim_}, owned_.data(), now);
}

absl::Status GpuTraining::LogitsToHost(int n) {
  // In a job the communicator waits first: a copy to pageable memory blocks until the stream's
  // earlier work is done, which a dead peer's collective never is, out of the watchdog's sight.
  if (comm_ != nullptr) {
    absl::Status status = comm_->Synchronize();
    if (!status.ok()) return status;
  }
  if (n > 0) {
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits_.data(), logits_.data(),
                                                  size_t(n) * sizeof(float), cudaMemcpyDeviceToHost,
                                                  stream_.get()));
  }
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  return absl::OkStatus();
}

absl::StatusOr<bool> GpuTraining::AgreeOnStep(const ExampleBatch* batch, const absl::Status& mine) {
  int64_t v[3] = {batch == nullptr ? 1 : 0, batch == nullptr ? 0 : batch->size, mine.ok() ? 0 : 1};
  absl::Status status = comm_->AllReduceSum(v, 3);
  if (!status.ok()) return status;
  if (v[2] > 0) {
    status = comm_->FirstFailure(mine);
    return status.ok() ? absl::InternalError("a rank failed but none reported it") : status;
  }
  job_batch_ = v[1];
  return v[0] == 0;
}

absl::Status GpuTraining::Step(const ExampleBatch& batch, int64_t scale_examples) {
  cudaStream_t s = stream_.get();
  const int n = batch.size;
  const uint32_t now = uint32_t(step_ + 1);
  absl::Status status = Load(&batch, true, now);
  if (status.ok()) status = mlp_->Forward(x_.data(), n, logits_.data());
  if (status.ok()) {
    status = LogisticLossGradient(logits_.data(), labels_.data(), n, 1.0f / float(scale_examples),
                                  dlogits_.data(), s);
  }
  if (status.ok()) status = mlp_->Backward(x_.data(), n, dlogits_.data(), x_.data());
  if (status.ok() && comm_ != nullptr) {
    status = comm_->AllReduceSum(mlp_->gradients(), mlp_->num_params());
  }
  if (status.ok()) status = mlp_->AdamStep(step_ + 1);
  if (status.ok()) {
    if (comm_ != nullptr) {
      status = ExchangeGradients(now);
    } else {
      const size_t ids = size_t(n) * kNumCategorical;
      status = table_->ApplyGradients(rows_.data(), ids, RowLayout{kNumCategorical, input_},
                                      x_.data(), now);
    }
  }
  if (status.ok()) status = LogitsToHost(n);
  return status;
}

absl::Status GpuTraining::ReportProgress(BinaryMetrics* window) {
  // The job's window, at rank 0 (the others' sink is quiet).
  std::vector<float> logits, labels;
  absl::Status status = job_comm_->GatherToRoot(window->logits(), &logits);
  if (status.ok()) status = job_comm_->GatherToRoot(window->labels(), &labels);
  if (!status.ok()) return status;
  BinaryMetrics job;
  job.Add(logits.data(), labels.data(), logits.size());
  sink_(ProgressLine(step_, examples_, trainer::internal::SecondsSince(start_), job));
  window->Clear();
  return absl::OkStatus();
}

absl::Status GpuTraining::Train() {
  absl::StatusOr<std::unique_ptr<ExampleSource>> source =
      trainer::internal::OpenSource(config_, /*for_eval=*/false);
  if (!source.ok()) return source.status();
  BatchReader reader(*std::move(source), ReaderFor(/*for_eval=*/false));
  BinaryMetrics window;
  const Clock::time_point train_start = Clock::now();
  // A job: a rank's failure after its step's collectives (a non-finite loss) waits for the next
  // agreement, so that every rank calls the same collectives in the same order.
  absl::Status pending;
  while (config_.max_steps <= 0 || step_ < config_.max_steps) {
    absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
    if (comm_ != nullptr) {
      // Every rank steps together: stop when any slice runs out, or with any rank's failure.
      absl::StatusOr<bool> all =
          AgreeOnStep(got.ok() ? got->get() : nullptr, !pending.ok() ? pending : got.status());
      if (!all.ok()) return all.status();
      if (!*all) break;
    }
    if (!got.ok()) return got.status();
    std::unique_ptr<ExampleBatch> batch = *std::move(got);
    if (batch == nullptr) break;
    const int n = batch->size;
    const int64_t scale_examples = comm_ != nullptr ? job_batch_ : n;
    if (absl::Status status = Step(*batch, scale_examples); !status.ok()) return status;
    ++step_;
    examples_ += scale_examples;
    examples_here_ += n;
    double loss = 0;
    for (int i = 0; i < n; ++i) {
      const float z = host_logits_[i], y = batch->labels[i];
      loss += std::max(z, 0.0f) + std::log1p(std::exp(-std::fabs(z))) - y * z;
    }
    if (!std::isfinite(loss)) {
      pending = absl::InternalError(
          absl::StrCat("non-finite training loss (", loss, ") at step ", step_));
      if (comm_ == nullptr) return pending;
    }
    if (config_.progress_every > 0) {
      window.Add(host_logits_.data(), batch->labels.data(), size_t(n));
      if (step_ % config_.progress_every == 0) {
        if (absl::Status status = ReportProgress(&window); !status.ok()) return status;
      }
    }
    reader.Recycle(std::move(batch));
  }
  if (comm_ != nullptr) {
    // Every rank leaves the loop at the same step (max_steps, or the same agreement).
    absl::Status first = comm_->FirstFailure(pending);
    if (!first.ok()) return first;
  }
  train_seconds_ = trainer::internal::SecondsSince(train_start);
  malformed_ = reader.malformed();
  bytes_at_train_end_ = job_comm_->bytes_sent();
  return absl::OkStatus();
}

absl::Status GpuTraining::EvaluateBatch(const ExampleBatch* batch, BinaryMetrics* metrics) {
  const int n = batch == nullptr ? 0 : batch->size;
  absl::Status status = Load(batch, /*insert=*/false, 0);
  if (status.ok() && n > 0) status = mlp_->Forward(x_.data(), n, logits_.data());
  if (status.ok()) status = LogitsToHost(n);
  if (status.ok() && n > 0) metrics->Add(host_logits_.data(), batch->labels.data(), size_t(n));
  return status;
}

absl::Status GpuTraining::EvaluateAndReport() {
  absl::StatusOr<BinaryMetrics> metrics = trainer::internal::EvaluateJob(
      *job_comm_, config_, trainer::internal::OpenSource(config_, /*for_eval=*/true),
      ReaderFor(/*for_eval=*/true),
      [this](const ExampleBatch* batch, BinaryMetrics* m) { return EvaluateBatch(batch, m); });
  if (!metrics.ok()) return metrics.status();
  trainer::internal::RankTraining mine;
  mine.steps = step_;
  mine.examples = examples_here_;
  mine.examples_here = examples_here_;
  mine.train_s = train_seconds_;
  mine.malformed_lines = malformed_;
  mine.bytes_sent = bytes_at_train_end_;
  absl::StatusOr<trainer::internal::JobSummary> job =
      trainer::internal::SummarizeJob(*job_comm_, mine, *metrics, config_.test_path.empty());
  if (!job.ok()) return job.status();
  absl::StatusOr<nlohmann::ordered_json> details = Details(*job);
  if (!details.ok()) return details.status();
  sink_(FinalLine(job->summary, *details));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::ordered_json> GpuTraining::Details(
    const trainer::internal::JobSummary& job) {
  absl::StatusOr<size_t> rows = table_->Size();
  if (!rows.ok()) return rows.status();
  // New ids a full table gave no row, as the CPU trainer reports them.
  absl::StatusOr<uint64_t> full = table_->FullRejections();
  if (!full.ok()) return full.status();
  int device = 0;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  // The job's table: its rows and rejections over the ranks, the largest rank's device bytes.
  const int64_t device_bytes = int64_t(table_->memory_bytes());
  int64_t sums[2] = {int64_t(*rows), int64_t(*full)};
  int64_t largest = device_bytes;
  absl::Status status = job_comm_->AllReduceSum(sums, 2);
  if (status.ok()) status = job_comm_->AllReduceMax(&largest, 1);
  if (!status.ok()) return status;
  const size_t payload = size_t(sums[0]) * sizeof(float) * size_t(dim_ + table_->state_floats());
  nlohmann::ordered_json details = {{"table",
                                     {{"rows", sums[0]},
                                      {"device_bytes", device_bytes},
                                      {"payload_bytes", payload},
                                      {"full_rejections", sums[1]}}},
                                    {"dense_bytes", mlp_->memory_bytes()},
                                    {"device", "cuda"},
                                    {"gpu", std::string(prop.name)}};
  if (job_comm_->distributed()) {
    details["ranks"] = job_.size;
    details["rank_device_bytes"] = largest;
    details["bytes_exchanged_per_example"] = Figure(job.bytes_exchanged_per_example);
  }
  return details;
}

}  // namespace

absl::Status RunGpuTrainer(const TrainerConfig& config, const GpuJob& job, const EventSink& sink,
                           int64_t* step) {
  GpuTraining training(config, job, sink);
  absl::Status status = training.Setup();
  if (status.ok()) status = training.Train();
  if (status.ok()) status = training.EvaluateAndReport();
  *step = training.step();
  return status;
}

}  // namespace evoscale::trainer::cuda
