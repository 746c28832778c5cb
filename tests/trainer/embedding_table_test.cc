#include "trainer/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/feature_id.h"

namespace evoscale::trainer {
namespace {

EmbeddingTableOptions SmallOptions() {
  EmbeddingTableOptions options;
  options.dim = 4;
  options.state_floats = 4;
  options.initial_capacity = 16;
  options.max_rows = 1 << 20;
  options.seed = 7;
  return options;
}

std::unique_ptr<EmbeddingTable> MakeTable(EmbeddingTableOptions options = SmallOptions()) {
  auto table = EmbeddingTable::Create(std::move(options));
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

TEST(EmbeddingTableTest, InsertThenFindReturnsTheSameRow) {
  auto table = MakeTable();
  EXPECT_EQ(table->Find(42), EmbeddingTable::kNoRow);
  const uint32_t row = table->FindOrInsert(42, 3);
  ASSERT_NE(row, EmbeddingTable::kNoRow);
  EXPECT_EQ(table->Find(42), row);
  EXPECT_EQ(table->FindOrInsert(42, 9), row);
  EXPECT_EQ(table->size(), 1u);
  EXPECT_EQ(table->header(row)->key, 42u);
  EXPECT_EQ(table->header(row)->last_update, 3u);  // insertion time; lookups do not touch it
  for (int d = 0; d < 4; ++d) EXPECT_EQ(table->state(row)[d], 0.0f);
}

TEST(EmbeddingTableTest, InitializerIsAPureFunctionOfSeedAndKey) {
  auto a = MakeTable();
  auto b = MakeTable();
  b->FindOrInsert(1, 0);  // different insertion order and row numbers
  const uint32_t ra = a->FindOrInsert(99, 0), rb = b->FindOrInsert(99, 0);
  EXPECT_NE(ra, rb);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(a->embedding(ra)[d], b->embedding(rb)[d]);
  auto options = SmallOptions();
  options.seed = 8;
  auto c = MakeTable(options);
  const uint32_t rc = c->FindOrInsert(99, 0);
  EXPECT_NE(a->embedding(ra)[0], c->embedding(rc)[0]);
}

TEST(EmbeddingTableTest, NormalInitializerHasTheRequestedSpread) {
  auto options = SmallOptions();
  options.dim = 16;
  options.init_value = 0.01f;
  auto table = MakeTable(options);
  double sum = 0, sum2 = 0;
  int n = 0;
  for (uint64_t k = 0; k < 2000; ++k) {
    const float* e = table->embedding(table->FindOrInsert(k, 0));
    for (int d = 0; d < 16; ++d, ++n) {
      sum += e[d];
      sum2 += double(e[d]) * e[d];
    }
  }
  EXPECT_NEAR(sum / n, 0.0, 0.0005);
  EXPECT_NEAR(std::sqrt(sum2 / n), 0.01, 0.0005);
}

TEST(EmbeddingTableTest, GrowsWithoutLosingOrMovingRows) {
  auto table = MakeTable();
  std::vector<uint32_t> rows;
  std::vector<float> first;
  for (uint64_t k = 0; k < 20000; ++k) {
    rows.push_back(table->FindOrInsert(k * 0x9E3779B97F4A7C15ull, 0));
    first.push_back(table->embedding(rows.back())[0]);
  }
  EXPECT_EQ(table->size(), 20000u);
  EXPECT_GE(table->capacity(), 20000u / 0.8);
  for (uint64_t k = 0; k < 20000; ++k) {
    ASSERT_EQ(table->Find(k * 0x9E3779B97F4A7C15ull), rows[k]);
    ASSERT_EQ(table->embedding(rows[k])[0], first[k]);
  }
  EXPECT_GE(table->memory_bytes(), table->size() * table->row_bytes());
}

TEST(EmbeddingTableTest, ReserveGrowsOnceAndKeepsEveryRow) {
  auto table = MakeTable();
  for (uint64_t k = 0; k < 10; ++k) table->FindOrInsert(k * 0x9E3779B97F4A7C15ull, 0);
  ASSERT_TRUE(table->Reserve(50000).ok());
  const size_t reserved = table->capacity();
  EXPECT_GE(reserved, 50000u / 0.8);
  EXPECT_LT(reserved, 50000u / 0.8 + 2);  // one rehash to the size asked, not a 1.5x ladder
  EXPECT_TRUE(table->Reserve(100).ok());  // smaller: nothing changes
  EXPECT_EQ(table->capacity(), reserved);
  // Restored in hash order, as a checkpoint writes them: no growth on the way.
  std::vector<float> values(8, 0.5f);
  for (uint64_t k = 10; k < 40000; ++k) {
    ASSERT_NE(table->Restore(k * 0x9E3779B97F4A7C15ull, 1, values.data()),
              EmbeddingTable::kNoRow);
  }
  EXPECT_EQ(table->capacity(), reserved);
  for (uint64_t k = 0; k < 40000; ++k) {
    ASSERT_NE(table->Find(k * 0x9E3779B97F4A7C15ull), EmbeddingTable::kNoRow) << k;
  }
}

TEST(EmbeddingTableTest, EraseKeepsProbeChainsIntact) {
  auto table = MakeTable();
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys(5000);
  for (auto& k : keys) k = rng();
  for (uint64_t k : keys) table->FindOrInsert(k, 0);
  for (size_t i = 0; i < keys.size(); i += 2) EXPECT_TRUE(table->Erase(keys[i]));
  EXPECT_FALSE(table->Erase(keys[0]));
  EXPECT_EQ(table->size(), keys.size() / 2);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(table->Find(keys[i]) == EmbeddingTable::kNoRow, i % 2 == 0) << i;
  }
  // Freed rows are reused before the arena grows.
  const uint32_t reused = table->FindOrInsert(12345, 0);
  EXPECT_LT(reused, keys.size());
}

TEST(EmbeddingTableTest, EvictsRowsNotUpdatedSinceTheCutoff) {
  auto table = MakeTable();
  const uint32_t old_row = table->FindOrInsert(1, 1);
  const uint32_t fresh_row = table->FindOrInsert(2, 1);
  table->FindOrInsert(3, 8);
  table->MarkUpdated(fresh_row, 9);
  std::vector<uint64_t> evicted;
  EXPECT_EQ(table->EvictOlderThan(5, &evicted), 1u);
  EXPECT_EQ(evicted, std::vector<uint64_t>{1});
  EXPECT_EQ(table->Find(1), EmbeddingTable::kNoRow);
  EXPECT_EQ(table->Find(2), fresh_row);
  EXPECT_NE(table->Find(3), EmbeddingTable::kNoRow);
  EXPECT_EQ(table->size(), 2u);
  (void)old_row;
}

TEST(EmbeddingTableTest, OccurrenceThresholdAdmitsOnTheNthSighting) {
  auto options = SmallOptions();
  options.min_count_by_slot = {0, 3};  // slot 1 needs 3 sightings, slot 0 none
  auto table = MakeTable(options);
  const uint64_t rare = MakeFid(1, 77), common = MakeFid(0, 77), other_slot = MakeFid(5, 77);
  EXPECT_NE(table->FindOrInsert(common, 0), EmbeddingTable::kNoRow);
  EXPECT_NE(table->FindOrInsert(other_slot, 0), EmbeddingTable::kNoRow);
  EXPECT_EQ(table->FindOrInsert(rare, 0), EmbeddingTable::kNoRow);
  EXPECT_EQ(table->FindOrInsert(rare, 0), EmbeddingTable::kNoRow);
  EXPECT_EQ(table->pending_count(), 1u);
  EXPECT_NE(table->FindOrInsert(rare, 0), EmbeddingTable::kNoRow);
  EXPECT_EQ(table->pending_count(), 0u);
  EXPECT_EQ(table->size(), 3u);
}

TEST(EmbeddingTableTest, BatchedLookupMatchesOneByOne) {
  auto a = MakeTable();
  auto b = MakeTable();
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys(3000);
  for (auto& k : keys) k = rng() % 1000;  // many repeats within the batch
  std::vector<uint32_t> rows(keys.size()), found(keys.size());
  a->FindOrInsertBatch(keys.data(), keys.size(), 5, rows.data());
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t row = b->FindOrInsert(keys[i], 5);
    ASSERT_EQ(row, rows[i]) << i;  // same insertion order, same rows
  }
  a->FindBatch(keys.data(), keys.size(), found.data());
  EXPECT_EQ(found, rows);
  const uint64_t missing = 5000;
  uint32_t miss;
  a->FindBatch(&missing, 1, &miss);
  EXPECT_EQ(miss, EmbeddingTable::kNoRow);
}

TEST(EmbeddingTableTest, TakeChangesReportsChangedRowsAndErasedKeys) {
  auto options = SmallOptions();
  options.track_changes = true;
  auto table = MakeTable(options);
  const uint32_t r1 = table->FindOrInsert(1, 1);
  table->FindOrInsert(2, 1);
  std::vector<uint32_t> rows;
  std::vector<uint64_t> erased;
  table->TakeChanges(1, &rows, &erased);
  EXPECT_EQ(rows.size(), 2u);
  table->MarkUpdated(r1, 2);
  table->MarkUpdated(r1, 3);
  table->Erase(2);
  table->TakeChanges(3, &rows, &erased);
  EXPECT_EQ(rows, std::vector<uint32_t>{r1});
  EXPECT_EQ(erased, std::vector<uint64_t>{2});
  table->TakeChanges(4, &rows, &erased);
  EXPECT_TRUE(rows.empty());
  EXPECT_TRUE(erased.empty());
}

TEST(EmbeddingTableTest, ShardsOwnedByDifferentThreadsWorkConcurrently) {
  constexpr int kShards = 4;
  std::vector<std::unique_ptr<EmbeddingTable>> shards;
  auto options = SmallOptions();
  options.init = EmbeddingTableOptions::Init::kConstant;
  options.init_value = 0.0f;
  for (int s = 0; s < kShards; ++s) shards.push_back(MakeTable(options));
  std::vector<uint64_t> keys(40000);
  std::mt19937_64 rng(5);
  for (auto& k : keys) k = MakeFid(uint32_t(rng() % 26), rng() % 20000);
  std::vector<std::thread> threads;
  for (int s = 0; s < kShards; ++s) {
    threads.emplace_back([&, s] {
      for (uint64_t k : keys) {
        if (ShardOfFid(k, kShards) != uint32_t(s)) continue;
        const uint32_t row = shards[s]->FindOrInsert(k, 1);
        shards[s]->embedding(row)[0] += 1.0f;  // count sightings in the row
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<uint64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  size_t total = 0;
  for (auto& shard : shards) total += shard->size();
  EXPECT_EQ(total, sorted.size());
  // Each shard holds only its own ids, with every sighting counted.
  for (uint64_t k : sorted) {
    const int s = int(ShardOfFid(k, kShards));
    const uint32_t row = shards[s]->Find(k);
    ASSERT_NE(row, EmbeddingTable::kNoRow);
    ASSERT_EQ(shards[s]->embedding(row)[0], float(std::count(keys.begin(), keys.end(), k)));
  }
  for (int s = 0; s < kShards; ++s) EXPECT_GT(shards[s]->size(), sorted.size() / 8);
}

TEST(EmbeddingTableTest, RejectsBadOptions) {
  auto options = SmallOptions();
  options.dim = 0;
  EXPECT_EQ(EmbeddingTable::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = SmallOptions();
  options.max_load_factor = 1.0;
  EXPECT_EQ(EmbeddingTable::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FeatureIdTest, SlotAndHashArePacked) {
  const uint64_t fid = MakeFid(25, 0xdeadbeef);
  EXPECT_EQ(FidSlot(fid), 25u);
  EXPECT_NE(MakeFid(25, 1), MakeFid(24, 1));
  EXPECT_EQ(fid >> 63, 0u);
  for (uint32_t shards : {1u, 3u, 8u}) EXPECT_LT(ShardOfFid(fid, shards), shards);
}

}  // namespace
}  // namespace evoscale::trainer
