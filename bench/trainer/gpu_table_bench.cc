// The GPU embedding table's batched lookups at scale: find and find-or-insert rates, in keys per
// second, on batches of 1M keys into a table of 64M rows filled in steps to 50%, 75% and 100% of
// its rows. HierarchicalKV's README reports the same calls in the same units (A100 80GB PCIe,
// dim 8, 128M-KV capacity, 1,048,576 keys per call); README.md beside this file sets its figures
// beside ours.
//
// What each rate times (CUDA events on the table's stream; every timed call but the fill's after
// one untimed call of the same kind):
//   find_or_insert new   the fill to this step: fresh keys, rows handed out and initialised
//   find_or_insert hit   keys all present (nothing inserted)
//   find hit / miss      keys all present / all absent: row numbers out (HierarchicalKV's find*)
//   find + gather        find hit, then the rows' embeddings copied out into (batch, dim)
//                        (HierarchicalKV's find, which returns values)
// Keys are distinct by construction (a bijection of their index onto 63-bit ids); hit batches
// are drawn uniformly from the keys present. Checks: the table holds exactly the keys inserted,
// every hit is found and every miss is not; the exit status is 1 when a check fails.
//
// usage: gpu_table_bench [--rows 67108864] [--batch 1048576] [--dim 8] [--repeats 20]
//                        [--index-slots 0 (2 x rows)] [--quick]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/device_buffer.h"
#include "trainer/cuda/gpu_embedding_table.h"

namespace {

using evoscale::trainer::SparseOptimizerKind;
using evoscale::trainer::cuda::DeviceBuffer;
using evoscale::trainer::cuda::GpuEmbeddingTable;
using evoscale::trainer::cuda::GpuEmbeddingTableOptions;
using evoscale::trainer::cuda::RowLayout;

struct BenchOptions {
  size_t rows = size_t{1} << 26;
  size_t batch = size_t{1} << 20;
  int dim = 8;
  int repeats = 20;
  size_t index_slots = 0;  // 0: the table's default, 2 x rows
};

// The key of index i: a bijection on 63-bit values, so keys are distinct, never kEmptyKey and,
// like feature ids, never have the top bit set.
uint64_t BenchKey(uint64_t i) {
  constexpr uint64_t kMask = (uint64_t{1} << 63) - 1;
  uint64_t x = (i * 0x9E3779B97F4A7C15ull) & kMask;
  x ^= x >> 29;
  x = (x * 0xBF58476D1CE4E5B9ull) & kMask;
  x ^= x >> 32;
  return x;
}

// Owns the stream, the table and the device buffers the calls read and write.
class TableBench {
 public:
  static absl::StatusOr<std::unique_ptr<TableBench>> Create(const BenchOptions& options);
  ~TableBench() {
    table_.reset();
    keys_ = {};
    probes_ = {};
    rows_ = {};
    gathered_ = {};
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Inserts keys [filled_, to) in batches; returns the seconds it took.
  absl::StatusOr<double> FillTo(size_t to);
  // Loads `repeats` batches of present keys (misses: absent keys) into the probe buffer.
  absl::Status LoadProbes(bool hits);
  // Seconds per call of `call` on each probe batch in turn, after one untimed call.
  template <typename Call>
  absl::StatusOr<double> TimePerCall(Call call);
  // The number of the last probe batch's rows that came back kNoRow.
  absl::StatusOr<size_t> MissesInLastBatch();

  absl::Status FindOrInsert(const uint64_t* keys, size_t n) {
    return table_->FindOrInsert(keys, n, /*now=*/1, rows_.data());
  }
  absl::Status Find(const uint64_t* keys) {
    return table_->Find(keys, options_.batch, rows_.data());
  }
  absl::Status Gather() {
    return table_->Gather(rows_.data(), options_.batch, RowLayout{1, options_.dim},
                          gathered_.data());
  }
  const uint64_t* probe(int i) const { return probes_.data() + size_t(i) * options_.batch; }
  size_t filled() const { return filled_; }
  size_t index_slots() const {
    return options_.index_slots > 0 ? options_.index_slots : 2 * options_.rows;
  }
  GpuEmbeddingTable& table() { return *table_; }

 private:
  explicit TableBench(const BenchOptions& options) : options_(options) {}

  // Constant after construction.
  const BenchOptions options_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GpuEmbeddingTable> table_;
  DeviceBuffer<uint64_t> keys_;    // device, (rows): key i at i, inserted in order
  DeviceBuffer<uint64_t> probes_;  // device, (repeats, batch)
  DeviceBuffer<uint32_t> rows_;    // device, (batch)
  DeviceBuffer<float> gathered_;   // device, (batch, dim)
  size_t filled_ = 0;              // keys [0, filled_) are in the table
  std::mt19937_64 rng_{42};
};

absl::StatusOr<std::unique_ptr<TableBench>> TableBench::Create(const BenchOptions& options) {
  std::unique_ptr<TableBench> bench(new TableBench(options));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&bench->stream_));
  GpuEmbeddingTableOptions table_options;
  table_options.dim = options.dim;
  table_options.max_rows = options.rows;
  table_options.capacity = options.index_slots;
  table_options.optimizer.kind = SparseOptimizerKind::kSgd;  // rows of dim floats, as HKV's
  auto table = GpuEmbeddingTable::Create(table_options, bench->stream_);
  if (!table.ok()) return table.status();
  bench->table_ = *std::move(table);

