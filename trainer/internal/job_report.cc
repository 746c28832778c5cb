#include "trainer/internal/job_report.h"

#include <utility>
#include <vector>

namespace evoscale::trainer::internal {

absl::StatusOr<BinaryMetrics> EvaluateJob(Collectives& job, const TrainerConfig& config,
                                          absl::StatusOr<std::unique_ptr<ExampleSource>> source,
                                          const BatchReaderOptions& options,
                                          EvaluateBatch evaluate) {
  // The others would wait for this rank's batches: a rank that cannot read ends the job.
  if (absl::Status first = job.FirstFailure(source.status()); !first.ok()) return first;
  BinaryMetrics mine;
  if (config.test_path.empty() && options.filter.holdout_every <= 0) return mine;
  BatchReader reader(*std::move(source), options);
  while (true) {
    absl::StatusOr<std::unique_ptr<ExampleBatch>> got = reader.Next();
    // Whether any rank still has a batch, and whether any failed to read one.
    int64_t any[2] = {got.ok() && *got != nullptr ? 1 : 0, got.ok() ? 0 : 1};
    if (absl::Status status = job.AllReduceMax(any, 2); !status.ok()) return status;
    if (any[1] > 0) {
      absl::Status first = job.FirstFailure(got.status());
      return first.ok() ? absl::InternalError("a rank failed but none reported it") : first;
    }
    if (any[0] == 0) break;
    std::unique_ptr<ExampleBatch> batch = *std::move(got);
    if (absl::Status status = evaluate(batch.get(), &mine); !status.ok()) return status;
    if (batch != nullptr) reader.Recycle(std::move(batch));
  }
  std::vector<float> logits, labels;
  absl::Status status = job.GatherToRoot(mine.logits(), &logits);
  if (status.ok()) status = job.GatherToRoot(mine.labels(), &labels);
  if (!status.ok()) return status;
  BinaryMetrics all;
  if (job.rank() == 0) all.Add(logits.data(), labels.data(), logits.size());
  return all;
}

absl::StatusOr<JobSummary> SummarizeJob(Collectives& job, const RankTraining& mine,
                                        const BinaryMetrics& eval, bool holdout) {
  int64_t sums[4] = {mine.examples_here, mine.examples, mine.malformed_lines, mine.bytes_sent};
  double seconds = mine.train_s;
  int64_t peak_rss = int64_t(PeakRssBytes());
  absl::Status status = job.AllReduceSum(sums, 4);
  if (status.ok()) status = job.AllReduceMax(&seconds, 1);
  if (status.ok()) status = job.AllReduceMax(&peak_rss, 1);
  if (!status.ok()) return status;
  JobSummary job_summary;
  FinalSummary& summary = job_summary.summary;
  summary.examples_per_s = seconds > 0 ? double(sums[0]) / seconds : 0;
  summary.peak_rss_bytes = uint64_t(peak_rss);
  summary.auc = eval.Auc();
  summary.logloss = eval.LogLoss();
  summary.eval_examples = int64_t(eval.count());
  summary.holdout = holdout;
  summary.steps = mine.steps;
  summary.examples = sums[1];
  summary.train_s = seconds;
  summary.malformed_lines = sums[2];
  job_summary.bytes_exchanged_per_example = sums[0] > 0 ? double(sums[3]) / double(sums[0]) : 0;
  return job_summary;
}

}  // namespace evoscale::trainer::internal
