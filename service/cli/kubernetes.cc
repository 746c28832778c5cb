// The manifests are built with yaml-cpp's emitter, which quotes and escapes what it writes.
// Every value that comes from data (names, the policy, quantities, the Prometheus address) is
// written double-quoted, so that a name such as "true", "123" or "null" stays a string for
// every YAML reader (Kubernetes reads YAML 1.1, where even "no" and "on" are booleans).

#include "service/cli/kubernetes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace evoscale::cli {
namespace {

// `key: "value"`, the value double-quoted whatever it holds.
void QuotedEntry(YAML::Emitter& out, const char* key, const std::string& value) {
  out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
}

// `key: value` for values fixed by this file (API groups, kinds, field names).
void PlainEntry(YAML::Emitter& out, const char* key, const char* value) {
  out << YAML::Key << key << YAML::Value << value;
}

// metadata: the object's name and namespace and evoscale's annotations.
void Metadata(YAML::Emitter& out, const std::string& ns, const std::string& name,
              const std::vector<std::pair<const char*, std::string>>& annotations) {
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "name", name);
  QuotedEntry(out, "namespace", ns);
  out << YAML::Key << "annotations" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, value] : annotations) QuotedEntry(out, key, value);
  out << YAML::EndMap << YAML::EndMap;
}

// `key: {cpu: "250m", memory: "262144000"}`, in block style.
void Resources(YAML::Emitter& out, const char* key, double cpu_cores, double memory_bytes) {
  out << YAML::Key << key << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "cpu", CpuQuantity(cpu_cores));
  QuotedEntry(out, "memory", MemoryQuantity(memory_bytes));
  out << YAML::EndMap;
}

void VerticalPodAutoscaler(YAML::Emitter& out, const std::string& ns, const std::string& name,
                           const v1::Recommendation& rec, const KubernetesOptions& options) {
  out << YAML::BeginMap;
  PlainEntry(out, "apiVersion", "autoscaling.k8s.io/v1");
  PlainEntry(out, "kind", "VerticalPodAutoscaler");
  Metadata(out, ns, name,
           {{"evoscale.io/policy", rec.policy()},
            {"evoscale.io/confidence", absl::StrFormat("%g", rec.confidence())}});

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "targetRef" << YAML::Value << YAML::BeginMap;
  PlainEntry(out, "apiVersion", "apps/v1");
  QuotedEntry(out, "kind", options.target_kind);
  QuotedEntry(out, "name", name);
  out << YAML::EndMap;
  out << YAML::Key << "updatePolicy" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "updateMode", "Off");
  out << YAML::EndMap << YAML::EndMap;

  out << YAML::Key << "status" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "recommendation" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "containerRecommendations" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap;
  QuotedEntry(out, "containerName", name);
  Resources(out, "target", rec.cpu_cores().target(), rec.memory_bytes().target());
  Resources(out, "lowerBound", rec.cpu_cores().lower_bound(), rec.memory_bytes().lower_bound());
  Resources(out, "upperBound", rec.cpu_cores().upper_bound(), rec.memory_bytes().upper_bound());
  Resources(out, "uncappedTarget", rec.cpu_cores().target(), rec.memory_bytes().target());
  out << YAML::EndMap << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  out << YAML::EndMap;
}

void ScaledObject(YAML::Emitter& out, const std::string& ns, const std::string& name,
                  const v1::Workload& workload, const v1::Recommendation& rec,
                  const KubernetesOptions& options) {
  const int min_replicas = std::max(1, workload.min_replicas());
  const int max_replicas =
      workload.max_replicas() > 0 ? workload.max_replicas() : std::max(rec.replicas(), 100);
  // A PromQL string literal takes Go's escapes, of which JSON's are a subset.
  const std::string query = absl::StrCat(
      "evoscale_recommended_replicas{workload=", nlohmann::json(workload.name()).dump(), "}");
  out << YAML::BeginMap;
  PlainEntry(out, "apiVersion", "keda.sh/v1alpha1");
  PlainEntry(out, "kind", "ScaledObject");
  Metadata(out, ns, name, {{"evoscale.io/recommended-replicas", absl::StrCat(rec.replicas())}});

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "scaleTargetRef" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "kind", options.target_kind);
  QuotedEntry(out, "name", name);
  out << YAML::EndMap;
  out << YAML::Key << "minReplicaCount" << YAML::Value << min_replicas;
  out << YAML::Key << "maxReplicaCount" << YAML::Value << max_replicas;
  out << YAML::Key << "triggers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  PlainEntry(out, "type", "prometheus");
  PlainEntry(out, "metricType", "AverageValue");
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "serverAddress", options.prometheus_url);
  QuotedEntry(out, "query", query);
  QuotedEntry(out, "threshold", "1");
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
  out << YAML::EndMap;
}

}  // namespace

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
  YAML::Emitter out;
  VerticalPodAutoscaler(out, ns, name, rec, options);
  out << YAML::BeginDoc;  // "---" between the two objects
  ScaledObject(out, ns, name, workload, rec, options);
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace evoscale::cli
