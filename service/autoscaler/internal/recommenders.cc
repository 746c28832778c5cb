#include "service/autoscaler/internal/recommenders.h"

#include "load_model/evoscale_policy.h"
#include "load_model/hpa.h"
#include "load_model/vpa.h"

namespace evoscale::service {

load_model::Policy PolicyOf(const v1::Workload& w) {
  switch (w.policy()) {
    case v1::Workload::VPA:
      return load_model::Policy::kVpa;
    case v1::Workload::HPA:
      return load_model::Policy::kHpa;
    default:
      return load_model::Policy::kEvoscale;
  }
}

std::unique_ptr<load_model::ResourceRecommender> MakeResourceRecommender(const v1::Workload& w) {
  // The HPA scales replicas only; its workloads get the VPA's request recommendation, which
  // is what a cluster running both would see.
  if (PolicyOf(w) == load_model::Policy::kEvoscale) {
    load_model::EvoscaleResourceOptions o;
    if (w.oom_rate() > 0) o.target_oom_rate = w.oom_rate();
    if (w.throttle_rate() > 0) o.target_throttle_rate = w.throttle_rate();
    o.cpu_request_percentile = w.request_percentile();
    o.memory_request_percentile = w.request_percentile();
    return std::make_unique<load_model::EvoscaleResourceRecommender>(o);
  }
  return std::make_unique<load_model::VpaRecommender>();
}

std::unique_ptr<load_model::ReplicaRecommender> MakeReplicaRecommender(const v1::Workload& w) {
  const double target = w.target_utilization() > 0 ? w.target_utilization() : 0.6;
  const int min_replicas = w.min_replicas() > 0 ? w.min_replicas() : 1;
  const int max_replicas = w.max_replicas() > 0 ? w.max_replicas() : 10000;
  if (PolicyOf(w) == load_model::Policy::kEvoscale) {
    load_model::EvoscaleReplicaOptions o;
    o.target_utilization = target;
    o.min_replicas = min_replicas;
    o.max_replicas = max_replicas;
    o.startup_delay = absl::Seconds(w.startup_delay_seconds());
    if (w.demand_quantile() > 0) o.demand_quantile = w.demand_quantile();
    return std::make_unique<load_model::EvoscaleReplicaRecommender>(o);
  }
  load_model::HpaOptions o;
  o.target_utilization = target;
  o.min_replicas = min_replicas;
  o.max_replicas = max_replicas;
  return std::make_unique<load_model::HpaController>(o);
}

}  // namespace evoscale::service
