// Chooses and configures a workload's load models from its API settings.
#ifndef EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_RECOMMENDERS_H_
#define EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_RECOMMENDERS_H_

#include <memory>

#include "evoscale/v1/autoscaler.pb.h"
#include "load_model/recommender.h"

namespace evoscale::service {

load_model::Policy PolicyOf(const v1::Workload& w);
std::unique_ptr<load_model::ResourceRecommender> MakeResourceRecommender(const v1::Workload& w);
std::unique_ptr<load_model::ReplicaRecommender> MakeReplicaRecommender(const v1::Workload& w);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTOSCALER_INTERNAL_RECOMMENDERS_H_
