// The CUDA path against the CPU path (label "gpu"): same seed, same rows, same updates, same
// training curve within float tolerance. Skips only when there is no CUDA device (or no NVIDIA
// driver at all); any other CUDA error, an old driver included, fails every test.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "trainer/cuda/cublas_api.h"
#include "trainer/cuda/device_buffer.h"
#include "trainer/cuda/gpu_embedding_table.h"
#include "trainer/cuda/gpu_mlp.h"
#include "trainer/embedding_table.h"
#include "trainer/feature_id.h"
#include "trainer/gpu.h"
#include "trainer/mlp.h"
#include "trainer/sparse_optimizer.h"
#include "trainer/trainer.h"

namespace evoscale::trainer {
namespace {

using cuda::DeviceBuffer;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // CudaDeviceCount answers 0 for "nothing to run on" only; a GPU machine that cannot run
    // (old driver, stub libcuda, ...) is an error here, not a skip.
    absl::StatusOr<int> devices = CudaDeviceCount();
    ASSERT_TRUE(devices.ok()) << devices.status();
    if (*devices == 0) GTEST_SKIP() << "no CUDA device (cudaErrorNoDevice, or no driver installed)";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  template <typename T>
  DeviceBuffer<T> Upload(const std::vector<T>& host) {
    auto buffer = DeviceBuffer<T>::Create(host.size(), stream_);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ(cudaMemcpyAsync(buffer->data(), host.data(), host.size() * sizeof(T),
                              cudaMemcpyHostToDevice, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return *std::move(buffer);
  }
  template <typename T>
  std::vector<T> Download(const T* device, size_t n) {
    std::vector<T> host(n);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return host;
  }

  cudaStream_t stream_ = nullptr;
};

// Needs the library only, no device.
TEST(CublasApiTest, OpensCublasAtRunTime) {
  absl::StatusOr<const cuda::CublasApi*> api = cuda::Cublas();
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_STREQ((*api)->status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
}

constexpr int kDim = 8;

// Ids from 4 slots with many repeats, as a batch has them.
std::vector<uint64_t> Keys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = MakeFid(uint32_t(rng() % 4), rng() % 300);
  return keys;
}

std::unique_ptr<EmbeddingTable> CpuTable(const SparseOptimizer& opt) {
  EmbeddingTableOptions o;
  o.dim = kDim;
  o.state_floats = opt.StateFloats(kDim);
  o.init_value = 0.05f;
  o.seed = 17;
  o.init_state = [&opt](const float* w, float* state) { opt.InitState(w, state, kDim); };
  auto table = EmbeddingTable::Create(o);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

std::unique_ptr<cuda::GpuEmbeddingTable> GpuTable(const SparseOptimizerConfig& opt,
                                                  cudaStream_t stream) {
  cuda::GpuEmbeddingTableOptions o;
  o.dim = kDim;
  o.init_stddev = 0.05f;
  o.seed = 17;
  o.max_rows = 4096;
  o.optimizer = opt;
  auto table = cuda::GpuEmbeddingTable::Create(o, stream);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

TEST_F(GpuTest, LookupsReturnTheRowsOfTheCpuTable) {
  SparseOptimizer opt{SparseOptimizerConfig{}};
  auto cpu = CpuTable(opt);
  auto gpu = GpuTable(opt.config(), stream_);
  const std::vector<uint64_t> keys = Keys(5000, 1);
  auto d_keys = Upload(keys);
  auto d_rows = DeviceBuffer<uint32_t>::Create(keys.size(), stream_);
  auto d_out = DeviceBuffer<float>::Create(keys.size() * kDim, stream_);
  ASSERT_TRUE(d_rows.ok() && d_out.ok());
  ASSERT_TRUE(gpu->FindOrInsert(d_keys.data(), keys.size(), 1, d_rows->data()).ok());
  ASSERT_TRUE(gpu->Gather(d_rows->data(), keys.size(), {}, d_out->data()).ok());
  const std::vector<float> got = Download(d_out->data(), keys.size() * kDim);
  for (size_t k = 0; k < keys.size(); ++k) {
    const uint32_t row = cpu->FindOrInsert(keys[k], 1);
    for (int d = 0; d < kDim; ++d) {
      ASSERT_NEAR(got[k * kDim + d], cpu->embedding(row)[d], 1e-6f) << "key " << k << " dim " << d;
    }
  }
  absl::StatusOr<size_t> size = gpu->Size();
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, cpu->size());
  // Find without inserting: known ids hit, new ones miss.
  const std::vector<uint64_t> probe = {keys[0], keys[1], MakeFid(9, 12345)};
  auto d_probe = Upload(probe);
  ASSERT_TRUE(gpu->Find(d_probe.data(), probe.size(), d_rows->data()).ok());
  const std::vector<uint32_t> rows = Download(d_rows->data(), probe.size());
  EXPECT_NE(rows[0], cuda::GpuEmbeddingTable::kNoRow);
  EXPECT_NE(rows[1], cuda::GpuEmbeddingTable::kNoRow);
  EXPECT_EQ(rows[2], cuda::GpuEmbeddingTable::kNoRow);
}

// The arena fills in the middle of a launch with repeated ids, then 10x its size in new ids
// arrive: repeats agree, rows stay max_rows, each new occurrence is one full rejection, and the
// index still answers (no new id claimed a slot: gpu_logic_test checks the count on the host).
TEST_F(GpuTest, AFullTableRejectsNewIdsAndCountsEachRejection) {
  constexpr size_t kRows = 1000;
  cuda::GpuEmbeddingTableOptions o;
  o.dim = kDim;
  o.max_rows = kRows;
  auto table = cuda::GpuEmbeddingTable::Create(o, stream_);
  ASSERT_TRUE(table.ok()) << table.status();
  std::vector<uint64_t> keys;
  for (uint64_t v = 0; v < 3 * kRows / 2; ++v) keys.insert(keys.end(), 2, MakeFid(1, v));
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(3));
  auto d_keys = Upload(keys);
  auto d_rows = DeviceBuffer<uint32_t>::Create(10 * kRows, stream_);
  ASSERT_TRUE(d_rows.ok());
  ASSERT_TRUE((*table)->FindOrInsert(d_keys.data(), keys.size(), 1, d_rows->data()).ok());
  const std::vector<uint32_t> rows = Download(d_rows->data(), keys.size());
  std::map<uint64_t, uint32_t> row_of;
  size_t rejected = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    auto [it, first] = row_of.emplace(keys[k], rows[k]);
    ASSERT_EQ(rows[k], it->second) << "repeats of id " << keys[k] << " disagree";
    if (rows[k] == cuda::GpuEmbeddingTable::kNoRow) ++rejected;
  }
  EXPECT_EQ(rejected, keys.size() - 2 * kRows);
  absl::StatusOr<size_t> size = (*table)->Size();
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, kRows);
  absl::StatusOr<uint64_t> rejections = (*table)->FullRejections();
  ASSERT_TRUE(rejections.ok()) << rejections.status();
  EXPECT_EQ(*rejections, rejected);

