#include "trainer/criteo_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/feature_id.h"

namespace evoscale::trainer {
namespace {

std::string Line(int label, const std::string& first_int = "1",
                 const std::string& first_cat = "68fd1e64") {
  std::string line = absl::StrCat(label, "\t", first_int);
  for (int i = 1; i < 13; ++i) absl::StrAppend(&line, "\t", i % 3 == 0 ? "" : absl::StrCat(i));
  absl::StrAppend(&line, "\t", first_cat);
  for (int i = 1; i < 26; ++i) absl::StrAppend(&line, "\t", i % 5 == 0 ? "" : absl::StrCat("a", i));
  return line;
}

class ReaderTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& text) {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         absl::StrCat("criteo_reader_test_", getpid(), "_", counter_++, ".tsv"))
            .string();
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
  int counter_ = 0;
};

// The ranks of a job split the training rows and the held-out rows evenly and disjointly.
TEST(RowFilterTest, RanksSplitEachKindOfRowEvenly) {
  for (const int64_t holdout_every : {int64_t{0}, int64_t{10}, int64_t{2}}) {
    for (const bool holdout : {false, true}) {
      if (holdout && holdout_every == 0) continue;
      RowFilter one{.holdout_every = holdout_every, .holdout = holdout};
      std::vector<int> owners(10000, -1);
      std::vector<int> counts(3, 0);
      for (int rank = 0; rank < 3; ++rank) {
        RowFilter f = one;
        f.ranks = 3;
        f.rank = rank;
        for (int64_t row = 0; row < 10000; ++row) {
          if (!f.Keep(row)) continue;
          ASSERT_EQ(owners[row], -1) << "row " << row << " kept by two ranks";
          owners[row] = rank;
          ++counts[rank];
        }
      }
      for (int64_t row = 0; row < 10000; ++row) {
        EXPECT_EQ(owners[row] >= 0, one.Keep(row)) << "row " << row;
      }
      const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
      EXPECT_LE(*hi - *lo, 1) << holdout_every << " " << holdout;
    }
  }
}

TEST(ParseCriteoLineTest, ParsesLabelDenseAndCategoricals) {
  float label, dense[kNumDense];
  uint64_t fids[kNumCategorical];
  std::string why;
  ASSERT_TRUE(ParseCriteoLine(Line(1, "-5") + "\r", &label, dense, fids, &why)) << why;
  EXPECT_EQ(label, 1.0f);
  EXPECT_EQ(dense[0], 0.0f);                    // negative clipped to 0, log1p(0)
  EXPECT_FLOAT_EQ(dense[1], std::log1p(1.0f));  // "1"
  EXPECT_EQ(dense[3], 0.0f);                    // empty
  EXPECT_EQ(fids[0], MakeFid(0, 0x68fd1e64));
  EXPECT_EQ(fids[5], MakeFid(5, 0));  // empty categorical: the slot's "missing" id
  EXPECT_EQ(FidSlot(fids[25]), 25u);
}

TEST(ParseCriteoLineTest, RejectsMalformedLinesWithAReason) {
  float label, dense[kNumDense];
  uint64_t fids[kNumCategorical];
  std::string why;
  EXPECT_FALSE(ParseCriteoLine("", &label, dense, fids, &why));
  EXPECT_EQ(why, "empty line");
  EXPECT_FALSE(ParseCriteoLine("1\t2\t3", &label, dense, fids, &why));
  EXPECT_NE(why.find("40 tab-separated fields"), std::string::npos);
  EXPECT_FALSE(ParseCriteoLine(Line(1) + "\textra", &label, dense, fids, &why));
  std::string bad_label = Line(1);
  bad_label[0] = '2';
  EXPECT_FALSE(ParseCriteoLine(bad_label, &label, dense, fids, &why));
  EXPECT_EQ(why, "label is not 0 or 1");
  EXPECT_FALSE(ParseCriteoLine(Line(0, "x1"), &label, dense, fids, &why));
  EXPECT_NE(why.find("integer feature 1"), std::string::npos);
  EXPECT_FALSE(ParseCriteoLine(Line(0, "1", "zz"), &label, dense, fids, &why));
  EXPECT_NE(why.find("categorical 1 is not hex"), std::string::npos);
}

TEST_F(ReaderTest, CountsMalformedLinesAndKeepsGoing) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += (i == 17 ? std::string("garbage") : Line(i % 2)) + "\n";
  BatchReaderOptions options;
  options.batch_size = 64;
  options.max_malformed_fraction = 0.01;
  auto source = OpenCriteoFile(WriteFile(text), 1);
  ASSERT_TRUE(source.ok()) << source.status();
  BatchReader reader(*std::move(source), options);
  int rows = 0, batches = 0;
  while (true) {
    auto batch = reader.Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (*batch == nullptr) break;
    rows += (*batch)->size;
    ++batches;
    reader.Recycle(*std::move(batch));
  }
  EXPECT_EQ(rows, 299);
  EXPECT_EQ(batches, 5);
  EXPECT_EQ(reader.malformed(), 1);
  EXPECT_EQ(reader.lines(), 300);
}

TEST_F(ReaderTest, TooManyMalformedLinesIsDataLoss) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += (i % 10 == 3 ? std::string("1\tbad") : Line(1)) + "\n";
  BatchReaderOptions options;
  options.batch_size = 16;
  options.max_malformed_fraction = 0.05;
  BatchReader reader(*OpenCriteoFile(WriteFile(text), 1), options);
  absl::Status status;
  while (true) {
    auto batch = reader.Next();
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    if (*batch == nullptr) break;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("10 of 100 lines malformed"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find(":4: expected 40"), absl::string_view::npos) << status;
}

