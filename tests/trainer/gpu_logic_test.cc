// The GPU path's decisions, on the host (no device needed): the GPU embedding table's probe
// (trainer/cuda/table_probe.h, run here on host memory through std::atomic_ref) and, in a CUDA
// build, what cudaGetDeviceCount's errors mean (trainer/cuda/cuda_status.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/comm.h"
#include "trainer/criteo_reader.h"
#include "trainer/cuda/exchange_plan.h"
#include "trainer/cuda/table_probe.h"
#include "trainer/feature_id.h"

#ifdef EVOSCALE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/nccl_api.h"
#endif

namespace evoscale::trainer {
namespace {

using cuda::probe::FindKey;
using cuda::probe::FindOrInsertKey;
using cuda::probe::kEmptyKey;
using cuda::probe::kNoRow;
using cuda::probe::kPending;
using cuda::probe::Outcome;
using cuda::probe::ProbeResult;

// The table's memory operations on host vectors (what the kernels do with device atomics),
// counting the CASes on keys. Safe for concurrent probes, as the device table is.
class HostTable {
 public:
  HostTable(size_t capacity, uint32_t max_rows)
      : max_rows_(max_rows),
        keys_(capacity, kEmptyKey),
        slot_rows_(capacity, kPending),
        counters_(cuda::probe::kNumCounters, 0),
        row_keys_(max_rows, kEmptyKey) {}

  // The Table interface of table_probe.h.
  size_t capacity() const { return keys_.size(); }
  uint32_t max_rows() const { return max_rows_; }
  uint64_t LoadKey(size_t slot) { return std::atomic_ref(keys_[slot]).load(); }
  uint64_t CasKey(size_t slot, uint64_t expected, uint64_t desired) {
    key_cas_calls_.fetch_add(1);
    std::atomic_ref(keys_[slot]).compare_exchange_strong(expected, desired);
    return expected;
  }
  uint32_t LoadRow(size_t slot) { return std::atomic_ref(slot_rows_[slot]).load(); }
  void PublishRow(size_t slot, uint32_t row) { std::atomic_ref(slot_rows_[slot]).store(row); }
  uint32_t LoadCounter(int c) {
    if (c == cuda::probe::kRowsHandedOut && handed_out_loads_.fetch_add(1) + 1 == interleave_at_) {
      interleave_();  // another thread's steps, just before this load
    }
    return std::atomic_ref(counters_[c]).load();
  }
  uint32_t CasCounter(int c, uint32_t expected, uint32_t desired) {
    std::atomic_ref(counters_[c]).compare_exchange_strong(expected, desired);
    return expected;
  }
  uint32_t AddCounter(int c, uint32_t delta) {
    return std::atomic_ref(counters_[c]).fetch_add(delta);
  }
  // Each row is handed out once, so only its inserter writes its entry.
  void InitRow(uint64_t key, uint32_t row) { row_keys_[row] = key; }
  void CountFullRejection() { full_rejections_.fetch_add(1); }

  // For the tests' checks, once no probe runs.
  size_t ClaimedSlots() const {
    return size_t(
        std::count_if(keys_.begin(), keys_.end(), [](uint64_t k) { return k != kEmptyKey; }));
  }
  // The longest run of claimed slots (wrapping round): no probe can be longer than this plus one.
  size_t LongestClaimedRun() const {
    size_t longest = 0, run = 0;
    for (size_t i = 0; i < 2 * keys_.size(); ++i) {
      run = keys_[i % keys_.size()] == kEmptyKey ? 0 : run + 1;
      longest = std::max(longest, std::min(run, keys_.size()));
    }
    return longest;
  }
  uint32_t counter(int c) const { return counters_[c]; }
  uint64_t row_key(uint32_t row) const { return row_keys_[row]; }
  uint64_t key_cas_calls() const { return key_cas_calls_.load(); }
  uint64_t full_rejections() const { return full_rejections_.load(); }
  // How often a probe has asked whether every permit became a row (once per look while it waits).
  uint64_t handed_out_loads() const { return handed_out_loads_.load(); }
  // Runs `steps` at the start of the n-th such load, as if another thread took them right then.
  void InterleaveAtHandedOutLoad(uint64_t n, std::function<void()> steps) {
    interleave_at_ = n;
    interleave_ = std::move(steps);
  }