  std::vector<uint64_t> host(options.rows);
  for (size_t i = 0; i < host.size(); ++i) host[i] = BenchKey(i);
  auto keys = DeviceBuffer<uint64_t>::Create(host.size(), bench->stream_);
  auto probes =
      DeviceBuffer<uint64_t>::Create(size_t(options.repeats) * options.batch, bench->stream_);
  auto rows = DeviceBuffer<uint32_t>::Create(options.batch, bench->stream_);
  auto gathered = DeviceBuffer<float>::Create(options.batch * options.dim, bench->stream_);
  for (const absl::Status& s : {keys.status(), probes.status(), rows.status(), gathered.status()}) {
    if (!s.ok()) return s;
  }
  bench->keys_ = *std::move(keys);
  bench->probes_ = *std::move(probes);
  bench->rows_ = *std::move(rows);
  bench->gathered_ = *std::move(gathered);
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(bench->keys_.data(), host.data(),
                                                host.size() * sizeof(uint64_t),
                                                cudaMemcpyHostToDevice, bench->stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(bench->stream_));
  return bench;
}

// Seconds between two events recorded on `stream` around `work`; events[] are created here and
// destroyed by the caller.
template <typename Work>
absl::StatusOr<double> TimeBetweenEvents(cudaStream_t stream, cudaEvent_t (&events)[2], Work work) {
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&events[0]));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&events[1]));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[0], stream));
  if (absl::Status s = work(); !s.ok()) return s;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[1], stream));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events[1]));
  float ms = 0;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events[0], events[1]));
  return ms / 1e3;
}

// Seconds the stream spends on `work` (a function returning absl::Status).
template <typename Work>
absl::StatusOr<double> TimeOnStream(cudaStream_t stream, Work work) {
  cudaEvent_t events[2] = {nullptr, nullptr};
  absl::StatusOr<double> seconds = TimeBetweenEvents(stream, events, work);
  for (cudaEvent_t e : events) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  return seconds;
}

