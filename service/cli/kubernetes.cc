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
#include "service/common/kubernetes_name.h"
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

// One entry of status.recommendation.containerRecommendations.
struct VpaContainer {
  std::string name;
  const v1::ResourceBounds* cpu_cores;
  const v1::ResourceBounds* memory_bytes;
};

// The containers the VPA can name, and a note when some of the recommendation could not be
// placed by name (see RecommendationYaml).
std::vector<VpaContainer> VpaContainers(const std::string& name, const v1::Recommendation& rec,
                                        std::string* note) {
  std::vector<VpaContainer> containers;
  bool unnamed = rec.containers().empty();  // a server from before containers had names
  for (const v1::ContainerRecommendation& c : rec.containers()) {
    if (c.name().empty()) {
      unnamed = true;
    } else {
      containers.push_back({c.name(), &c.cpu_cores(), &c.memory_bytes()});
    }
  }
  if (containers.empty()) {
    containers.push_back({name, &rec.cpu_cores(), &rec.memory_bytes()});
    *note = absl::StrCat("the telemetry names no container: containerName \"", name,
                         "\" is assumed (the workload's name); send samples with their container");
  } else if (unnamed) {
    *note = "samples that name no container are left out: send them with their container";
  }
  return containers;
}

void VerticalPodAutoscaler(YAML::Emitter& out, const std::string& ns, const std::string& name,
                           const v1::Recommendation& rec, const KubernetesOptions& options) {
  std::string note;
  const std::vector<VpaContainer> containers = VpaContainers(name, rec, &note);
  std::vector<std::pair<const char*, std::string>> annotations = {
      {"evoscale.io/policy", rec.policy()},
      {"evoscale.io/confidence", absl::StrFormat("%g", rec.confidence())}};
  if (!note.empty()) annotations.emplace_back("evoscale.io/note", note);
  // A VPA status carries requests only; limits apart from them ride in an annotation.
  std::string limits;
  for (const VpaContainer& c : containers) {
    const double cpu = c.cpu_cores->limit(), memory = c.memory_bytes->limit();
    if ((cpu <= 0 || cpu == c.cpu_cores->target()) &&
        (memory <= 0 || memory == c.memory_bytes->target())) {
      continue;
    }
    absl::StrAppend(&limits, limits.empty() ? "" : "; ", c.name, ": cpu=",
                    CpuQuantity(std::max(cpu, c.cpu_cores->target())), " memory=",
                    MemoryQuantity(std::max(memory, c.memory_bytes->target())));
  }
  if (!limits.empty()) annotations.emplace_back("evoscale.io/limits", limits);
  out << YAML::BeginMap;
  PlainEntry(out, "apiVersion", "autoscaling.k8s.io/v1");
  PlainEntry(out, "kind", "VerticalPodAutoscaler");
  Metadata(out, ns, name, annotations);

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "targetRef" << YAML::Value << YAML::BeginMap;
  PlainEntry(out, "apiVersion", "apps/v1");
  QuotedEntry(out, "kind", options.target_kind);
  QuotedEntry(out, "name", name);
  out << YAML::EndMap;
  out << YAML::Key << "recommenders" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  QuotedEntry(out, "name", options.recommender);
  out << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "updatePolicy" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "updateMode", "Off");
  out << YAML::EndMap << YAML::EndMap;

  out << YAML::Key << "status" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "recommendation" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "containerRecommendations" << YAML::Value << YAML::BeginSeq;
  for (const VpaContainer& c : containers) {
    const v1::ResourceBounds& cpu = *c.cpu_cores;
    const v1::ResourceBounds& memory = *c.memory_bytes;
    out << YAML::BeginMap;
    QuotedEntry(out, "containerName", c.name);
    Resources(out, "target", cpu.target(), memory.target());
    Resources(out, "lowerBound", cpu.lower_bound(), memory.lower_bound());
    Resources(out, "upperBound", cpu.upper_bound(), memory.upper_bound());
    Resources(out, "uncappedTarget", cpu.target(), memory.target());
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  out << YAML::EndMap;
}

void ScaledObject(YAML::Emitter& out, const std::string& ns, const std::string& name,
                  const v1::Workload& workload, const v1::Recommendation& rec,
                  const KubernetesOptions& options) {
  // A PromQL string literal takes Go's escapes, of which JSON's are a subset. max(): one
  // answer however many series Prometheus holds (two scrape jobs, a restart's overlap).
  const std::string query =
      absl::StrCat("max(evoscale_recommended_replicas{namespace=", nlohmann::json(ns).dump(),
                   ",workload=", nlohmann::json(name).dump(), "})");
  out << YAML::BeginMap;
  PlainEntry(out, "apiVersion", "keda.sh/v1alpha1");
  PlainEntry(out, "kind", "ScaledObject");
  Metadata(out, ns, name, {{"evoscale.io/recommended-replicas", absl::StrCat(rec.replicas())}});

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "scaleTargetRef" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "kind", options.target_kind);
  QuotedEntry(out, "name", name);
  out << YAML::EndMap;
  if (workload.min_replicas() > 0) {
    out << YAML::Key << "minReplicaCount" << YAML::Value << workload.min_replicas();
  }
  if (workload.max_replicas() > 0) {
    out << YAML::Key << "maxReplicaCount" << YAML::Value << workload.max_replicas();
  }
  out << YAML::Key << "triggers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  PlainEntry(out, "type", "prometheus");
  PlainEntry(out, "metricType", "AverageValue");
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  QuotedEntry(out, "serverAddress", options.prometheus_url);
  QuotedEntry(out, "query", query);
  QuotedEntry(out, "threshold", "1");
  // KEDA reads an empty answer as 0 by default, which lets it scale to zero when evoscaled
  // is not scraped; as an error it keeps the replicas it has.
  QuotedEntry(out, "ignoreNullValues", "false");
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

std::string RecommendationYaml(const v1::Workload& workload, const v1::Recommendation& rec,
                               const KubernetesOptions& options) {
  const auto [ns, name] = service::KubernetesNamespaceAndName(workload.name());
  YAML::Emitter out;
  VerticalPodAutoscaler(out, ns, name, rec, options);
  out << YAML::BeginDoc;  // "---" between the two objects
  ScaledObject(out, ns, name, workload, rec, options);
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace evoscale::cli
