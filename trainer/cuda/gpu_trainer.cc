#include "trainer/cuda/gpu_trainer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trainer/criteo_reader.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/device_buffer.h"
#include "trainer/cuda/gpu_embedding_table.h"
#include "trainer/cuda/gpu_mlp.h"
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
  GpuTraining(const TrainerConfig& config, const EventSink& sink)
      : config_(config),
        sink_(sink),
        dim_(config.embedding_dim),
        input_(kNumCategorical * config.embedding_dim + kNumDense),
        batch_(config.batch_size),
        start_(Clock::now()) {}

  absl::Status Setup();
  absl::Status Train();
  absl::Status EvaluateAndReport();
  int64_t step() const { return step_; }

 private:
  absl::StatusOr<std::unique_ptr<ExampleSource>> OpenSource(bool for_eval) const;
  // Uploads a batch and fills x_ (device) with its embeddings and dense features.
  absl::Status Load(const ExampleBatch& batch, bool insert, uint32_t now);

  // Constant after construction.
  const TrainerConfig& config_;
  const EventSink& sink_;
  const int dim_;
  const int input_;
  const int batch_;
  const Clock::time_point start_;

  Stream stream_;  // first: outlives every buffer below
  std::unique_ptr<GpuEmbeddingTable> table_;
  std::unique_ptr<GpuMlp> mlp_;
  size_t mlp_params_ = 0;
  DeviceBuffer<uint64_t> fids_;    // device, (batch, 26)
  DeviceBuffer<uint32_t> rows_;    // device, (batch, 26)
  DeviceBuffer<float> dense_;      // device, (batch, 13)
  DeviceBuffer<float> labels_;     // device, (batch)
  DeviceBuffer<float> x_;          // device, (batch, input): MLP input, then its gradient
  DeviceBuffer<float> logits_;     // device, (batch)
  DeviceBuffer<float> dlogits_;    // device, (batch)
  std::vector<float> host_logits_;  // host, (batch)

  int64_t step_ = 0, examples_ = 0;
  double train_seconds_ = 0;
  int64_t malformed_ = 0;
};

absl::StatusOr<std::unique_ptr<ExampleSource>> GpuTraining::OpenSource(bool for_eval) const {
  if (config_.synthetic_rows > 0) {
    if (for_eval && !config_.test_path.empty()) return OpenCriteoFile(config_.test_path, 1);
    return MakeSyntheticSource(config_.synthetic_rows, config_.seed + 1,
                               for_eval ? 1 : config_.epochs);
  }
  if (for_eval) {
    return OpenCriteoFile(config_.test_path.empty() ? config_.train_path : config_.test_path, 1);
  }
  return OpenCriteoFile(config_.train_path, config_.epochs);
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
  absl::Status status = stream_.Init();
  if (!status.ok()) return status;
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
  options.max_rows = size_t(std::clamp<int64_t>(rows_per_epoch * kNumCategorical, 1 << 16,
                                                int64_t{1} << 24));
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

absl::Status GpuTraining::Load(const ExampleBatch& batch, bool insert, uint32_t now) {
  cudaStream_t s = stream_.get();
  const int n = batch.size;
  const size_t ids = size_t(n) * kNumCategorical;
  // The host batch stays untouched until the next synchronisation (at the end of the step).
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(fids_.data(), batch.fids.data(),
                                                ids * sizeof(uint64_t), cudaMemcpyHostToDevice, s));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dense_.data(), batch.dense.data(),
                                                size_t(n) * kNumDense * sizeof(float),
                                                cudaMemcpyHostToDevice, s));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(labels_.data(), batch.labels.data(),
                                                size_t(n) * sizeof(float), cudaMemcpyHostToDevice,
                                                s));
  absl::Status status = insert ? table_->FindOrInsert(fids_.data(), ids, now, rows_.data())
                               : table_->Find(fids_.data(), ids, rows_.data());
  if (!status.ok()) return status;
  const RowLayout layout{kNumCategorical, input_};
  status = table_->Gather(rows_.data(), ids, layout, x_.data());
  if (!status.ok()) return status;
  return CopyColumns(dense_.data(), n, kNumDense, x_.data(), input_, kNumCategorical * dim_, s);
}

