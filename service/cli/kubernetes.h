// Renders recommendations as Kubernetes objects: a VerticalPodAutoscaler that names evoscale
// as its recommender (spec.recommenders) and carries the recommendation where a custom
// recommender writes it (status.recommendation.containerRecommendations, one entry per
// container), and a KEDA ScaledObject whose Prometheus trigger follows
// evoscale_recommended_replicas.
#ifndef EVOSCALE_SERVICE_CLI_KUBERNETES_H_
#define EVOSCALE_SERVICE_CLI_KUBERNETES_H_

#include <string>

#include "evoscale/v1/autoscaler.pb.h"

namespace evoscale::cli {

struct KubernetesOptions {
  // Where KEDA's Prometheus scaler reads evoscale's gauges from.
  std::string prometheus_url = "http://prometheus.monitoring.svc:9090";
  std::string target_kind = "Deployment";
  // The VPA's spec.recommenders: the default recommender leaves a VPA that names another one
  // alone.
  std::string recommender = "evoscale";
};

// CPU as millicores ("250m", rounded up), memory as bytes ("262144000", rounded up).
std::string CpuQuantity(double cores);
std::string MemoryQuantity(double bytes);

// Two YAML documents separated by "---": the VerticalPodAutoscaler and the ScaledObject, in
// the workload's namespace under its name (service::KubernetesNamespaceAndName).
//  - The VPA names each container of `rec.containers()` that has a name. Samples that name
//    no container cannot be placed in a pod: when no container has a name, the whole
//    recommendation goes to a container named like the workload (the default of `kubectl
//    create deployment`), and the annotation evoscale.io/note says it was assumed; when some
//    do, the unnamed one is left out and the note says so.
//  - The ScaledObject's query is max(evoscale_recommended_replicas{namespace, workload}) with
//    ignoreNullValues off (a missing gauge is an error, not zero replicas); minReplicaCount
//    and maxReplicaCount are written only when the workload sets them (else KEDA's defaults).
// Names, the policy and the quantities are double-quoted YAML strings, escaped as needed, so
// any workload name gives valid YAML that reads back as the same strings; the PromQL query
// quotes the label values as PromQL strings.
std::string RecommendationYaml(const v1::Workload& workload, const v1::Recommendation& rec,
                               const KubernetesOptions& options = {});

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_KUBERNETES_H_
