// Universal Scalability Law (Gunther): throughput of N workers
//   X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)),
// fitted to measured (workers, throughput) points, to choose a training job's parallelism.
#ifndef EVOSCALE_LOAD_MODEL_USL_H_
#define EVOSCALE_LOAD_MODEL_USL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace evoscale::load_model {

struct ThroughputPoint {
  double workers = 0;     // > 0.
  double throughput = 0;  // >= 0, e.g. examples per second.
};

struct UslModel {
  double lambda = 0;  // Throughput of one worker without overhead.
  double sigma = 0;   // Contention (serial fraction), >= 0.
  double kappa = 0;   // Coherency (crosstalk), >= 0.
  double rmse = 0;    // Of the fit, in throughput units.

  double Throughput(double workers) const;
  // Workers at peak throughput: sqrt((1 - sigma) / kappa); +inf when kappa == 0.
  double PeakWorkers() const;
};

// Least-squares fit by damped Gauss-Newton (Levenberg-Marquardt) on Eigen, with sigma and
// kappa kept >= 0. INVALID_ARGUMENT for fewer than 3 points, fewer than 2 distinct worker
// counts, or a non-positive / non-finite value (the message names the point).
absl::StatusOr<UslModel> FitUsl(absl::Span<const ThroughputPoint> points);

struct ParallelismRecommendation {
  int workers = 1;
  double expected_throughput = 0;
  double efficiency = 0;  // expected_throughput / (workers * lambda).
  std::string explanation;
};

// The most workers in [1, max_workers] whose marginal worker still adds at least
// `min_marginal_gain` (fraction of lambda) of throughput, never beyond the peak.
ParallelismRecommendation RecommendParallelism(const UslModel& model, int max_workers,
                                               double min_marginal_gain = 0.1);

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_USL_H_
