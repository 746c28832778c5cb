#include "service/cli/kubernetes.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace evoscale::cli {

std::string CpuQuantity(double cores) {
  return absl::StrCat(static_cast<int64_t>(std::ceil(std::max(0.0, cores) * 1000 - 1e-9)), "m");
}

std::string MemoryQuantity(double bytes) {
  return absl::StrCat(static_cast<int64_t>(std::ceil(std::max(0.0, bytes) - 1e-9)));
}

std::pair<std::string, std::string> NamespaceAndName(const std::string& workload) {
  size_t slash = workload.find('/');
  if (slash == std::string::npos) return {"default", workload};
  std::string name = workload.substr(slash + 1);
  std::replace(name.begin(), name.end(), '/', '-');
  return {workload.substr(0, slash), name};
}

std::string RecommendationYaml(const v1::Workload& workload, const v1::Recommendation& rec,
                               const KubernetesOptions& options) {
  const auto [ns, name] = NamespaceAndName(workload.name());
  auto resources = [&](const char* key, double cpu, double memory) {
    return absl::StrFormat("        %s:\n          cpu: \"%s\"\n          memory: \"%s\"\n", key,
                           CpuQuantity(cpu), MemoryQuantity(memory));
  };
  std::string out = absl::StrFormat(
      "apiVersion: autoscaling.k8s.io/v1\n"
      "kind: VerticalPodAutoscaler\n"
      "metadata:\n"
      "  name: %s\n"
      "  namespace: %s\n"
      "  annotations:\n"
      "    evoscale.io/policy: \"%s\"\n"
      "    evoscale.io/confidence: \"%g\"\n"
      "spec:\n"
      "  targetRef:\n"
      "    apiVersion: apps/v1\n"
      "    kind: %s\n"
      "    name: %s\n"
      "  updatePolicy:\n"
      "    updateMode: \"Off\"\n"
      "status:\n"
      "  recommendation:\n"
      "    containerRecommendations:\n"
      "      - containerName: %s\n",
      name, ns, rec.policy(), rec.confidence(), options.target_kind, name, name);
  absl::StrAppend(&out, resources("target", rec.cpu_cores().target(), rec.memory_bytes().target()),
                  resources("lowerBound", rec.cpu_cores().lower_bound(),
                            rec.memory_bytes().lower_bound()),
                  resources("upperBound", rec.cpu_cores().upper_bound(),
                            rec.memory_bytes().upper_bound()),
                  resources("uncappedTarget", rec.cpu_cores().target(),
                            rec.memory_bytes().target()));
  const int min_replicas = std::max(1, workload.min_replicas());
  const int max_replicas =
      workload.max_replicas() > 0 ? workload.max_replicas() : std::max(rec.replicas(), 100);
  absl::StrAppendFormat(
      &out,
      "---\n"
      "apiVersion: keda.sh/v1alpha1\n"
      "kind: ScaledObject\n"
      "metadata:\n"
      "  name: %s\n"
      "  namespace: %s\n"
      "  annotations:\n"
      "    evoscale.io/recommended-replicas: \"%d\"\n"
      "spec:\n"
      "  scaleTargetRef:\n"
      "    kind: %s\n"
      "    name: %s\n"
      "  minReplicaCount: %d\n"
      "  maxReplicaCount: %d\n"
      "  triggers:\n"
      "    - type: prometheus\n"
      "      metricType: AverageValue\n"
      "      metadata:\n"
      "        serverAddress: %s\n"
      "        query: evoscale_recommended_replicas{workload=\"%s\"}\n"
      "        threshold: \"1\"\n",
      name, ns, rec.replicas(), options.target_kind, name, min_replicas, max_replicas,
      options.prometheus_url, workload.name());
  return out;
}

}  // namespace evoscale::cli
