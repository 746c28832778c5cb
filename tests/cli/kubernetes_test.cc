// Tests of the Kubernetes manifests (service/cli/kubernetes.cc): they read back, through
// yaml-cpp, as the objects they describe, whatever the workload is called.

#include "service/cli/kubernetes.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "evoscale/v1/autoscaler.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace evoscale::cli {
namespace {

using ::testing::SizeIs;

// What the manifests said, for Workload("prod/ranker-v2"), Recommendation() and the default
// options, before they were built with yaml-cpp's emitter (they were printf templates).
constexpr char kPrintfManifests[] = R"(
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: ranker-v2
  namespace: prod
  annotations:
    evoscale.io/policy: "evoscale"
    evoscale.io/confidence: "0.85"
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: ranker-v2
  updatePolicy:
    updateMode: "Off"
status:
  recommendation:
    containerRecommendations:
      - containerName: ranker-v2
        target:
          cpu: "1235m"
          memory: "1500000001"
        lowerBound:
          cpu: "500m"
          memory: "1000000000"
        upperBound:
          cpu: "2000m"
          memory: "2000000000"
        uncappedTarget:
          cpu: "1235m"
          memory: "1500000001"
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: ranker-v2
  namespace: prod
  annotations:
    evoscale.io/recommended-replicas: "7"
spec:
  scaleTargetRef:
    kind: Deployment
    name: ranker-v2
  minReplicaCount: 2
  maxReplicaCount: 40
  triggers:
    - type: prometheus
      metricType: AverageValue
      metadata:
        serverAddress: http://prometheus.monitoring.svc:9090
        query: evoscale_recommended_replicas{workload="prod/ranker-v2"}
        threshold: "1"
)";

v1::Workload Workload(const std::string& name) {
  v1::Workload workload;
  workload.set_name(name);
  workload.set_min_replicas(2);
  workload.set_max_replicas(40);
  return workload;
}

v1::Recommendation Recommendation() {
  v1::Recommendation rec;
  rec.set_policy("evoscale");
  rec.set_confidence(0.85);
  rec.set_replicas(7);
  rec.mutable_cpu_cores()->set_lower_bound(0.5);
  rec.mutable_cpu_cores()->set_target(1.2345);
  rec.mutable_cpu_cores()->set_upper_bound(2);
  rec.mutable_memory_bytes()->set_lower_bound(1e9);
  rec.mutable_memory_bytes()->set_target(1.5e9 + 0.3);
  rec.mutable_memory_bytes()->set_upper_bound(2e9);
  return rec;
}

// A YAML node as JSON, scalars typed as a YAML 1.2 reader types them: quoted ones are
// strings; plain ones are integers, booleans or nulls when they read as such, else strings.
nlohmann::json Content(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& entry : node) object[entry.first.Scalar()] = Content(entry.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const YAML::Node& item : node) array.push_back(Content(item));
      return array;
    }
    case YAML::NodeType::Scalar: {
      if (node.Tag() == "!") return node.Scalar();  // quoted
      int64_t integer;
      if (YAML::convert<int64_t>::decode(node, integer)) return integer;
      bool boolean;
      if (YAML::convert<bool>::decode(node, boolean)) return boolean;
      return node.Scalar();
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
  }
  return nullptr;
}

nlohmann::json ContentOfAll(const std::string& yaml) {
  nlohmann::json documents = nlohmann::json::array();
  for (const YAML::Node& document : YAML::LoadAll(yaml)) documents.push_back(Content(document));
  return documents;
}

TEST(RecommendationYamlTest, ReadsBackAsTheManifestsPrintfWrote) {
  const std::string yaml = RecommendationYaml(Workload("prod/ranker-v2"), Recommendation());
  EXPECT_EQ(ContentOfAll(yaml), ContentOfAll(kPrintfManifests)) << yaml;
}

