#include "trainer/internal/checkpoint_layout.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint.h"

namespace evoscale::trainer::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class CheckpointLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            absl::StrCat("checkpoint_layout_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A complete checkpoint of `step` in `dir` (its manifest and dense state).
  static void WriteCheckpoint(const std::string& dir, int64_t step) {
    std::filesystem::create_directories(dir);
    CheckpointManifest m;
    m.step = step;
    m.shards = 1;
    m.dim = 4;
    m.optimizer = "adagrad";
    m.mlp_sizes = "3,1";
    m.full = true;
    m.chain = {CheckpointName(step)};
    std::vector<float> p = {1}, adam_m = {0}, adam_v = {0};
    ASSERT_TRUE(WriteDenseAndManifest(dir, m, step, p, adam_m, adam_v).ok());
  }
  std::string Rank(int q, int m) const { return absl::StrCat(dir_, "/rank-", q, "-of-", m); }
  // The names in `dir`, sorted.
  static std::vector<std::string> Names(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

TEST_F(CheckpointLayoutTest, EachRankOfAJobHasItsOwnFolderAndAJobOfOneTheDirItself) {
  EXPECT_EQ(RankCheckpointDir("/ckpt", 0, 1), "/ckpt");
  EXPECT_EQ(RankCheckpointDir("/ckpt", 1, 3), "/ckpt/rank-1-of-3");
  EXPECT_EQ(RankCheckpointDir("", 1, 3), "");
}

TEST_F(CheckpointLayoutTest, AJobFindsAnotherNumberOfRanksFoldersInRankOrder) {
  WriteCheckpoint(Rank(1, 2), 10);
  WriteCheckpoint(Rank(0, 2), 10);
  std::filesystem::create_directories(Rank(0, 3));  // this job's own, empty: not another layout
  absl::StatusOr<std::vector<std::string>> found = FindOtherLayout(dir_, 3);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre(Rank(0, 2), Rank(1, 2)));
  // A job of two's own layout is not another one.
  found = FindOtherLayout(dir_, 2);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, IsEmpty());
  // A single process resumes from the job's folders.
  found = FindOtherLayout(dir_, 1);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre(Rank(0, 2), Rank(1, 2)));
}

TEST_F(CheckpointLayoutTest, AJobFindsASingleProcesssCheckpointsInTheDirItself) {
  WriteCheckpoint(dir_, 7);
  absl::StatusOr<std::vector<std::string>> found = FindOtherLayout(dir_, 2);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ElementsAre(dir_));
  found = FindOtherLayout(dir_, 1);  // its own layout
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, IsEmpty());
}

TEST_F(CheckpointLayoutTest, FoldersWithoutACheckpointOrWithForeignNamesAreNotALayout) {
  std::filesystem::create_directories(Rank(0, 2));  // a job that never checkpointed
  WriteCheckpoint(dir_ + "/rank-01-of-2", 3);       // not a name this trainer writes
  WriteCheckpoint(dir_ + "/rank-2-of-2", 3);        // no such rank
  absl::StatusOr<std::vector<std::string>> found = FindOtherLayout(dir_, 3);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, IsEmpty());
}

TEST_F(CheckpointLayoutTest, SeveralLayoutsOrAnIncompleteOneAreRefused) {
  WriteCheckpoint(Rank(0, 2), 10);
  absl::StatusOr<std::vector<std::string>> found = FindOtherLayout(dir_, 3);
  EXPECT_EQ(found.status(),
            absl::FailedPreconditionError(absl::StrCat(
                "checkpoint_dir ", dir_, " holds 1 of the 2 rank folders of a job of 2 ranks")));
  WriteCheckpoint(Rank(1, 2), 10);
  WriteCheckpoint(dir_, 10);
  found = FindOtherLayout(dir_, 3);
  EXPECT_EQ(found.status(),
            absl::FailedPreconditionError(absl::StrCat(
                "checkpoint_dir ", dir_,
                " holds checkpoints of several other numbers of ranks: keep one layout to "
                "resume from")));
}

TEST_F(CheckpointLayoutTest, RemoveCheckpointsTakesAllOrThoseNewerThanAStepAndNothingElse) {
  for (int64_t step : {5, 10, 20})
    std::filesystem::create_directories(dir_ + "/" + CheckpointName(step));
  std::ofstream(dir_ + "/notes.txt") << "kept";
  std::filesystem::create_directories(Rank(0, 2));
  RemoveCheckpoints(dir_, /*newer_than=*/10);
  EXPECT_THAT(Names(dir_),
              ElementsAre(CheckpointName(5), CheckpointName(10), "notes.txt", "rank-0-of-2"));
  RemoveCheckpoints(dir_);
  EXPECT_THAT(Names(dir_), ElementsAre("notes.txt", "rank-0-of-2"));
}

TEST_F(CheckpointLayoutTest, RetiringALayoutKeepsTheNewOne) {
  // Resharded from a job of two to a single process, then from a single process to a job of 3.
  WriteCheckpoint(Rank(0, 2), 10);
  WriteCheckpoint(Rank(1, 2), 10);
  WriteCheckpoint(dir_, 12);
  RetireLayout(dir_, {Rank(0, 2), Rank(1, 2)});
  EXPECT_THAT(Names(dir_), ElementsAre(CheckpointName(12)));
  WriteCheckpoint(Rank(0, 3), 14);
  RetireLayout(dir_, {dir_});
  EXPECT_THAT(Names(dir_), ElementsAre("rank-0-of-3"));
  EXPECT_TRUE(FindNewestCheckpoint(Rank(0, 3)).ok());
}

}  // namespace
}  // namespace evoscale::trainer::internal