TEST_F(ReaderTest, MissingFileIsNotFound) {
  auto source = OpenCriteoFile("/nonexistent/train.tsv", 1);
  EXPECT_EQ(source.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(source.status().message().find("/nonexistent/train.tsv"), absl::string_view::npos);
}

TEST_F(ReaderTest, ResumesFromABatchEndAcrossEpochs) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += Line(i % 2, absl::StrCat(i)) + "\n";
  const std::string path = WriteFile(text);
  BatchReaderOptions options;
  options.batch_size = 4;
  BatchReader full(*OpenCriteoFile(path, 2), options);
  std::vector<float> all;
  ReaderPosition after_second;
  for (int b = 0;; ++b) {
    auto batch = *full.Next();
    if (batch == nullptr) break;
    if (b == 1) after_second = batch->end;
    for (int i = 0; i < batch->size; ++i) all.push_back(batch->dense[i * kNumDense]);
  }
  ASSERT_EQ(all.size(), 20u);
  BatchReader resumed(*OpenCriteoFile(path, 2, after_second), options);
  std::vector<float> rest;
  while (auto batch = *resumed.Next()) {
    for (int i = 0; i < batch->size; ++i) rest.push_back(batch->dense[i * kNumDense]);
  }
  EXPECT_EQ(rest, std::vector<float>(all.begin() + 8, all.end()));
}

TEST(BatchReaderTest, RoutesEveryIdToItsShardAndSplitsHoldout) {
  BatchReaderOptions options;
  options.batch_size = 100;
  options.num_shards = 3;
  options.filter.holdout_every = 10;
  BatchReader reader(MakeSyntheticSource(1000, 1, 1), options);
  int rows = 0;
  while (auto batch = *reader.Next()) {
    size_t routed = 0;
    for (uint32_t s = 0; s < 3; ++s) {
      for (uint32_t p : batch->shard_positions[s]) ASSERT_EQ(ShardOfFid(batch->fids[p], 3), s);
      routed += batch->shard_positions[s].size();
    }
    EXPECT_EQ(routed, size_t(batch->size) * kNumCategorical);
    rows += batch->size;
  }
  EXPECT_EQ(rows, 900);
}

// A job sends each distinct id of a batch once: per shard, its distinct ids in order of first
// position, and for every position the index of its id among them. Batches are recycled, so
// the second pass checks that nothing of an earlier batch's ids is left behind.
TEST(BatchReaderTest, DedupeGivesEachShardsDistinctIdsAndEveryPositionsIndex) {
  BatchReaderOptions options;
  options.batch_size = 512;
  options.num_shards = 4;
  options.dedupe = true;
  options.queue_depth = 1;
  BatchReader reader(MakeSyntheticSource(4096, 3, 1), options);
  size_t ids = 0, distinct = 0;
  while (auto batch = *reader.Next()) {
    ASSERT_EQ(batch->shard_keys.size(), 4u);
    ASSERT_EQ(batch->shard_slots.size(), 4u);
    for (uint32_t s = 0; s < 4; ++s) {
      const std::vector<uint32_t>& positions = batch->shard_positions[s];
      const std::vector<uint64_t>& keys = batch->shard_keys[s];
      const std::vector<uint32_t>& slots = batch->shard_slots[s];
      ASSERT_EQ(slots.size(), positions.size());
      // The same distinct ids, in order of first appearance.
      std::vector<uint64_t> expected;
      std::set<uint64_t> seen;
      for (uint32_t p : positions) {
        if (seen.insert(batch->fids[p]).second) expected.push_back(batch->fids[p]);
      }
      EXPECT_EQ(keys, expected);
      for (size_t k = 0; k < positions.size(); ++k) {
        ASSERT_LT(slots[k], keys.size());
        EXPECT_EQ(keys[slots[k]], batch->fids[positions[k]]);
      }
      ids += positions.size();
      distinct += keys.size();
    }
    reader.Recycle(std::move(batch));
  }
  EXPECT_EQ(ids, size_t(4096) * kNumCategorical);
  // Zipf ids repeat within a batch (57% distinct here; 35% on the Criteo sample): the
  // exchange is worth deduplicating.
  EXPECT_LT(distinct, ids * 2 / 3);
}

TEST(SyntheticSourceTest, RowsArePureFunctionsOfSeedAndIndex) {
  auto a = MakeSyntheticSource(100, 5, 1);
  auto b = MakeSyntheticSource(100, 5, 1, ReaderPosition{0, 50, 0});
  float la, lb, da[kNumDense], db[kNumDense];
  uint64_t fa[kNumCategorical], fb[kNumCategorical];
  int64_t ra, rb;
  for (int i = 0; i < 51; ++i) ASSERT_TRUE(*a->Next(&la, da, fa, &ra));
  ASSERT_TRUE(*b->Next(&lb, db, fb, &rb));
  EXPECT_EQ(ra, 50);
  EXPECT_EQ(rb, 50);
  EXPECT_EQ(la, lb);
  for (int f = 0; f < kNumCategorical; ++f) EXPECT_EQ(fa[f], fb[f]);
}

TEST(SyntheticSourceTest, HasAPlausibleClickRate) {
  auto source = MakeSyntheticSource(5000, 9, 1);
  float label, dense[kNumDense];
  uint64_t fids[kNumCategorical];
  int64_t row;
  double clicks = 0;
  int n = 0;
  while (*source->Next(&label, dense, fids, &row)) {
    clicks += label;
    ++n;
  }
  EXPECT_EQ(n, 5000);
  EXPECT_GT(clicks / n, 0.2);
  EXPECT_LT(clicks / n, 0.6);
}

}  // namespace
}  // namespace evoscale::trainer