 private:
  const uint32_t max_rows_;
  std::vector<uint64_t> keys_;       // (capacity)
  std::vector<uint32_t> slot_rows_;  // (capacity)
  std::vector<uint32_t> counters_;   // (kNumCounters)
  std::vector<uint64_t> row_keys_;   // (max_rows): the id InitRow gave each row
  std::atomic<uint64_t> key_cas_calls_{0};
  std::atomic<uint64_t> full_rejections_{0};
  std::atomic<uint64_t> handed_out_loads_{0};
  uint64_t interleave_at_ = 0;  // 0: never
  std::function<void()> interleave_;
};

// Does what a thread holding the last permit does for `key`, once it reaches an empty slot:
// claims the first empty slot of key's chain and publishes a new row there.
uint32_t InsertWithHeldPermit(HostTable& table, uint64_t key) {
  size_t slot = cuda::probe::Home(key, table.capacity());
  while (table.LoadKey(slot) != kEmptyKey) slot = (slot + 1) % table.capacity();
  EXPECT_EQ(table.CasKey(slot, kEmptyKey, key), kEmptyKey);
  const uint32_t row = table.AddCounter(cuda::probe::kRowsHandedOut, 1);
  table.InitRow(key, row);
  table.PublishRow(slot, row);
  return row;
}

// Distinct ids, none of them kEmptyKey, from disjoint ranges per `first`.
std::vector<uint64_t> NewIds(size_t n, uint64_t first) {
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = MakeFid(uint32_t(i % 26), first + i);
  return ids;
}

TEST(GpuTableProbeTest, FullTableClaimsNoSlotForANewIdAndCountsAFullRejection) {
  constexpr uint32_t kRows = 1000;
  HostTable table(2 * kRows, kRows);  // the GPU table's default capacity
  const std::vector<uint64_t> resident = NewIds(kRows, 0);
  std::vector<uint32_t> rows;
  for (uint64_t id : resident) {
    const ProbeResult r = FindOrInsertKey(table, id);
    ASSERT_EQ(r.outcome, Outcome::kInserted);
    rows.push_back(r.row);
  }
  ASSERT_EQ(table.ClaimedSlots(), kRows);
  const size_t longest_run = table.LongestClaimedRun();
  const uint64_t cas_before = table.key_cas_calls();

  uint32_t longest_probe = 0;
  for (uint64_t id : NewIds(10 * kRows, 1u << 20)) {
    const ProbeResult r = FindOrInsertKey(table, id);
    ASSERT_EQ(r.outcome, Outcome::kFull) << id;
    ASSERT_EQ(r.row, kNoRow);
    longest_probe = std::max(longest_probe, r.probes);
  }
  EXPECT_EQ(table.ClaimedSlots(), kRows);
  EXPECT_EQ(table.full_rejections(), 10u * kRows);
  EXPECT_EQ(table.key_cas_calls(), cas_before) << "a full table CASes nothing";
  EXPECT_EQ(table.counter(cuda::probe::kRowsHandedOut), kRows);
  EXPECT_EQ(table.counter(cuda::probe::kRowPermits), kRows);
  // Probes end at the first empty slot, which claims no longer move: bounded by the index as it
  // was when the arena filled (a few slots at load 1/2), far from its 2000.
  EXPECT_LE(longest_probe, longest_run + 1);
  EXPECT_LT(longest_probe, 64u);
  // The resident ids keep their rows.
  for (size_t i = 0; i < resident.size(); ++i) {
    const ProbeResult r = FindOrInsertKey(table, resident[i]);
    ASSERT_EQ(r.outcome, Outcome::kFound);
    ASSERT_EQ(r.row, rows[i]);
    ASSERT_EQ(table.row_key(r.row), resident[i]);
  }
}

TEST(GpuTableProbeTest, ProbeCasesOnlyAnEmptySlotSoAPresentIdCostsNoCas) {
  HostTable table(4096, 2048);
  const std::vector<uint64_t> ids = NewIds(2000, 0);
  std::vector<uint32_t> rows;
  for (uint64_t id : ids) rows.push_back(FindOrInsertKey(table, id).row);
  // One CAS per insertion (alone, it never loses), not one per slot probed.
  EXPECT_EQ(table.key_cas_calls(), ids.size());
  const uint64_t cas_before = table.key_cas_calls();
  for (size_t i = 0; i < ids.size(); ++i) {
    const ProbeResult r = FindOrInsertKey(table, ids[i]);
    ASSERT_EQ(r.outcome, Outcome::kFound);
    ASSERT_EQ(r.row, rows[i]);
    ASSERT_EQ(FindKey(table, ids[i]), rows[i]);
  }
  EXPECT_EQ(table.key_cas_calls(), cas_before);
}

TEST(GpuTableProbeTest, FindNeitherInsertsNorCases) {
  HostTable table(64, 16);
  const uint64_t id = MakeFid(3, 7);
  EXPECT_EQ(FindKey(table, id), kNoRow);
  EXPECT_EQ(table.ClaimedSlots(), 0u);
  EXPECT_EQ(table.key_cas_calls(), 0u);
  const uint32_t row = FindOrInsertKey(table, id).row;
  EXPECT_EQ(FindKey(table, id), row);
}

TEST(GpuTableProbeTest, TheEmptyKeyGetsNoRowAndClaimsNothing) {
  HostTable table(64, 16);
  const ProbeResult r = FindOrInsertKey(table, kEmptyKey);
  EXPECT_EQ(r.outcome, Outcome::kNoKey);
  EXPECT_EQ(r.row, kNoRow);
  EXPECT_EQ(FindKey(table, kEmptyKey), kNoRow);
  EXPECT_EQ(table.ClaimedSlots(), 0u);
  EXPECT_EQ(table.full_rejections(), 0u);
}

// The last permit is held by a thread still probing (played by the test), so the arena is not
// full yet: a new id waits rather than be answered "full", as the holder may be inserting that
// very id. Here it does, between the prober's read of the empty slot and its read of the count.
TEST(GpuTableProbeTest, ANewIdWaitsForAPermitInFlightAndGetsTheRowItBecomes) {
  HostTable table(16, 2);
  const uint64_t resident = MakeFid(1, 1), id = MakeFid(2, 2);
  ASSERT_EQ(FindOrInsertKey(table, resident).outcome, Outcome::kInserted);
  ASSERT_TRUE(cuda::probe::TakeRowPermit(table));  // the last one
  uint32_t row = kNoRow;
  table.InterleaveAtHandedOutLoad(3, [&] { row = InsertWithHeldPermit(table, id); });
  const ProbeResult result = FindOrInsertKey(table, id);
  EXPECT_EQ(table.handed_out_loads(), 3u) << "it looked twice before the holder inserted";
  EXPECT_EQ(result.outcome, Outcome::kFound);
  EXPECT_EQ(result.row, row);
  EXPECT_NE(row, kNoRow);
  EXPECT_EQ(table.full_rejections(), 0u);
}

// The same, but the permit becomes another id's row: only then is the new id answered "full".
TEST(GpuTableProbeTest, ANewIdIsAnsweredFullOnlyOnceEveryPermitIsARow) {
  HostTable table(16, 2);
  const uint64_t resident = MakeFid(1, 1), other = MakeFid(3, 3), id = MakeFid(2, 2);
  ASSERT_EQ(FindOrInsertKey(table, resident).outcome, Outcome::kInserted);
  ASSERT_TRUE(cuda::probe::TakeRowPermit(table));
  table.InterleaveAtHandedOutLoad(3, [&] { InsertWithHeldPermit(table, other); });
  const ProbeResult result = FindOrInsertKey(table, id);
  EXPECT_GE(table.handed_out_loads(), 3u) << "answered while a permit was still in flight";
  EXPECT_EQ(result.outcome, Outcome::kFull);
  EXPECT_EQ(result.row, kNoRow);
  EXPECT_EQ(table.ClaimedSlots(), 2u);
  EXPECT_EQ(table.full_rejections(), 1u);
}

// Threads probing the same ids with many repeats, as a kernel does, while the arena fills: every
// repeat of an id gets the same answer, each row goes to one id, and a full arena claims no
// slot and leaks no permit.
TEST(GpuTableProbeTest, ConcurrentRepeatsAgreeWhileTheArenaFills) {
  constexpr uint32_t kRows = 1500;
  constexpr int kThreads = 4;
  const std::vector<uint64_t> distinct = NewIds(3000, 0);
  std::unordered_map<uint64_t, size_t> index_of;
  for (size_t d = 0; d < distinct.size(); ++d) index_of[distinct[d]] = d;
  ASSERT_EQ(index_of.size(), distinct.size());
  for (uint64_t seed : {1u, 2u, 3u}) {
    HostTable table(2 * kRows, kRows);
    std::vector<std::vector<uint64_t>> work(kThreads);
    std::vector<std::vector<uint32_t>> answers(kThreads);
    std::mt19937_64 rng(seed);
    for (auto& ids : work) {
      for (int i = 0; i < 6000; ++i) ids.push_back(distinct[rng() % distinct.size()]);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t id : work[t]) answers[t].push_back(FindOrInsertKey(table, id).row);
      });
    }
    for (auto& thread : threads) thread.join();

