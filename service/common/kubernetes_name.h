// How a workload's name maps onto Kubernetes: evoscaled's Prometheus labels and the CLI's
// manifests agree on it, so that a gauge joins with kube-state-metrics and the ScaledObject's
// query finds its gauge.
#ifndef EVOSCALE_SERVICE_COMMON_KUBERNETES_NAME_H_
#define EVOSCALE_SERVICE_COMMON_KUBERNETES_NAME_H_

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

namespace evoscale::service {

// "ns/name" maps to namespace "ns" and object name "name" (further slashes become '-':
// "a/b/c" -> {"a", "b-c"}); a name without a slash to namespace "default".
inline std::pair<std::string, std::string> KubernetesNamespaceAndName(std::string_view workload) {
  const size_t slash = workload.find('/');
  if (slash == std::string_view::npos) return {"default", std::string(workload)};
  std::string name(workload.substr(slash + 1));
  std::replace(name.begin(), name.end(), '/', '-');
  return {std::string(workload.substr(0, slash)), std::move(name)};
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_KUBERNETES_NAME_H_
