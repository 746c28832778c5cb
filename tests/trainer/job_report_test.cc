#include "trainer/internal/job_report.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/trainer/thread_ranks.h"
#include "trainer/criteo_reader.h"
#include "trainer/internal/run_options.h"

namespace evoscale::trainer::internal {
namespace {

// 1,000 generated rows, every 10th held out: 100 evaluation rows.
TrainerConfig HeldOut() {
  TrainerConfig config;
  config.synthetic_rows = 1000;
  config.holdout_fraction = 0.1;
  return config;
}

// Rank `rank` of `ranks`'s reader of the held-out rows, in batches of `batch_size`.
BatchReaderOptions EvalOptions(const TrainerConfig& config, int ranks, int rank, int batch_size) {
  BatchReaderOptions options = ReaderOptions(config, batch_size, ranks, /*for_eval=*/true);
  options.filter.ranks = ranks;
  options.filter.rank = rank;
  return options;
}

// A stand-in forward pass: a logit every example's features decide, so that any rank gives an
// example the same one.
absl::Status Score(const ExampleBatch* batch, BinaryMetrics* metrics, int* idle_calls) {
  if (batch == nullptr) {
    ++*idle_calls;
    return absl::OkStatus();
  }
  std::vector<float> logits(size_t(batch->size));
  for (int i = 0; i < batch->size; ++i) {
    logits[i] = batch->dense[size_t(i) * kNumDense] + 2.0f * batch->labels[i];
  }
  metrics->Add(logits.data(), batch->labels.data(), logits.size());
  return absl::OkStatus();
}

struct RankAnswer {
  absl::StatusOr<BinaryMetrics> metrics = BinaryMetrics();
  int idle_calls = 0;
};

// EvaluateJob on every rank of a job of `ranks` (threads as ranks; OneProcess for one).
// `open_fails`: the rank whose source could not be opened (-1: none).
std::vector<RankAnswer> EvaluateOnEveryRank(const TrainerConfig& config, int ranks, int batch_size,
                                            int open_fails = -1) {
  std::vector<RankAnswer> answers(ranks);
  absl::Mutex mu;
  const auto body = [&](Collectives& job) {
    const int r = job.rank();
    absl::StatusOr<std::unique_ptr<ExampleSource>> source =
        r == open_fails ? absl::StatusOr<std::unique_ptr<ExampleSource>>(
                              absl::NotFoundError("no file /data/test.tsv"))
                        : OpenSource(config, /*for_eval=*/true);
    RankAnswer answer;
    answer.metrics =
        EvaluateJob(job, config, std::move(source), EvalOptions(config, ranks, r, batch_size),
                    [&](const ExampleBatch* batch, BinaryMetrics* metrics) {
                      return Score(batch, metrics, &answer.idle_calls);
                    });
    absl::MutexLock lock(&mu);
    answers[r] = std::move(answer);
  };
  if (ranks == 1) {
    OneProcess one;
    body(one);
  } else {
    testing::ThreadRanks(ranks).Run(body);
  }
  return answers;
}

TEST(EvaluateJobTest, AJobOfOneEvaluatesEveryHeldOutRow) {
  const std::vector<RankAnswer> one = EvaluateOnEveryRank(HeldOut(), 1, 16);
  ASSERT_TRUE(one[0].metrics.ok()) << one[0].metrics.status();
  EXPECT_EQ(one[0].metrics->count(), 100u);
  EXPECT_EQ(one[0].idle_calls, 0);
  EXPECT_GT(one[0].metrics->Auc(), 0.5);
}

TEST(EvaluateJobTest, RankZeroGetsTheMetricsOfTheWholeSetAndRanksThatRunOutStillAnswer) {
  // 100 rows over 3 ranks: 34, 33, 33, in batches of 11: rank 0 has a fourth batch, during
  // which ranks 1 and 2 are called without one.
  const std::vector<RankAnswer> one = EvaluateOnEveryRank(HeldOut(), 1, 11);
  const std::vector<RankAnswer> job = EvaluateOnEveryRank(HeldOut(), 3, 11);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job[r].metrics.ok()) << job[r].metrics.status();
  EXPECT_EQ(job[0].metrics->count(), 100u);
  EXPECT_EQ(job[0].metrics->Auc(), one[0].metrics->Auc());  // exact: it does not see order
  EXPECT_NEAR(job[0].metrics->LogLoss(), one[0].metrics->LogLoss(), 1e-6);
  EXPECT_EQ(job[1].metrics->count(), 0u);
  EXPECT_EQ(job[2].metrics->count(), 0u);
  EXPECT_EQ(job[0].idle_calls, 0);
  EXPECT_EQ(job[1].idle_calls, 1);
  EXPECT_EQ(job[2].idle_calls, 1);
}

TEST(EvaluateJobTest, ARankThatCannotOpenItsRowsEndsTheJobWithItsReasonOnEveryRank) {
  const std::vector<RankAnswer> job = EvaluateOnEveryRank(HeldOut(), 3, 16, /*open_fails=*/1);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(job[r].metrics.status(), absl::NotFoundError("rank 1: no file /data/test.tsv"))
        << "rank " << r;
  }
  const std::vector<RankAnswer> one = EvaluateOnEveryRank(HeldOut(), 1, 16, /*open_fails=*/0);
  EXPECT_EQ(one[0].metrics.status(), absl::NotFoundError("no file /data/test.tsv"));
}

