#include "trainer/internal/embedding_exchange.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/trainer/thread_ranks.h"
#include "trainer/criteo_reader.h"
#include "trainer/feature_id.h"

namespace evoscale::trainer::internal {
namespace {

constexpr int kDim = 3;
constexpr int kLocalShards = 2;
const InputLayout kLayout{kDim, kNumCategorical* kDim + kNumDense};

// The row an owner sends for `id`: values the test can recognise anywhere.
float RowValue(uint64_t id, int d) { return float(id % 1000) + 0.25f * float(d); }

// This rank's first batch of a job of `ranks`, as the trainer's reader makes it.
std::unique_ptr<ExampleBatch> RankBatch(int ranks, int rank) {
  BatchReaderOptions options;
  options.batch_size = 32;
  options.num_shards = ranks * kLocalShards;
  options.filter.ranks = ranks;
  options.filter.rank = rank;
  options.dedupe = true;
  BatchReader reader(MakeSyntheticSource(400, 7, 1), options);
  absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
  EXPECT_TRUE(got.ok() && *got != nullptr) << got.status();
  return got.ok() ? *std::move(got) : nullptr;
}

// Runs body on every rank of a job of `ranks`: OneProcess for one, else threads as ranks.
void RunJob(int ranks, const std::function<void(Collectives&)>& body) {
  if (ranks == 1) {
    OneProcess one;
    body(one);
    return;
  }
  testing::ThreadRanks(ranks).Run(body);
}

// What every rank of a job saw in one exchange.
struct RankView {
  std::vector<uint64_t> batch_ids;     // its batch's ids, by position
  std::vector<float> input;            // the input after ReturnRows
  std::map<uint64_t, int64_t> asked;   // ids asked of its shards, and how many times
  std::map<uint64_t, float> gradient;  // per asked id: the sum of gradient(k)[1]
  bool ids_are_its_own = true;         // every asked id hashes to one of its shards
};

// One step's exchange on every rank; rank `idle` (-1: none) has no batch.
std::vector<RankView> ExchangeOnce(int ranks, int idle) {
  std::vector<RankView> views(ranks);
  absl::Mutex mu;
  RunJob(ranks, [&](Collectives& job) {
    const int r = job.rank();
    std::unique_ptr<ExampleBatch> batch = r == idle ? nullptr : RankBatch(ranks, r);
    RankView view;
    if (batch != nullptr) view.batch_ids = batch->fids;
    const size_t examples = batch == nullptr ? 32 : size_t(batch->size);
    view.input.assign(examples * kLayout.row_floats, -1.0f);
    EmbeddingExchange exchange(&job, kLocalShards, kLayout);
    EXPECT_TRUE(exchange.SendIds(batch.get()).ok());
    for (int l = 0; l < kLocalShards; ++l) {
      const EmbeddingExchange::Asked asked = exchange.AskedOf(l);
      for (size_t k = 0; k < asked.size(); ++k) {
        const uint64_t id = asked.id(k);
        ++view.asked[id];
        if (ShardOfFid(id, uint32_t(ranks * kLocalShards)) != uint32_t(r * kLocalShards + l)) {
          view.ids_are_its_own = false;
        }
        for (int d = 0; d < kDim; ++d) asked.row(k)[d] = RowValue(id, d);
      }
    }
    EXPECT_TRUE(exchange.ReturnRows(view.input.data()).ok());
    // Every position's gradient: 1, 2, 3 for the three floats of its row.
    std::vector<float> gradient(view.input.size(), 0.0f);
    for (size_t p = 0; p < view.batch_ids.size(); ++p) {
      for (int d = 0; d < kDim; ++d) gradient[kLayout.Offset(uint32_t(p)) + d] = float(d + 1);
    }
    EXPECT_TRUE(exchange.SendGradients(gradient.data()).ok());
    for (int l = 0; l < kLocalShards; ++l) {
      const EmbeddingExchange::Asked asked = exchange.AskedOf(l);
      for (size_t k = 0; k < asked.size(); ++k) view.gradient[asked.id(k)] += asked.gradient(k)[1];
    }
    absl::MutexLock lock(&mu);
    views[r] = std::move(view);
  });
  return views;
}

class EmbeddingExchangeTest : public ::testing::TestWithParam<int> {};

TEST_P(EmbeddingExchangeTest, EachDistinctIdGoesToItsOwnerOnceFromEveryRankThatHasIt) {
  const int ranks = GetParam();
  const std::vector<RankView> views = ExchangeOnce(ranks, -1);
  for (int owner = 0; owner < ranks; ++owner) {
    EXPECT_TRUE(views[owner].ids_are_its_own) << "rank " << owner;
    for (const auto& [id, times] : views[owner].asked) {
      int holders = 0;  // ranks whose batch holds the id
      for (const RankView& v : views) {
        holders += std::find(v.batch_ids.begin(), v.batch_ids.end(), id) != v.batch_ids.end();
      }
      EXPECT_EQ(times, holders) << "id " << id << " at rank " << owner;
    }
  }
  // And no id of any batch was left out.
  for (const RankView& v : views) {
    for (uint64_t id : v.batch_ids) {
      const int owner = int(ShardOfFid(id, uint32_t(ranks * kLocalShards))) / kLocalShards;
      EXPECT_EQ(views[owner].asked.count(id), 1u) << "id " << id;
    }
  }
}

TEST_P(EmbeddingExchangeTest, RowsComeBackToEveryPositionThatHoldsTheirId) {
  const int ranks = GetParam();
  const std::vector<RankView> views = ExchangeOnce(ranks, -1);
  for (int r = 0; r < ranks; ++r) {
    const RankView& v = views[r];
    ASSERT_FALSE(v.batch_ids.empty());
    for (size_t p = 0; p < v.batch_ids.size(); ++p) {
      for (int d = 0; d < kDim; ++d) {
        ASSERT_EQ(v.input[kLayout.Offset(uint32_t(p)) + d], RowValue(v.batch_ids[p], d))
            << "rank " << r << " position " << p;
      }
    }
    // The dense features' places are the trainer's, untouched.
    EXPECT_EQ(v.input[kNumCategorical * kDim], -1.0f);
  }
}

TEST_P(EmbeddingExchangeTest, GradientsReachTheOwnerSummedOverPositionsAndRanks) {
  const int ranks = GetParam();
  const std::vector<RankView> views = ExchangeOnce(ranks, -1);
  std::map<uint64_t, int64_t> occurrences;  // over every rank's batch
  for (const RankView& v : views) {
    for (uint64_t id : v.batch_ids) ++occurrences[id];
  }
  size_t ids = 0;
  for (const RankView& v : views) {
    for (const auto& [id, sum] : v.gradient) {
      EXPECT_EQ(sum, 2.0f * float(occurrences[id])) << "id " << id;  // 2: the second float's
      ++ids;
    }
  }
  EXPECT_EQ(ids, occurrences.size());
}

INSTANTIATE_TEST_SUITE_P(Ranks, EmbeddingExchangeTest, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 1 ? std::string("OneProcess")
                                                  : std::to_string(info.param) + "Ranks";
                         });

TEST(EmbeddingExchangeIdleRankTest, ARankWithoutABatchStillAnswersTheOthers) {
  // Rank 1's slice ran out: it sends nothing, but looks up what rank 0 asks of it.
  const std::vector<RankView> views = ExchangeOnce(2, /*idle=*/1);
  const RankView& busy = views[0];
  const RankView& idle = views[1];
  EXPECT_FALSE(idle.asked.empty());
  for (size_t p = 0; p < busy.batch_ids.size(); ++p) {
    EXPECT_EQ(busy.input[kLayout.Offset(uint32_t(p))], RowValue(busy.batch_ids[p], 0));
  }
  for (float x : idle.input) ASSERT_EQ(x, -1.0f);  // nothing of its own came back
  for (const auto& [id, sum] : idle.gradient) {
    EXPECT_EQ(sum, 2.0f * float(std::count(busy.batch_ids.begin(), busy.batch_ids.end(), id)));
  }
}

}  // namespace
}  // namespace evoscale::trainer::internal
