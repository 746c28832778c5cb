// The Kubernetes HorizontalPodAutoscaler's replica calculation (autoscaling/v2, the
// controller in kubernetes/pkg/controller/podautoscaler) with its default behaviour.
#ifndef EVOSCALE_LOAD_MODEL_HPA_H_
#define EVOSCALE_LOAD_MODEL_HPA_H_

#include <deque>
#include <utility>

#include "absl/time/time.h"
#include "load_model/recommender.h"

namespace evoscale::load_model {

// Defaults are the HPA's, with one utilisation metric at `target_utilization` and optionally
// a QPS-per-replica (AverageValue) metric; with several metrics the largest proposal wins.
struct HpaOptions {
  double target_utilization = 0.6;
  double target_qps_per_replica = 0;  // 0: no QPS metric.
  double tolerance = 0.1;             // --horizontal-pod-autoscaler-tolerance.
  int min_replicas = 1;
  int max_replicas = 10000;
  absl::Duration scale_down_stabilization = absl::Seconds(300);
  absl::Duration scale_up_stabilization = absl::ZeroDuration();
  // Default scale-up policies, selectPolicy Max: +100% or +4 pods per 15 s.
  double scale_up_percent = 100;
  int scale_up_pods = 4;
  absl::Duration scale_up_period = absl::Seconds(15);
};

// desired = ceil(current * metric / target), unchanged while |metric / target - 1| <= tolerance.
// Exposed for tests.
int HpaDesiredReplicas(int current_replicas, double metric, double target, double tolerance);

// Not thread-safe.
class HpaController : public ReplicaRecommender {
 public:
  explicit HpaController(HpaOptions options = {});

  void AddSample(const LoadSample& sample) override;
  // The HPA's decision at `now`: the proposal from the latest sample, stabilised (scale down
  // to the largest proposal within the last 300 s) and rate-limited (scale up by at most
  // max(+100%, +4) relative to the replicas 15 s ago).
  ReplicaRecommendation Recommend(absl::Time now, int current_replicas) override;

 private:
  const HpaOptions options_;
  bool has_sample_ = false;
  LoadSample last_;
  std::deque<std::pair<absl::Time, int>> proposals_;  // Within the stabilisation window.
  std::deque<std::pair<absl::Time, int>> scale_ups_;  // (time, replicas added) for limits.
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_HPA_H_
