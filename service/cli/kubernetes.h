// Renders recommendations as Kubernetes objects: a VerticalPodAutoscaler-shaped object whose
// status carries the container recommendation, and a KEDA ScaledObject whose Prometheus
// trigger follows evoscale_recommended_replicas.
#ifndef EVOSCALE_SERVICE_CLI_KUBERNETES_H_
#define EVOSCALE_SERVICE_CLI_KUBERNETES_H_

#include <string>
#include <utility>

#include "evoscale/v1/autoscaler.pb.h"

namespace evoscale::cli {

struct KubernetesOptions {
  // Where KEDA's Prometheus scaler reads evoscale's gauges from.
  std::string prometheus_url = "http://prometheus.monitoring.svc:9090";
  std::string target_kind = "Deployment";
};

// CPU as millicores ("250m", rounded up), memory as bytes ("262144000", rounded up).
std::string CpuQuantity(double cores);
std::string MemoryQuantity(double bytes);

// "ns/name" workloads map to namespace "ns" and object name "name"; others to "default".
std::pair<std::string, std::string> NamespaceAndName(const std::string& workload);

// Two YAML documents separated by "---": the VerticalPodAutoscaler and the ScaledObject.
// Names, the policy and the quantities are double-quoted YAML strings, escaped as needed, so
// any workload name gives valid YAML that reads back as the same strings; the PromQL query
// quotes the workload name as a PromQL string.
std::string RecommendationYaml(const v1::Workload& workload, const v1::Recommendation& rec,
                               const KubernetesOptions& options = {});

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_KUBERNETES_H_
