#include "trainer/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::trainer {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            absl::StrCat("checkpoint_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::unique_ptr<EmbeddingTable> Table() {
    EmbeddingTableOptions options;
    options.dim = 4;
    options.state_floats = 4;
    options.track_changes = true;
    return *EmbeddingTable::Create(options);
  }

  CheckpointManifest Manifest(int64_t step, std::vector<std::string> chain) {
    CheckpointManifest m;
    m.step = step;
    m.examples = step * 10;
    m.position = {0, step * 10, step * 100};
    m.shards = 1;
    m.dim = 4;
    m.state_floats = 4;
    m.optimizer = "adagrad";
    m.mlp_sizes = "3,1";
    m.full = chain.size() == 1;
    m.chain = std::move(chain);
    return m;
  }

  std::string dir_;
};

TEST_F(CheckpointTest, FullThenDeltaRestoresTheLatestState) {
  auto table = Table();
  for (uint64_t k = 1; k <= 100; ++k) table->FindOrInsert(k, 1);
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(10), 0, true, 10, *table).ok());
  std::vector<float> params = {1, 2, 3, 4}, m = {0, 0, 0, 0}, v = {1, 1, 1, 1};
  ASSERT_TRUE(
      WriteDenseAndManifest(dir_, Manifest(10, {CheckpointName(10)}), 10, params, m, v).ok());
  // Change a row, evict one, add one: the delta holds just these.
  const uint32_t r5 = table->Find(5);
  table->embedding(r5)[0] = 42.0f;
  table->MarkUpdated(r5, 11);
  table->Erase(7);
  table->FindOrInsert(1000, 12);
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(20), 0, false, 20, *table).ok());
  EXPECT_LT(std::filesystem::file_size(dir_ + "/" + CheckpointName(20) + "/shard-0.rows"),
            std::filesystem::file_size(dir_ + "/" + CheckpointName(10) + "/shard-0.rows") / 10);
  params = {5, 6, 7, 8};
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(20, {CheckpointName(10), CheckpointName(20)}),
                                    20, params, m, v)
                  .ok());

  auto newest = FindNewestCheckpoint(dir_);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->step, 20);
  EXPECT_EQ(newest->position.offset, 2000);
  EXPECT_EQ(newest->chain.size(), 2u);
  auto restored = Table();
  ASSERT_TRUE(LoadShardCheckpoint(dir_, *newest, 0, *restored).ok());
  EXPECT_EQ(restored->size(), table->size());
  EXPECT_EQ(restored->Find(7), EmbeddingTable::kNoRow);
  ASSERT_NE(restored->Find(1000), EmbeddingTable::kNoRow);
  EXPECT_EQ(restored->embedding(restored->Find(5))[0], 42.0f);
  EXPECT_EQ(restored->header(restored->Find(5))->last_update, 11u);
  for (uint64_t k : {1, 50, 100, 1000}) {
    const float* a = table->embedding(table->Find(k));
    const float* b = restored->embedding(restored->Find(k));
    for (int d = 0; d < 8; ++d) ASSERT_EQ(a[d], b[d]) << k;
  }
  std::vector<float> p2(4), m2(4), v2(4);
  int64_t adam_step = 0;
  ASSERT_TRUE(LoadDenseCheckpoint(dir_, *newest, &adam_step, p2, m2, v2).ok());
  EXPECT_EQ(adam_step, 20);
  EXPECT_EQ(p2, params);
}

TEST_F(CheckpointTest, IncompleteCheckpointsAreIgnoredAndOldChainsRemoved) {
  auto table = Table();
  table->FindOrInsert(1, 1);
  std::vector<float> p = {1}, m = {0}, v = {0};
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(5), 0, true, 5, *table).ok());
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(5, {CheckpointName(5)}), 5, p, m, v).ok());
  // A crash after the shard files but before the manifest leaves no checkpoint at step 9.
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(9), 0, false, 9, *table).ok());
  EXPECT_EQ(FindNewestCheckpoint(dir_)->step, 5);
  // A new full checkpoint retires the older chain.
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(12), 0, true, 12, *table).ok());
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(12, {CheckpointName(12)}), 12, p, m, v).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + CheckpointName(5)));
  EXPECT_EQ(FindNewestCheckpoint(dir_)->step, 12);
}