TEST(RecommendationYamlTest, NameNeedingQuotesReadsBackUnchanged) {
  // A colon-space, a comment sign, quotes, a backslash, a leading '*' and a newline: each
  // breaks or changes a plain YAML scalar.
  const std::string name = "*rank: er #1 \"x\" \\ 'y'\nz";
  const std::string workload = "team/" + name;
  const std::string yaml = RecommendationYaml(Workload(workload), Recommendation());
  std::vector<YAML::Node> documents = YAML::LoadAll(yaml);
  ASSERT_THAT(documents, SizeIs(2)) << yaml;
  const YAML::Node& vpa = documents[0];
  const YAML::Node& scaled = documents[1];
  for (const YAML::Node& object : {vpa, scaled}) {
    EXPECT_EQ(object["metadata"]["name"].as<std::string>(), name) << yaml;
    EXPECT_EQ(object["metadata"]["namespace"].as<std::string>(), "team");
  }
  EXPECT_EQ(vpa["spec"]["targetRef"]["name"].as<std::string>(), name);
  EXPECT_EQ(vpa["status"]["recommendation"]["containerRecommendations"][0]["containerName"]
                .as<std::string>(),
            name);
  EXPECT_EQ(scaled["spec"]["scaleTargetRef"]["name"].as<std::string>(), name);
  // The query quotes the workload as a PromQL string: Go's escapes.
  EXPECT_EQ(scaled["spec"]["triggers"][0]["metadata"]["query"].as<std::string>(),
            "evoscale_recommended_replicas{workload=\"team/*rank: er #1 \\\"x\\\" \\\\ 'y'\\nz\"}");
}

TEST(RecommendationYamlTest, NamesThatLookLikeOtherTypesStayStrings) {
  // Valid workload names that a YAML reader would take for a number, a boolean or null if
  // they were written plain (Kubernetes reads YAML 1.1, where "no" is false).
  for (const std::string name : {"123", "1e3", "true", "no", "null"}) {
    const std::string yaml = RecommendationYaml(Workload("default/" + name), Recommendation());
    const YAML::Node vpa = YAML::LoadAll(yaml).at(0);
    EXPECT_EQ(vpa["metadata"]["name"].Tag(), "!") << yaml;  // quoted
    EXPECT_EQ(vpa["metadata"]["name"].as<std::string>(), name);
    EXPECT_EQ(Content(vpa)["spec"]["targetRef"]["name"], name);
  }
}

TEST(RecommendationYamlTest, OptionsNameTheTargetAndPrometheus) {
  KubernetesOptions options;
  options.prometheus_url = "http://prometheus:9090";
  options.target_kind = "StatefulSet";
  v1::Recommendation rec = Recommendation();
  rec.set_replicas(150);
  v1::Workload workload;
  workload.set_name("solo");
  const std::vector<YAML::Node> documents =
      YAML::LoadAll(RecommendationYaml(workload, rec, options));
  ASSERT_THAT(documents, SizeIs(2));
  EXPECT_EQ(documents[0]["metadata"]["namespace"].as<std::string>(), "default");
  EXPECT_EQ(documents[0]["spec"]["targetRef"]["kind"].as<std::string>(), "StatefulSet");
  const YAML::Node& scaled = documents[1];
  EXPECT_EQ(scaled["spec"]["scaleTargetRef"]["kind"].as<std::string>(), "StatefulSet");
  EXPECT_EQ(scaled["spec"]["minReplicaCount"].as<int>(), 1);
  EXPECT_EQ(scaled["spec"]["maxReplicaCount"].as<int>(), 150);
  EXPECT_EQ(scaled["spec"]["triggers"][0]["metadata"]["serverAddress"].as<std::string>(),
            "http://prometheus:9090");
}

TEST(KubernetesQuantityTest, RoundsUp) {
  EXPECT_EQ(CpuQuantity(0.2501), "251m");
  EXPECT_EQ(CpuQuantity(-1), "0m");
  EXPECT_EQ(MemoryQuantity(1.5e9 + 0.3), "1500000001");
  EXPECT_EQ(NamespaceAndName("a/b/c"), std::make_pair(std::string("a"), std::string("b-c")));
  EXPECT_EQ(NamespaceAndName("solo"), std::make_pair(std::string("default"), std::string("solo")));
}

}  // namespace
}  // namespace evoscale::cli