absl::StatusOr<double> TableBench::FillTo(size_t to) {
  const size_t from = filled_;
  absl::StatusOr<double> seconds = TimeOnStream(stream_, [&]() -> absl::Status {
    for (size_t at = from; at < to; at += options_.batch) {
      absl::Status s = FindOrInsert(keys_.data() + at, std::min(options_.batch, to - at));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (seconds.ok()) filled_ = to;
  return seconds;
}

absl::Status TableBench::LoadProbes(bool hits) {
  std::vector<uint64_t> host(size_t(options_.repeats) * options_.batch);
  std::uniform_int_distribution<size_t> present(0, filled_ - 1);
  for (size_t i = 0; i < host.size(); ++i) {
    host[i] = hits ? BenchKey(present(rng_)) : BenchKey(options_.rows + i);
  }
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(probes_.data(), host.data(),
                                                host.size() * sizeof(uint64_t),
                                                cudaMemcpyHostToDevice, stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

template <typename Call>
absl::StatusOr<double> TableBench::TimePerCall(Call call) {
  absl::Status warm = call(probe(0));
  if (!warm.ok()) return warm;
  absl::StatusOr<double> seconds = TimeOnStream(stream_, [&]() -> absl::Status {
    for (int i = 0; i < options_.repeats; ++i) {
      absl::Status s = call(probe(i));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!seconds.ok()) return seconds.status();
  return *seconds / options_.repeats;
}

absl::StatusOr<size_t> TableBench::MissesInLastBatch() {
  std::vector<uint32_t> host(options_.batch);
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      host.data(), rows_.data(), host.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return size_t(std::count(host.begin(), host.end(), GpuEmbeddingTable::kNoRow));
}

// The rates of one fill step, in keys per second, and whether its checks held.
struct StepResult {
  double fill = 0;
  double find_or_insert_new = 0, find_or_insert_hit = 0;
  double find_hit = 0, find_miss = 0, find_gather = 0;
  bool check = true;
  std::string failed;  // what the checks found wrong
};

absl::StatusOr<StepResult> RunStep(TableBench& bench, const BenchOptions& options, double fill) {
  StepResult r;
  r.fill = fill;
  const size_t from = bench.filled();
  const size_t to = size_t(double(options.rows) * fill);
  absl::StatusOr<double> fill_seconds = bench.FillTo(to);
  if (!fill_seconds.ok()) return fill_seconds.status();
  r.find_or_insert_new = double(to - from) / *fill_seconds;
  absl::StatusOr<size_t> size = bench.table().Size();
  if (!size.ok()) return size.status();
  if (*size != to) absl::StrAppend(&r.failed, "table holds ", *size, " rows, not ", to, "; ");

  // Keys per second of `call` on each probe batch, into *rate.
  auto measure = [&](double* rate, auto call) -> absl::Status {
    absl::StatusOr<double> seconds = bench.TimePerCall(call);
    if (!seconds.ok()) return seconds.status();
    *rate = double(options.batch) / *seconds;
    return absl::OkStatus();
  };
  auto find = [&](const uint64_t* keys) { return bench.Find(keys); };
  auto find_gather = [&](const uint64_t* keys) {
    absl::Status s = bench.Find(keys);
    return s.ok() ? bench.Gather() : s;
  };
  auto find_or_insert = [&](const uint64_t* keys) {
    return bench.FindOrInsert(keys, options.batch);
  };

  absl::Status status = bench.LoadProbes(/*hits=*/true);
  if (status.ok()) status = measure(&r.find_hit, find);
  absl::StatusOr<size_t> lost = status.ok() ? bench.MissesInLastBatch() : status;
  if (!lost.ok()) return lost.status();
  if (*lost != 0) absl::StrAppend(&r.failed, *lost, " present keys not found; ");
  if (status.ok()) status = measure(&r.find_gather, find_gather);
  if (status.ok()) status = measure(&r.find_or_insert_hit, find_or_insert);

  if (status.ok()) status = bench.LoadProbes(/*hits=*/false);
  if (status.ok()) status = measure(&r.find_miss, find);
  absl::StatusOr<size_t> missed = status.ok() ? bench.MissesInLastBatch() : status;
  if (!missed.ok()) return missed.status();
  if (*missed != options.batch) {
    absl::StrAppend(&r.failed, options.batch - *missed, " absent keys found; ");
  }
  r.check = r.failed.empty();
  return r;
}

std::string DeviceName() {
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return "unknown";
  }
  return prop.name;
}

int Run(const BenchOptions& options) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_table_bench: no CUDA device\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<TableBench>> bench = TableBench::Create(options);
  if (!bench.ok()) {
    std::fprintf(stderr, "gpu_table_bench: %s\n", bench.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "gpu_table_bench: %s, dim %d (SGD rows, %d floats), %zu rows, index %zu slots, "
      "batches of %zu keys, %d timed calls each; %.2f GiB on the device\n",
      DeviceName().c_str(), options.dim, options.dim, options.rows, (*bench)->index_slots(),
      options.batch, options.repeats,
      double((*bench)->table().memory_bytes()) / double(size_t{1} << 30));
  std::printf("%-5s %-10s %10s %10s %10s %10s %10s   (G keys/s)\n", "fill", "index_load", "foi_new",
              "foi_hit", "find_hit", "find_miss", "find+gath");
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  bool ok = true;
  for (double fill : {0.5, 0.75, 1.0}) {
    absl::StatusOr<StepResult> r = RunStep(**bench, options, fill);
    if (!r.ok()) {
      std::fprintf(stderr, "gpu_table_bench: fill %.2f: %s\n", fill, r.status().ToString().c_str());
      return 1;
    }
    const double load = double((*bench)->filled()) / double((*bench)->index_slots());
    std::printf("%-5.2f %-10.3f %10.3f %10.3f %10.3f %10.3f %10.3f%s%s\n", fill, load,
                r->find_or_insert_new / 1e9, r->find_or_insert_hit / 1e9, r->find_hit / 1e9,
                r->find_miss / 1e9, r->find_gather / 1e9,
                r->check ? "" : "   CHECK FAILED: ", r->failed.c_str());
    steps.push_back({{"fill", fill},
                     {"index_load", load},
                     {"find_or_insert_new_per_s", r->find_or_insert_new},
                     {"find_or_insert_hit_per_s", r->find_or_insert_hit},
                     {"find_hit_per_s", r->find_hit},
                     {"find_miss_per_s", r->find_miss},
                     {"find_gather_per_s", r->find_gather},
                     {"check", r->check}});
    ok = ok && r->check;
  }
  const nlohmann::ordered_json line = {{"device", DeviceName()},     {"dim", options.dim},
                                       {"rows", options.rows},       {"batch", options.batch},
                                       {"repeats", options.repeats}, {"steps", steps}};
  std::printf("%s\n", line.dump().c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions options;
  bool quick = false;
  CLI::App app(
      "gpu_table_bench: find and find-or-insert rates of the GPU embedding table on "
      "large batches",
      "gpu_table_bench");
  app.add_option("--rows", options.rows, "table rows (default 67108864)")
      ->check(CLI::Range(size_t{1} << 10, size_t{1} << 31));
  app.add_option("--batch", options.batch, "keys per call (default 1048576)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 27));
  app.add_option("--dim", options.dim, "floats per row (default 8)")->check(CLI::Range(1, 4096));
  app.add_option("--repeats", options.repeats, "timed calls per rate (default 20)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--index-slots", options.index_slots, "index slots, > rows (default 2 x rows)");
  app.add_flag("--quick", quick, "4M rows, 5 timed calls: a smoke run of a few seconds");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    options.rows = size_t{1} << 22;
    options.repeats = 5;
  }
  if (options.index_slots != 0 && options.index_slots <= options.rows) {
    std::fprintf(stderr, "gpu_table_bench: --index-slots %zu must exceed --rows %zu\n",
                 options.index_slots, options.rows);
    return 2;
  }
  return Run(options);
}