absl::Status GpuTraining::Train() {
  absl::StatusOr<std::unique_ptr<ExampleSource>> source = OpenSource(false);
  if (!source.ok()) return source.status();
  BatchReader reader(*std::move(source),
                     trainer::internal::ReaderOptions(config_, batch_, 1, /*for_eval=*/false));
  cudaStream_t s = stream_.get();
  BinaryMetrics window;
  const Clock::time_point train_start = Clock::now();
  while (config_.max_steps <= 0 || step_ < config_.max_steps) {
    absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
    if (!got.ok()) return got.status();
    std::unique_ptr<ExampleBatch> batch = *std::move(got);
    if (batch == nullptr) break;
    const int n = batch->size;
    const uint32_t now = uint32_t(step_ + 1);
    absl::Status status = Load(*batch, true, now);
    if (status.ok()) status = mlp_->Forward(x_.data(), n, logits_.data());
    if (status.ok()) {
      status = LogisticLossGradient(logits_.data(), labels_.data(), n, 1.0f / float(n),
                                    dlogits_.data(), s);
    }
    if (status.ok()) status = mlp_->Backward(x_.data(), n, dlogits_.data(), x_.data());
    if (status.ok()) status = mlp_->AdamStep(step_ + 1);
    if (status.ok()) {
      const size_t ids = size_t(n) * kNumCategorical;
      status = table_->ApplyGradients(rows_.data(), ids, RowLayout{kNumCategorical, input_},
                                      x_.data(), now);
    }
    if (!status.ok()) return status;
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits_.data(), logits_.data(),
                                                  size_t(n) * sizeof(float),
                                                  cudaMemcpyDeviceToHost, s));
    EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    ++step_;
    examples_ += n;
    double loss = 0;
    for (int i = 0; i < n; ++i) {
      const float z = host_logits_[i], y = batch->labels[i];
      loss += std::max(z, 0.0f) + std::log1p(std::exp(-std::fabs(z))) - y * z;
    }
    if (!std::isfinite(loss)) {
      return absl::InternalError(
          absl::StrCat("non-finite training loss (", loss, ") at step ", step_));
    }
    if (config_.progress_every > 0) {
      window.Add(host_logits_.data(), batch->labels.data(), size_t(n));
      if (step_ % config_.progress_every == 0) {
        sink_(ProgressLine(step_, examples_, trainer::internal::SecondsSince(start_), window));
        window.Clear();
      }
    }
    reader.Recycle(std::move(batch));
  }
  train_seconds_ = trainer::internal::SecondsSince(train_start);
  malformed_ = reader.malformed();
  return absl::OkStatus();
}

absl::Status GpuTraining::EvaluateAndReport() {
  absl::StatusOr<std::unique_ptr<ExampleSource>> source = OpenSource(true);
  if (!source.ok()) return source.status();
  const BatchReaderOptions options =
      trainer::internal::ReaderOptions(config_, batch_, 1, /*for_eval=*/true);
  const bool holdout = config_.test_path.empty();
  cudaStream_t s = stream_.get();
  BinaryMetrics metrics;
  if (!holdout || options.filter.holdout_every > 0) {
    BatchReader reader(*std::move(source), options);
    while (true) {
      absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
      if (!got.ok()) return got.status();
      std::unique_ptr<ExampleBatch> batch = *std::move(got);
      if (batch == nullptr) break;
      const int n = batch->size;
      absl::Status status = Load(*batch, false, 0);
      if (status.ok()) status = mlp_->Forward(x_.data(), n, logits_.data());
      if (!status.ok()) return status;
      EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits_.data(), logits_.data(),
                                                    size_t(n) * sizeof(float),
                                                    cudaMemcpyDeviceToHost, s));
      EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      metrics.Add(host_logits_.data(), batch->labels.data(), size_t(n));
      reader.Recycle(std::move(batch));
    }
  }
  absl::StatusOr<size_t> rows = table_->Size();
  if (!rows.ok()) return rows.status();
  // New ids a full table gave no row, as the CPU trainer reports them.
  absl::StatusOr<uint64_t> full = table_->FullRejections();
  if (!full.ok()) return full.status();
  int device = 0;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  FinalSummary summary;
  summary.examples_per_s = train_seconds_ > 0 ? double(examples_) / train_seconds_ : 0;
  summary.peak_rss_bytes = PeakRssBytes();
  summary.auc = metrics.Auc();
  summary.logloss = metrics.LogLoss();
  summary.eval_examples = int64_t(metrics.count());
  summary.holdout = holdout;
  summary.steps = step_;
  summary.examples = examples_;
  summary.train_s = train_seconds_;
  summary.malformed_lines = malformed_;
  const size_t payload = *rows * sizeof(float) * size_t(dim_ + table_->state_floats());
  sink_(FinalLine(summary, {{"table",
                             {{"rows", *rows},
                              {"device_bytes", table_->memory_bytes()},
                              {"payload_bytes", payload},
                              {"full_rejections", *full}}},
                            {"dense_bytes", mlp_->memory_bytes()},
                            {"device", "cuda"},
                            {"gpu", std::string(prop.name)}}));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunGpuTrainer(const TrainerConfig& config, const EventSink& sink, int64_t* step) {
  GpuTraining training(config, sink);
  absl::Status status = training.Setup();
  if (status.ok()) status = training.Train();
  if (status.ok()) status = training.EvaluateAndReport();
  *step = training.step();
  return status;
}

}  // namespace evoscale::trainer::cuda
