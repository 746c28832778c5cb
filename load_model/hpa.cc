#include "load_model/hpa.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace evoscale::load_model {

int HpaDesiredReplicas(int current_replicas, double metric, double target, double tolerance) {
  if (current_replicas <= 0 || !(target > 0) || std::isnan(metric)) return current_replicas;
  const double ratio = metric / target;
  if (std::abs(ratio - 1.0) <= tolerance) return current_replicas;
  return static_cast<int>(std::ceil(ratio * current_replicas));
}

HpaController::HpaController(HpaOptions options) : options_(options) {}

void HpaController::AddSample(const LoadSample& sample) {
  last_ = sample;
  has_sample_ = true;
}

ReplicaRecommendation HpaController::Recommend(absl::Time now, int current_replicas) {
  ReplicaRecommendation rec;
  rec.confidence = has_sample_ ? 1.0 : 0.0;
  const int current = std::max(current_replicas, 0);
  if (!has_sample_ || current == 0) {
    rec.replicas = std::clamp(current, options_.min_replicas, options_.max_replicas);
    rec.explanation = "hpa: no metrics yet";
    return rec;
  }
  // The per-replica metric is measured over the replicas that served the sample.
  const int measured = std::max(last_.replicas, 1);
  const double utilization = last_.utilization * measured / current;
  int proposal = HpaDesiredReplicas(current, utilization, options_.target_utilization,
                                    options_.tolerance);
  if (options_.target_qps_per_replica > 0 && last_.qps >= 0) {
    proposal = std::max(proposal, HpaDesiredReplicas(current, last_.qps / current,
                                                     options_.target_qps_per_replica,
                                                     options_.tolerance));
  }
  proposal = std::clamp(proposal, options_.min_replicas, options_.max_replicas);

  // Stabilisation: scaling down goes no lower than the highest proposal in the window;
  // scaling up no higher than the lowest (a zero-length window is a no-op).
  proposals_.emplace_back(now, proposal);
  const absl::Duration keep =
      std::max(options_.scale_down_stabilization, options_.scale_up_stabilization);
  while (!proposals_.empty() && proposals_.front().first <= now - keep) proposals_.pop_front();
  int up_floor = proposal, down_ceiling = proposal;
  for (const auto& [t, p] : proposals_) {
    if (t > now - options_.scale_down_stabilization) down_ceiling = std::max(down_ceiling, p);
    if (t > now - options_.scale_up_stabilization) up_floor = std::min(up_floor, p);
  }
  int desired = current;
  if (proposal > current) desired = std::max(current, up_floor);
  if (proposal < current) desired = std::min(current, down_ceiling);

  // Scale-up rate limit, relative to the replicas at the start of the period.
  while (!scale_ups_.empty() && scale_ups_.front().first <= now - options_.scale_up_period) {
    scale_ups_.pop_front();
  }
  int added = 0;
  for (const auto& [t, n] : scale_ups_) added += n;
  const int period_start = std::max(current - added, 0);
  const int limit = std::max(
      static_cast<int>(std::ceil(period_start * (1.0 + options_.scale_up_percent / 100.0))),
      period_start + options_.scale_up_pods);
  desired = std::min(desired, std::max(limit, current));
  desired = std::clamp(desired, options_.min_replicas, options_.max_replicas);
  if (desired > current) scale_ups_.emplace_back(now, desired - current);

  rec.replicas = desired;
  rec.explanation = absl::StrFormat(
      "hpa: utilisation %.3f vs target %.3f on %d replicas -> proposal %d, stabilised %d",
      utilization, options_.target_utilization, current, proposal, desired);
  return rec;
}

}  // namespace evoscale::load_model