  std::vector<uint64_t> fresh;
  for (uint64_t v = 0; v < 10 * kRows; ++v) fresh.push_back(MakeFid(2, v));
  auto d_fresh = Upload(fresh);
  ASSERT_TRUE((*table)->FindOrInsert(d_fresh.data(), fresh.size(), 2, d_rows->data()).ok());
  for (uint32_t row : Download(d_rows->data(), fresh.size())) {
    ASSERT_EQ(row, cuda::GpuEmbeddingTable::kNoRow);
  }
  rejections = (*table)->FullRejections();
  ASSERT_TRUE(rejections.ok()) << rejections.status();
  EXPECT_EQ(*rejections, rejected + fresh.size());
  size = (*table)->Size();
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, kRows);
  // Every id of the first batch still finds what it got.
  ASSERT_TRUE((*table)->Find(d_keys.data(), keys.size(), d_rows->data()).ok());
  const std::vector<uint32_t> found = Download(d_rows->data(), keys.size());
  for (size_t k = 0; k < keys.size(); ++k) ASSERT_EQ(found[k], row_of[keys[k]]) << k;
}

TEST_F(GpuTest, SparseUpdatesMatchTheCpuOptimizers) {
  for (SparseOptimizerKind kind : {SparseOptimizerKind::kSgd, SparseOptimizerKind::kAdagrad}) {
    SparseOptimizerConfig config;
    config.kind = kind;
    config.lr = 0.1f;
    // Keeps Adagrad's first step away from g / |g|, where summation order could flip a sign.
    config.initial_accumulator = 0.1f;
    SparseOptimizer opt(config);
    auto cpu = CpuTable(opt);
    auto gpu = GpuTable(config, stream_);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    for (int step = 1; step <= 3; ++step) {
      const std::vector<uint64_t> keys = Keys(2000, 10 + step);
      std::vector<float> grads(keys.size() * kDim);
      for (auto& g : grads) g = normal(rng);
      // CPU: sum each row's gradients, then one Apply per row.
      std::vector<uint32_t> rows(keys.size());
      for (size_t k = 0; k < keys.size(); ++k) rows[k] = cpu->FindOrInsert(keys[k], step);
      std::vector<std::vector<float>> sums(cpu->size() + 1, std::vector<float>(kDim, 0.0f));
      std::vector<bool> touched(cpu->size() + 1, false);
      for (size_t k = 0; k < keys.size(); ++k) {
        touched[rows[k]] = true;
        for (int d = 0; d < kDim; ++d) sums[rows[k]][d] += grads[k * kDim + d];
      }
      for (uint32_t r = 0; r < touched.size(); ++r) {
        if (touched[r]) opt.Apply(cpu->embedding(r), cpu->state(r), sums[r].data(), kDim);
      }
      auto d_keys = Upload(keys);
      auto d_grads = Upload(grads);
      auto d_rows = DeviceBuffer<uint32_t>::Create(keys.size(), stream_);
      ASSERT_TRUE(d_rows.ok());
      ASSERT_TRUE(gpu->FindOrInsert(d_keys.data(), keys.size(), step, d_rows->data()).ok());
      ASSERT_TRUE(
          gpu->ApplyGradients(d_rows->data(), keys.size(), {}, d_grads.data(), step).ok());
    }
    const std::vector<uint64_t> keys = Keys(2000, 11);
    auto d_keys = Upload(keys);
    auto d_rows = DeviceBuffer<uint32_t>::Create(keys.size(), stream_);
    auto d_out = DeviceBuffer<float>::Create(keys.size() * kDim, stream_);
    ASSERT_TRUE(d_rows.ok() && d_out.ok());
    ASSERT_TRUE(gpu->Find(d_keys.data(), keys.size(), d_rows->data()).ok());
    ASSERT_TRUE(gpu->Gather(d_rows->data(), keys.size(), {}, d_out->data()).ok());
    const std::vector<float> got = Download(d_out->data(), keys.size() * kDim);
    for (size_t k = 0; k < keys.size(); ++k) {
      const float* want = cpu->embedding(cpu->Find(keys[k]));
      for (int d = 0; d < kDim; ++d) {
        ASSERT_NEAR(got[k * kDim + d], want[d], 1e-4f)
            << SparseOptimizerName(kind) << " key " << k << " dim " << d;
      }
    }
  }
}