    std::vector<uint32_t> row_of(distinct.size(), kPending);  // kPending: not seen yet
    size_t no_row = 0;
    for (int t = 0; t < kThreads; ++t) {
      for (size_t i = 0; i < work[t].size(); ++i) {
        const size_t d = index_of.at(work[t][i]);
        const uint32_t row = answers[t][i];
        if (row_of[d] == kPending) row_of[d] = row;
        ASSERT_EQ(row, row_of[d]) << "seed " << seed << ": repeats of id " << work[t][i];
        if (row == kNoRow) {
          ++no_row;
        } else {
          ASSERT_EQ(table.row_key(row), work[t][i]) << "seed " << seed;
        }
      }
    }
    const size_t seen = size_t(
        std::count_if(row_of.begin(), row_of.end(), [](uint32_t r) { return r != kPending; }));
    ASSERT_GT(seen, kRows) << "the test should overfill the arena";
    EXPECT_EQ(table.counter(cuda::probe::kRowsHandedOut), kRows) << "seed " << seed;
    EXPECT_EQ(table.counter(cuda::probe::kRowPermits), kRows) << "seed " << seed;
    EXPECT_EQ(table.ClaimedSlots(), kRows) << "seed " << seed;
    EXPECT_EQ(table.full_rejections(), no_row) << "seed " << seed;
  }
}

