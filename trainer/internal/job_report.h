// What a training job reports at its end, the same for the CPU and the GPU trainer: the
// evaluation over every rank's slice of the evaluation rows, and the final line's summary over
// the ranks (protocol.h's FinalSummary). Every rank of the job calls these in the same order,
// over the job's collectives (a job of one: OneProcess); rank 0's answers are the job's, and it
// alone emits lines.
#ifndef EVOSCALE_TRAINER_INTERNAL_JOB_REPORT_H_
#define EVOSCALE_TRAINER_INTERNAL_JOB_REPORT_H_

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/collectives.h"
#include "trainer/criteo_reader.h"
#include "trainer/metrics.h"
#include "trainer/protocol.h"
#include "trainer/trainer_config.h"

namespace evoscale::trainer::internal {

// A trainer's forward pass over one evaluation batch: adds its logits and labels to `metrics`.
// In a job of several it is also called with no batch (null) once this rank's slice has run
// out while others' go on: it must still answer their collectives (their rows' lookups).
using EvaluateBatch =
    absl::FunctionRef<absl::Status(const ExampleBatch* batch, BinaryMetrics* metrics)>;

// The job's metrics on the test file, or on the rows held out of training (config's). Each rank
// reads its slice from `source`, which each rank opens itself (one that could not ends the job,
// every rank with its reason), through a reader of `options`, batch by batch until every rank's
// slice is done; a rank that fails to read ends the job the same way. Rank 0 answers the
// metrics over every rank's logits and labels (those of the whole set, not a mean over ranks),
// the others empty metrics; all answer empty ones when nothing is held out.
absl::StatusOr<BinaryMetrics> EvaluateJob(Collectives& job, const TrainerConfig& config,
                                          absl::StatusOr<std::unique_ptr<ExampleSource>> source,
                                          const BatchReaderOptions& options,
                                          EvaluateBatch evaluate);

// This rank's part of the job's final line.
struct RankTraining {
  int64_t steps = 0;          // the job's steps (the same on every rank)
  int64_t examples = 0;       // the rank's training examples, those before a resume included
  int64_t examples_here = 0;  // the rank's training examples in this process
  double train_s = 0;         // the rank's training time in this process
  int64_t malformed_lines = 0;
  int64_t bytes_sent = 0;  // to the other ranks during training
};

struct JobSummary {
  FinalSummary summary;
  // The bytes every rank sent during training over the examples trained in this run (a job
  // of several's "bytes_exchanged_per_example").
  double bytes_exchanged_per_example = 0;
};

// The final line's summary of the job: its examples in this run over the slowest rank's time
// (examples_per_s, train_s), every rank's examples and malformed lines summed, the largest peak
// RSS, and `eval`'s metrics (EvaluateJob's; `holdout`: on held-out rows, not a test file).
// Calls three collectives.
absl::StatusOr<JobSummary> SummarizeJob(Collectives& job, const RankTraining& mine,
                                        const BinaryMetrics& eval, bool holdout);

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_JOB_REPORT_H_