TEST(EvaluateJobTest, NothingHeldOutIsEmptyMetricsOnEveryRank) {
  TrainerConfig config = HeldOut();
  config.holdout_fraction = 0;
  const std::vector<RankAnswer> job = EvaluateOnEveryRank(config, 2, 16);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(job[r].metrics.ok()) << job[r].metrics.status();
    EXPECT_EQ(job[r].metrics->count(), 0u);
    EXPECT_EQ(job[r].idle_calls, 0);
  }
}

TEST(SummarizeJobTest, AJobOfOneReportsItsOwnFigures) {
  OneProcess one;
  RankTraining mine;
  mine.steps = 12;
  mine.examples = 3000;  // 1,000 of them before a resume
  mine.examples_here = 2000;
  mine.train_s = 4.0;
  mine.malformed_lines = 3;
  BinaryMetrics eval;
  const float logits[4] = {-1, 2, 0.5f, -3}, labels[4] = {0, 1, 1, 0};
  eval.Add(logits, labels, 4);
  absl::StatusOr<JobSummary> job = SummarizeJob(one, mine, eval, /*holdout=*/false);
  ASSERT_TRUE(job.ok()) << job.status();
  const FinalSummary& s = job->summary;
  EXPECT_EQ(s.examples_per_s, 500.0);
  EXPECT_EQ(s.examples, 3000);
  EXPECT_EQ(s.steps, 12);
  EXPECT_EQ(s.train_s, 4.0);
  EXPECT_EQ(s.malformed_lines, 3);
  EXPECT_FALSE(s.holdout);
  EXPECT_EQ(s.auc, 1.0);
  EXPECT_EQ(s.logloss, eval.LogLoss());
  EXPECT_EQ(s.eval_examples, 4);
  EXPECT_GT(s.peak_rss_bytes, 0u);
  EXPECT_EQ(job->bytes_exchanged_per_example, 0.0);
}

TEST(SummarizeJobTest, AJobsExamplesGoOverItsSlowestRanksTimeOnEveryRank) {
  absl::Mutex mu;
  std::vector<JobSummary> answers(2);
  testing::ThreadRanks(2).Run([&](Collectives& job) {
    const int r = job.rank();
    RankTraining mine;
    mine.steps = 10;
    mine.examples = r == 0 ? 1000 : 1002;
    mine.examples_here = r == 0 ? 1000 : 1002;
    mine.train_s = r == 0 ? 2.0 : 4.0;
    mine.malformed_lines = r;
    mine.bytes_sent = r == 0 ? 30000 : 10080;
    absl::StatusOr<JobSummary> summary = SummarizeJob(job, mine, BinaryMetrics(), true);
    EXPECT_TRUE(summary.ok()) << summary.status();
    absl::MutexLock lock(&mu);
    if (summary.ok()) answers[r] = *summary;
  });
  for (const JobSummary& job : answers) {
    EXPECT_EQ(job.summary.examples_per_s, 2002.0 / 4.0);
    EXPECT_EQ(job.summary.examples, 2002);
    EXPECT_EQ(job.summary.train_s, 4.0);
    EXPECT_EQ(job.summary.malformed_lines, 1);
    EXPECT_EQ(job.summary.steps, 10);
    EXPECT_TRUE(job.summary.holdout);
    EXPECT_EQ(job.summary.eval_examples, 0);
    EXPECT_EQ(job.bytes_exchanged_per_example, 40080.0 / 2002.0);
  }
  EXPECT_EQ(answers[0].summary.peak_rss_bytes, answers[1].summary.peak_rss_bytes);
}

}  // namespace
}  // namespace evoscale::trainer::internal