// ---------------------------------------------------------------------------------------------
// A job of several GPU processes: what each rank sends where, and how the ranks find each other
// without MPI.

TEST(ExchangePlanTest, DistinctIdsGoToTheirOwnersOnceAndEveryPositionFindsItsRow) {
  constexpr int kRanks = 3;
  BatchReaderOptions options;
  options.batch_size = 64;
  options.num_shards = kRanks;
  options.dedupe = true;
  BatchReader reader(MakeSyntheticSource(64, 5, 1), options);
  absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
  ASSERT_TRUE(got.ok() && *got != nullptr) << got.status();
  const ExampleBatch& batch = **got;
  cuda::ExchangePlan plan;
  cuda::PlanExchange(&batch, kRanks, &plan);
  const size_t ids = batch.fids.size();
  ASSERT_EQ(plan.positions.size(), ids);
  ASSERT_EQ(plan.rows.size(), ids);
  ASSERT_EQ(plan.send_counts.size(), size_t(kRanks));
  // Each rank's share of send_keys: distinct ids it owns; together, every distinct id once.
  size_t first = 0;
  std::set<uint64_t> all;
  for (int r = 0; r < kRanks; ++r) {
    std::set<uint64_t> mine;
    for (int64_t i = 0; i < plan.send_counts[r]; ++i) {
      const uint64_t id = plan.send_keys[first + size_t(i)];
      EXPECT_EQ(ShardOfFid(id, kRanks), uint32_t(r));
      EXPECT_TRUE(mine.insert(id).second) << "sent twice: " << id;
      all.insert(id);
    }
    first += size_t(plan.send_counts[r]);
  }
  EXPECT_EQ(first, plan.send_keys.size());
  EXPECT_EQ(all, std::set<uint64_t>(batch.fids.begin(), batch.fids.end()));
  EXPECT_LT(plan.send_keys.size(), ids);  // repeats were left home
  // Every position, once, finds its own id among those sent.
  std::vector<bool> seen(ids, false);
  for (size_t j = 0; j < ids; ++j) {
    ASSERT_LT(plan.rows[j], plan.send_keys.size());
    EXPECT_EQ(plan.send_keys[plan.rows[j]], batch.fids[plan.positions[j]]);
    EXPECT_FALSE(seen[plan.positions[j]]);
    seen[plan.positions[j]] = true;
  }

  // A rank without a batch sends nothing to anyone, and the plan forgets the last batch.
  cuda::PlanExchange(nullptr, kRanks, &plan);
  EXPECT_TRUE(plan.send_keys.empty());
  EXPECT_TRUE(plan.positions.empty());
  EXPECT_TRUE(plan.rows.empty());
  EXPECT_EQ(plan.send_counts, std::vector<int64_t>(kRanks, 0));
}

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("rendezvous_test_", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "id").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(RendezvousTest, EveryRankGetsRankZerosBytesWhoeverComesFirst) {
  const std::string id(128, '\0');
  std::string mine = id;
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = char(i * 7 + 1);
  // Two ranks wait before rank 0 writes; a third comes after.
  std::vector<absl::StatusOr<std::string>> got(3, absl::UnknownError("not run"));
  std::thread one([&] { got[1] = ShareThroughFile(path_, 1, "", mine.size(), 30); });
  std::thread two([&] { got[2] = ShareThroughFile(path_, 2, "", mine.size(), 30); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  got[0] = ShareThroughFile(path_, 0, mine, mine.size(), 30);
  one.join();
  two.join();
  absl::StatusOr<std::string> late = ShareThroughFile(path_, 3, "", mine.size(), 30);
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(*g, mine);
  }
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, mine);
  // Nothing left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(RendezvousTest, AFileLeftByAnEarlierJobIsRefusedAndKept) {
  { std::ofstream(path_) << std::string(128, 'x'); }
  absl::StatusOr<std::string> got = ShareThroughFile(path_, 0, std::string(128, 'y'), 128, 30);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kAlreadyExists) << got.status();
  EXPECT_NE(got.status().message().find("EVOSCALE_RENDEZVOUS_FILE \"" + path_ + "\""),
            std::string::npos)
      << got.status();
  std::ifstream in(path_);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, std::string(128, 'x'));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(RendezvousTest, ARankWhoseRankZeroNeverComesStopsWaiting) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> got = ShareThroughFile(path_, 1, "", 128, 0.2);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_NE(got.status().message().find("rank 1 waited 0.2 s"), std::string::npos) << got.status();
}