TEST_F(GpuTest, MlpStepMatchesTheCpuMlp) {
  const std::vector<int> sizes = {20, 16, 8, 1};
  auto cpu = Mlp::Create(sizes, 3, DenseAdamConfig{});
  ASSERT_TRUE(cpu.ok());
  auto gpu = cuda::GpuMlp::Create(sizes, (*cpu)->params(), cuda::GpuAdamConfig{}, 64, stream_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const int n = 50;
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  std::vector<float> x(n * 20), c(n);
  for (auto& v : x) v = normal(rng);
  for (auto& v : c) v = normal(rng);
  auto d_x = Upload(x);
  auto d_c = Upload(c);
  auto d_logits = DeviceBuffer<float>::Create(n, stream_);
  auto d_dx = DeviceBuffer<float>::Create(x.size(), stream_);
  ASSERT_TRUE(d_logits.ok() && d_dx.ok());
  for (int step = 1; step <= 3; ++step) {
    Mlp::Workspace ws = (*cpu)->NewWorkspace(n);
    std::vector<float> logits(n), dx(x.size());
    (*cpu)->Forward(ws, x.data(), n, logits.data());
    (*cpu)->Backward(ws, x.data(), n, c.data(), dx.data());
    (*cpu)->AdamStep({&ws}, 0, (*cpu)->num_params(), step);
    ASSERT_TRUE((*gpu)->Forward(d_x.data(), n, d_logits->data()).ok());
    ASSERT_TRUE((*gpu)->Backward(d_x.data(), n, d_c.data(), d_dx->data()).ok());
    ASSERT_TRUE((*gpu)->AdamStep(step).ok());
    const std::vector<float> got_logits = Download(d_logits->data(), n);
    const std::vector<float> got_dx = Download(d_dx->data(), x.size());
    for (int i = 0; i < n; ++i) ASSERT_NEAR(got_logits[i], logits[i], 1e-4f) << "step " << step;
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(got_dx[i], dx[i], 1e-4f) << "step " << step;
  }
  std::vector<float> params;
  ASSERT_TRUE((*gpu)->CopyToHost(&params).ok());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_NEAR(params[i], (*cpu)->params()[i], 1e-4f) << "param " << i;
  }
}