// A rank of a job keeps its previous checkpoint until the next is written everywhere: a new
// full one does not retire the older chain while keep_from names it, and that step stays
// loadable by FindCheckpoint.
TEST_F(CheckpointTest, KeepFromHoldsThePreviousCheckpointForAJobsRanks) {
  auto table = Table();
  table->FindOrInsert(1, 1);
  std::vector<float> p = {1}, m = {0}, v = {0};
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(5), 0, true, 5, *table).ok());
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(5, {CheckpointName(5)}), 5, p, m, v).ok());
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(12), 0, true, 12, *table).ok());
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(12, {CheckpointName(12)}), 12, p, m, v,
                                    CheckpointName(5))
                  .ok());
  EXPECT_EQ(FindNewestCheckpoint(dir_)->step, 12);
  ASSERT_TRUE(FindCheckpoint(dir_, 5).ok());
  EXPECT_EQ(FindCheckpoint(dir_, 5)->step, 5);
  EXPECT_EQ(FindCheckpoint(dir_, 7).status().code(), absl::StatusCode::kNotFound);
  // The next one, keeping 12, retires 5.
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(20), 0, true, 20, *table).ok());
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(20, {CheckpointName(20)}), 20, p, m, v,
                                    CheckpointName(12))
                  .ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + CheckpointName(5)));
  EXPECT_TRUE(FindCheckpoint(dir_, 12).ok());
}

TEST_F(CheckpointTest, PendingOccurrenceCountsSurviveARestore) {
  EmbeddingTableOptions options;
  options.dim = 4;
  options.state_floats = 4;
  options.track_changes = true;
  options.min_count_by_slot = {3};
  auto table = *EmbeddingTable::Create(options);
  EXPECT_EQ(table->FindOrInsert(8, 1), EmbeddingTable::kNoRow);  // 1 of 3 sightings
  EXPECT_EQ(table->FindOrInsert(8, 1), EmbeddingTable::kNoRow);  // 2 of 3
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(4), 0, true, 4, *table).ok());
  std::vector<float> p = {1}, m = {0}, v = {0};
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(4, {CheckpointName(4)}), 4, p, m, v).ok());
  auto restored = *EmbeddingTable::Create(options);
  ASSERT_TRUE(LoadShardCheckpoint(dir_, *FindNewestCheckpoint(dir_), 0, *restored).ok());
  EXPECT_EQ(restored->pending_count(), 1u);
  EXPECT_NE(restored->FindOrInsert(8, 5), EmbeddingTable::kNoRow);  // the third sighting
}

TEST_F(CheckpointTest, MissingOrForeignCheckpointsAreErrors) {
  EXPECT_EQ(FindNewestCheckpoint(dir_ + "/none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindNewestCheckpoint(dir_).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::create_directories(dir_ + "/" + CheckpointName(3));
  std::ofstream(dir_ + "/" + CheckpointName(3) + "/MANIFEST") << "hello\n";
  EXPECT_EQ(FindNewestCheckpoint(dir_).status().code(), absl::StatusCode::kDataLoss);
}

// Found by checkpoint_fuzz: a header whose row count the file cannot hold made the reader
// reserve an index for it (2 GiB for a 2^28-row claim) before finding the file short.
TEST_F(CheckpointTest, RowCountsTheFileCannotHoldAreDataLossBeforeAnyReservation) {
  auto table = Table();
  table->FindOrInsert(1, 1);
  table->FindOrInsert(2, 1);
  ASSERT_TRUE(WriteShardCheckpoint(dir_, CheckpointName(2), 0, true, 2, *table).ok());
  std::vector<float> p = {1}, m = {0}, v = {0};
  ASSERT_TRUE(WriteDenseAndManifest(dir_, Manifest(2, {CheckpointName(2)}), 2, p, m, v).ok());
  const std::string rows = dir_ + "/" + CheckpointName(2) + "/shard-0.rows";
  const auto size = std::filesystem::file_size(rows);
  for (uint64_t claimed : {uint64_t{1} << 28, uint64_t{3}, ~uint64_t{0} / 4}) {
    {
      std::fstream f(rows, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(24);  // the header's row count: magic (8), shard, dim, state, full (4 each)
      f.write(reinterpret_cast<const char*>(&claimed), sizeof(claimed));
    }
    auto restored = Table();
    const absl::Status st = LoadShardCheckpoint(dir_, *FindNewestCheckpoint(dir_), 0, *restored);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << claimed;
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(absl::StrCat(
                                               size, " bytes do not hold the ", claimed, " rows")));
    EXPECT_EQ(restored->size(), 0u);
  }
  // The true count still loads.
  {
    std::fstream f(rows, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24);
    const uint64_t two = 2;
    f.write(reinterpret_cast<const char*>(&two), sizeof(two));
  }
  auto restored = Table();
  ASSERT_TRUE(LoadShardCheckpoint(dir_, *FindNewestCheckpoint(dir_), 0, *restored).ok());
  EXPECT_EQ(restored->size(), 2u);
}

}  // namespace
}  // namespace evoscale::trainer