TEST_F(RendezvousTest, AFileOfAnotherSizeIsNotAnId) {
  { std::ofstream(path_) << "short"; }
  absl::StatusOr<std::string> got = ShareThroughFile(path_, 1, "", 128, 1);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_NE(got.status().message().find("holds 5 bytes, expected 128"), std::string::npos)
      << got.status();
}

TEST_F(RendezvousTest, AFolderRankZeroCannotWriteInIsNamed) {
  if (geteuid() == 0) {
    // root writes anywhere: a path under a regular file fails for everyone.
    { std::ofstream((dir_ / "file").string()) << "x"; }
    path_ = (dir_ / "file" / "id").string();
  } else {
    chmod(dir_.c_str(), 0555);
  }
  absl::StatusOr<std::string> got = ShareThroughFile(path_, 0, std::string(128, 'y'), 128, 1);
  chmod(dir_.c_str(), 0755);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_NE(got.status().message().find("cannot write beside it"), std::string::npos)
      << got.status();
}

// Sets the given variables (nullopt: unset) for one test, and puts every one back after.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old == nullptr ? std::nullopt : std::optional<std::string>(old);
      Set(name, value);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) Set(name, value);
  }

 private:
  static void Set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

std::map<std::string, std::optional<std::string>> Ranks(std::optional<std::string> size,
                                                        std::optional<std::string> rank,
                                                        std::optional<std::string> file,
                                                        std::optional<std::string> local = {}) {
  return {{"EVOSCALE_WORLD_SIZE", size},
          {"EVOSCALE_RANK", rank},
          {"EVOSCALE_RENDEZVOUS_FILE", file},
          {"EVOSCALE_LOCAL_RANK", local},
          {"OMPI_COMM_WORLD_SIZE", {}},
          {"PMI_SIZE", {}},
          {"PMIX_SIZE", {}}};
}

