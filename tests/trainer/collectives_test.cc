#include "trainer/collectives.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/thread_ranks.h"

namespace evoscale::trainer {
namespace {

using ::testing::ElementsAre;
using testing::ThreadRanks;

TEST(OneProcessTest, EveryCollectiveAnswersThisRanksOwnValues) {
  OneProcess one;
  EXPECT_EQ(one.rank(), 0);
  EXPECT_EQ(one.size(), 1);
  EXPECT_FALSE(one.distributed());
  EXPECT_EQ(one.payload_memory(), PayloadMemory::kHost);

  const std::vector<uint64_t> ids = {7, 8, 9};
  std::vector<uint64_t> got;
  ASSERT_TRUE(AllToAllVOf(one, ids, {3}, &got, {3}).ok());
  EXPECT_EQ(got, ids);
  std::vector<int64_t> counts;
  ASSERT_TRUE(one.AllToAll({5}, &counts).ok());
  EXPECT_THAT(counts, ElementsAre(5));

  float sum[2] = {1.5f, -2.0f};
  int64_t v[2] = {3, -4};
  double seconds = 2.5;
  ASSERT_TRUE(one.AllReduceSum(sum, 2).ok());
  ASSERT_TRUE(one.AllReduceSum(v, 2).ok());
  ASSERT_TRUE(one.AllReduceMin(v, 2).ok());
  ASSERT_TRUE(one.AllReduceMax(v, 2).ok());
  ASSERT_TRUE(one.AllReduceMax(&seconds, 1).ok());
  EXPECT_THAT(sum, ElementsAre(1.5f, -2.0f));
  EXPECT_THAT(v, ElementsAre(3, -4));
  EXPECT_EQ(seconds, 2.5);

  char bytes[3] = {'a', 'b', 'c'};
  ASSERT_TRUE(one.Broadcast(bytes, 3, 0).ok());
  EXPECT_EQ(std::string(bytes, 3), "abc");
  std::vector<float> all;
  ASSERT_TRUE(one.GatherToRoot({0.25f, 0.5f}, &all).ok());
  EXPECT_THAT(all, ElementsAre(0.25f, 0.5f));
  std::vector<int64_t> gathered;
  ASSERT_TRUE(one.AllGather(42, &gathered).ok());
  EXPECT_THAT(gathered, ElementsAre(42));
  EXPECT_EQ(one.bytes_sent(), 0);
}

TEST(OneProcessTest, AnAllToAllVWhoseCountsDoNotMirrorIsInternal) {
  OneProcess one;
  const std::vector<float> rows = {1, 2, 3};
  std::vector<float> got;
  const absl::Status status = AllToAllVOf(one, rows, {3}, &got, {2});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            "AllToAllV in a job of one: sends 3 elements to itself but expects 2");
}

TEST(OneProcessTest, FirstFailureIsThisRanksOwnStatusUnprefixed) {
  OneProcess one;
  EXPECT_TRUE(one.FirstFailure(absl::OkStatus()).ok());
  EXPECT_EQ(one.FirstFailure(absl::NotFoundError("no file x")), absl::NotFoundError("no file x"));
}

// The interface's contract over several ranks (ThreadRanks, the tests' transport of a job):
// what MPI and NCCL must answer too.
TEST(CollectivesTest, AllToAllVGivesEachRankItsShareOfEveryRankInRankOrder) {
  ThreadRanks job(3);
  job.Run([](Collectives& c) {
    // Rank r sends r + 1 + p copies of the value 10 * r + p to rank p.
    std::vector<int64_t> send, send_counts, recv_counts;
    for (int p = 0; p < c.size(); ++p) {
      send_counts.push_back(c.rank() + 1 + p);
      send.insert(send.end(), size_t(c.rank() + 1 + p), 10 * c.rank() + p);
      recv_counts.push_back(p + 1 + c.rank());
    }
    std::vector<int64_t> recv;
    EXPECT_TRUE(AllToAllVOf(c, send, send_counts, &recv, recv_counts).ok());
    std::vector<int64_t> want;
    for (int p = 0; p < c.size(); ++p)
      want.insert(want.end(), size_t(p + 1 + c.rank()), 10 * p + c.rank());
    EXPECT_EQ(recv, want) << "rank " << c.rank();
    std::vector<int64_t> counts;
    EXPECT_TRUE(c.AllToAll(send_counts, &counts).ok());
    EXPECT_EQ(counts, recv_counts) << "rank " << c.rank();
  });
}

TEST(CollectivesTest, ReductionsBroadcastAndGathersAgreeOnEveryRank) {
  ThreadRanks job(3);
  absl::Mutex mu;
  std::vector<std::vector<float>> gathered(3);
  job.Run([&](Collectives& c) {
    const int r = c.rank();
    float dense[2] = {float(r), 0.5f};
    int64_t sums[2] = {r, 1}, mins[1] = {10 - r}, maxs[1] = {r};
    double seconds = 1.0 + r;
    EXPECT_TRUE(c.AllReduceSum(dense, 2).ok());
    EXPECT_TRUE(c.AllReduceSum(sums, 2).ok());
    EXPECT_TRUE(c.AllReduceMin(mins, 1).ok());
    EXPECT_TRUE(c.AllReduceMax(maxs, 1).ok());
    EXPECT_TRUE(c.AllReduceMax(&seconds, 1).ok());
    EXPECT_THAT(dense, ElementsAre(3.0f, 1.5f));
    EXPECT_THAT(sums, ElementsAre(3, 3));
    EXPECT_EQ(mins[0], 8);
    EXPECT_EQ(maxs[0], 2);
    EXPECT_EQ(seconds, 3.0);
    int64_t root_says = r == 1 ? 77 : -1;
    EXPECT_TRUE(c.Broadcast(&root_says, sizeof(root_says), 1).ok());
    EXPECT_EQ(root_says, 77);
    std::vector<int64_t> all;
    EXPECT_TRUE(c.AllGather(100 + r, &all).ok());
    EXPECT_THAT(all, ElementsAre(100, 101, 102));
    std::vector<float> logits;
    EXPECT_TRUE(c.GatherToRoot(std::vector<float>(size_t(r), float(r)), &logits).ok());
    absl::MutexLock lock(&mu);
    gathered[r] = logits;
  });
  EXPECT_THAT(gathered[0], ElementsAre(1.0f, 2.0f, 2.0f));
  EXPECT_TRUE(gathered[1].empty());
  EXPECT_TRUE(gathered[2].empty());
}

TEST(CollectivesTest, FirstFailureIsTheLowestFailingRanksStatusNamedOnEveryRank) {
  ThreadRanks job(3);
  absl::Mutex mu;
  std::vector<absl::Status> answers(3), all_ok(3), silent(3);
  job.Run([&](Collectives& c) {
    const int r = c.rank();
    const absl::Status mine = r == 0   ? absl::OkStatus()
                              : r == 1 ? absl::DataLossError("fsync ckpt-5: Input/output error")
                                       : absl::NotFoundError("no test file");
    absl::Status first = c.FirstFailure(mine);
    absl::Status ok = c.FirstFailure(absl::OkStatus());
    // A message of no bytes still names its rank.
    absl::Status empty = c.FirstFailure(r == 2 ? absl::UnavailableError("") : absl::OkStatus());
    absl::MutexLock lock(&mu);
    answers[r] = first;
    all_ok[r] = ok;
    silent[r] = empty;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(answers[r], absl::DataLossError("rank 1: fsync ckpt-5: Input/output error"))
        << "rank " << r;
    EXPECT_TRUE(all_ok[r].ok()) << "rank " << r;
    EXPECT_EQ(silent[r], absl::UnavailableError("rank 2: ")) << "rank " << r;
  }
}

TEST(CollectivesTest, BytesSentCountPayloadsToOthers) {
  ThreadRanks job(2);
  absl::Mutex mu;
  std::vector<int64_t> bytes(2);
  job.Run([&](Collectives& c) {
    // 3 floats to the peer, 1 to itself; a sum of 4 int64s; no minimum is counted.
    const std::vector<float> send = {1, 2, 3, 4};
    const std::vector<int64_t> counts =
        c.rank() == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{3, 1};
    std::vector<float> recv;
    EXPECT_TRUE(AllToAllVOf(c, send, counts, &recv, counts).ok());
    int64_t v[4] = {};
    EXPECT_TRUE(c.AllReduceSum(v, 4).ok());
    EXPECT_TRUE(c.AllReduceMin(v, 1).ok());
    absl::MutexLock lock(&mu);
    bytes[c.rank()] = c.bytes_sent();
  });
  EXPECT_THAT(bytes, ElementsAre(3 * 4 + 32, 3 * 4 + 32));
}

}  // namespace
}  // namespace evoscale::trainer