double Number(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":([-0-9.e+]+)"))) return -1;
  double v = -1;
  EXPECT_TRUE(absl::SimpleAtod(m[1].str(), &v));
  return v;
}

TEST_F(GpuTest, TrainerOnCudaFollowsTheCpuTrainer) {
  TrainerConfig c;
  c.synthetic_rows = 20000;
  c.batch_size = 256;
  c.embedding_dim = 8;
  c.hidden = {32, 16};
  c.threads = 1;
  c.progress_every = 5;
  c.max_steps = 20;
  std::vector<std::string> cpu_lines, gpu_lines;
  ASSERT_TRUE(RunTrainer(c, [&](std::string_view l) { cpu_lines.emplace_back(l); }).ok());
  c.device = "cuda";
  absl::Status status = RunTrainer(c, [&](std::string_view l) { gpu_lines.emplace_back(l); });
  ASSERT_TRUE(status.ok()) << status << " " << (gpu_lines.empty() ? "" : gpu_lines.back());
  ASSERT_EQ(cpu_lines.size(), gpu_lines.size());
  // Progress windows and the held-out metrics agree within float-summation differences.
  for (size_t i = 0; i < cpu_lines.size(); ++i) {
    EXPECT_NEAR(Number(gpu_lines[i], "logloss"), Number(cpu_lines[i], "logloss"), 2e-3)
        << cpu_lines[i] << "\n" << gpu_lines[i];
  }
  EXPECT_NEAR(Number(gpu_lines.back(), "auc"), Number(cpu_lines.back(), "auc"), 5e-3);
  EXPECT_EQ(Number(gpu_lines.back(), "rows"), Number(cpu_lines.back(), "rows"));
  EXPECT_NE(gpu_lines.back().find("\"device\":\"cuda\""), std::string::npos);
}

}  // namespace
}  // namespace evoscale::trainer