TEST(RanksFromEnvironmentTest, NothingSetIsOneProcess) {
  ScopedEnvironment env(Ranks({}, {}, {}));
  absl::StatusOr<EnvironmentRanks> ranks = RanksFromEnvironment();
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->size, 1);
  EXPECT_EQ(ranks->rank, 0);
  EXPECT_TRUE(ranks->rendezvous_file.empty());
}

TEST(RanksFromEnvironmentTest, AJobOfTwo) {
  ScopedEnvironment env(Ranks("2", "1", "/shared/job-7/id"));
  absl::StatusOr<EnvironmentRanks> ranks = RanksFromEnvironment();
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->size, 2);
  EXPECT_EQ(ranks->rank, 1);
  EXPECT_EQ(ranks->local_rank, 1);  // its GPU: the rank, unless told
  EXPECT_EQ(ranks->rendezvous_file, "/shared/job-7/id");
  ScopedEnvironment local(Ranks("2", "1", "/shared/job-7/id", "0"));
  ranks = RanksFromEnvironment();
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(ranks->local_rank, 0);
}

TEST(RanksFromEnvironmentTest, BadValuesAreNamed) {
  struct Case {
    std::map<std::string, std::optional<std::string>> vars;
    std::string message;
  };
  std::map<std::string, std::optional<std::string>> mpi = Ranks("2", "0", "/tmp/id");
  mpi["OMPI_COMM_WORLD_SIZE"] = "2";
  const std::vector<Case> cases = {
      {Ranks("two", "0", "/tmp/id"), "EVOSCALE_WORLD_SIZE=\"two\": expected an integer in [1, "},
      {Ranks("0", "0", "/tmp/id"), "EVOSCALE_WORLD_SIZE=\"0\": expected an integer in [1, "},
      {Ranks("2", "2", "/tmp/id"), "EVOSCALE_RANK=\"2\": expected an integer in [0, 1]"},
      {Ranks("2", "-1", "/tmp/id"), "EVOSCALE_RANK=\"-1\": expected an integer in [0, 1]"},
      {Ranks("2", {}, "/tmp/id"), "EVOSCALE_WORLD_SIZE=2 but EVOSCALE_RANK is not set"},
      {Ranks("2", "1", {}), "EVOSCALE_WORLD_SIZE=2 but EVOSCALE_RENDEZVOUS_FILE is not set"},
      {Ranks("2", "1", ""), "EVOSCALE_WORLD_SIZE=2 but EVOSCALE_RENDEZVOUS_FILE is not set"},
      {Ranks("2", "1", "/tmp/id", "x"), "EVOSCALE_LOCAL_RANK=\"x\""},
      {Ranks({}, "1", {}), "EVOSCALE_RANK is set but EVOSCALE_WORLD_SIZE is not"},
      {Ranks({}, {}, "/tmp/id"), "EVOSCALE_RENDEZVOUS_FILE is set but EVOSCALE_WORLD_SIZE is not"},
      {mpi, "EVOSCALE_WORLD_SIZE is set in a process an MPI launcher started"},
  };
  for (const Case& c : cases) {
    ScopedEnvironment env(c.vars);
    absl::StatusOr<EnvironmentRanks> ranks = RanksFromEnvironment();
    ASSERT_EQ(ranks.status().code(), absl::StatusCode::kInvalidArgument)
        << c.message << ": " << ranks.status();
    EXPECT_NE(ranks.status().message().find(c.message), std::string::npos) << ranks.status();
  }
}

#ifdef EVOSCALE_HAVE_CUDA

constexpr cuda::CudaVersions kOldDriver{12020, 13000};

TEST(CudaDeviceCountTest, SuccessAnswersTheCount) {
  absl::StatusOr<int> count = cuda::DeviceCountFromCuda(cudaSuccess, 2, {13000, 13000});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 2);
}

TEST(CudaDeviceCountTest, NoDeviceMeansNoGpu) {
  absl::StatusOr<int> count = cuda::DeviceCountFromCuda(cudaErrorNoDevice, 0, {13000, 13000});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 0);
}

// What the runtime answers on a machine without NVIDIA's driver (driver version 0).
TEST(CudaDeviceCountTest, NoDriverInstalledMeansNoGpu) {
  absl::StatusOr<int> count = cuda::DeviceCountFromCuda(cudaErrorInsufficientDriver, 0, {0, 13000});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 0);
}

TEST(CudaDeviceCountTest, AnInstalledDriverTooOldIsAFailedPreconditionNamingVersions) {
  absl::StatusOr<int> count = cuda::DeviceCountFromCuda(cudaErrorInsufficientDriver, 0, kOldDriver);
  EXPECT_EQ(count.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(count.status().message(),
            "cudaGetDeviceCount: cudaErrorInsufficientDriver: CUDA driver version is "
            "insufficient for CUDA runtime version (driver supports CUDA 12.2, runtime is CUDA "
            "13.0)");
}

TEST(CudaDeviceCountTest, DriverSetupErrorsAreFailedPreconditions) {
  for (cudaError_t err :
       {cudaErrorStubLibrary, cudaErrorSystemDriverMismatch, cudaErrorCompatNotSupportedOnDevice,
        cudaErrorSystemNotReady, cudaErrorDevicesUnavailable}) {
    // With no driver at all, too: only cudaErrorInsufficientDriver reads version 0 as "none".
    for (cuda::CudaVersions versions : {kOldDriver, cuda::CudaVersions{0, 13000}}) {
      absl::StatusOr<int> count = cuda::DeviceCountFromCuda(err, 0, versions);
      EXPECT_EQ(count.status().code(), absl::StatusCode::kFailedPrecondition) << count.status();
      EXPECT_NE(count.status().message().find(cudaGetErrorName(err)), std::string::npos)
          << count.status();
    }
  }
}

TEST(CudaDeviceCountTest, OtherErrorsAreInternalNamingTheError) {
  for (cudaError_t err : {cudaErrorInitializationError, cudaErrorUnknown, cudaErrorOperatingSystem,
                          cudaErrorNotPermitted}) {
    absl::StatusOr<int> count = cuda::DeviceCountFromCuda(err, 0, {-1, 13000});
    EXPECT_EQ(count.status().code(), absl::StatusCode::kInternal) << count.status();
    EXPECT_NE(count.status().message().find(std::string("cudaGetDeviceCount: ") +
                                            cudaGetErrorName(err) + ": "),
              std::string::npos)
        << count.status();
    EXPECT_NE(count.status().message().find("(driver supports CUDA unknown, runtime is CUDA 13.0)"),
              std::string::npos)
        << count.status();
  }
}

// NCCL is opened at run time (nccl_api.h): what a machine without it, or with a wrong one, says.
TEST(NcclApiTest, OpensThisMachinesNcclAndMakesAnIdWithoutAGpu) {
  absl::StatusOr<cuda::NcclApi> api = cuda::OpenNccl("");
  ASSERT_TRUE(api.ok()) << api.status();  // the toolkit here ships libnccl.so.2
  int version = 0;
  ASSERT_EQ(api->get_version(&version), ncclSuccess);
  EXPECT_GE(version, 21200) << "NCCL 2.12 or newer";
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ASSERT_EQ(api->get_unique_id(&id), ncclSuccess);
  EXPECT_NE(std::string(id.internal, sizeof(id.internal)), std::string(sizeof(id.internal), '\0'));
  EXPECT_NE(cuda::NcclResultText(*api, ncclRemoteError).find("ncclRemoteError: "),
            std::string::npos);
}

TEST(NcclApiTest, APathThatIsNotNcclIsNamed) {
  absl::StatusOr<cuda::NcclApi> api = cuda::OpenNccl("/nonexistent/libnccl.so.2");
  ASSERT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition) << api.status();
  EXPECT_NE(api.status().message().find(
                "EVOSCALE_NCCL_LIBRARY=\"/nonexistent/libnccl.so.2\": cannot open it"),
            std::string::npos)
      << api.status();
  // A library that opens but is not NCCL.
  api = cuda::OpenNccl("libm.so.6");
  ASSERT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition) << api.status();
  EXPECT_NE(api.status().message().find("libm.so.6 lacks ncclGetVersion, ncclGetUniqueId"),
            std::string::npos)
      << api.status();
}

#endif  // EVOSCALE_HAVE_CUDA

}  // namespace
}  // namespace evoscale::trainer
