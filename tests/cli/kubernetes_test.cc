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
#include "service/common/kubernetes_name.h"
#include "yaml-cpp/yaml.h"

namespace evoscale::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// What the manifests say for Workload("prod/ranker-v2"), Recommendation() and the default
// options (written by hand, once as printf templates: the emitter must read back the same).
constexpr char kManifests[] = R"(
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
  recommenders:
    - name: evoscale
  updatePolicy:
    updateMode: "Off"
status:
  recommendation:
    containerRecommendations:
      - containerName: server
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
      - containerName: envoy
        target:
          cpu: "100m"
          memory: "64000000"
        lowerBound:
          cpu: "50m"
          memory: "32000000"
        upperBound:
          cpu: "200m"
          memory: "128000000"
        uncappedTarget:
          cpu: "100m"
          memory: "64000000"
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
        query: max(evoscale_recommended_replicas{namespace="prod",workload="ranker-v2"})
        threshold: "1"
        ignoreNullValues: "false"
)";

v1::Workload Workload(const std::string& name) {
  v1::Workload workload;
  workload.set_name(name);
  workload.set_min_replicas(2);
  workload.set_max_replicas(40);
  return workload;
}

void SetBounds(v1::ResourceBounds* b, double lower, double target, double upper) {
  b->set_lower_bound(lower);
  b->set_target(target);
  b->set_upper_bound(upper);
}

// Two containers, a server and its sidecar; the workload's fields are their sums.
v1::Recommendation Recommendation() {
  v1::Recommendation rec;
  rec.set_policy("evoscale");
  rec.set_confidence(0.85);
  rec.set_replicas(7);
  v1::ContainerRecommendation* server = rec.add_containers();
  server->set_name("server");
  SetBounds(server->mutable_cpu_cores(), 0.5, 1.2345, 2);
  SetBounds(server->mutable_memory_bytes(), 1e9, 1.5e9 + 0.3, 2e9);
  v1::ContainerRecommendation* envoy = rec.add_containers();
  envoy->set_name("envoy");
  SetBounds(envoy->mutable_cpu_cores(), 0.05, 0.1, 0.2);
  SetBounds(envoy->mutable_memory_bytes(), 32e6, 64e6, 128e6);
  SetBounds(rec.mutable_cpu_cores(), 0.55, 1.3345, 2.2);
  SetBounds(rec.mutable_memory_bytes(), 1.032e9, 1.564e9 + 0.3, 2.128e9);
  return rec;
}

// What telemetry without container names gives: one unnamed container.
v1::Recommendation UnnamedRecommendation() {
  v1::Recommendation rec = Recommendation();
  rec.clear_containers();
  v1::ContainerRecommendation* unnamed = rec.add_containers();
  *unnamed->mutable_cpu_cores() = rec.cpu_cores();
  *unnamed->mutable_memory_bytes() = rec.memory_bytes();
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

TEST(RecommendationYamlTest, ReadsBackAsTheExpectedManifests) {
  const std::string yaml = RecommendationYaml(Workload("prod/ranker-v2"), Recommendation());
  EXPECT_EQ(ContentOfAll(yaml), ContentOfAll(kManifests)) << yaml;
}

// The VPA is evoscale's to fill (spec.recommenders) and its recommendation sits where a
// recommender writes it, one entry per container by its real name.
TEST(RecommendationYamlTest, VpaNamesItsRecommenderAndEachContainer) {
  KubernetesOptions options;
  options.recommender = "evoscale-canary";
  const YAML::Node vpa =
      YAML::LoadAll(RecommendationYaml(Workload("prod/ranker"), Recommendation(), options)).at(0);
  ASSERT_THAT(vpa["spec"]["recommenders"], SizeIs(1));
  EXPECT_EQ(vpa["spec"]["recommenders"][0]["name"].as<std::string>(), "evoscale-canary");
  const YAML::Node containers = vpa["status"]["recommendation"]["containerRecommendations"];
  ASSERT_THAT(containers, SizeIs(2));
  EXPECT_EQ(containers[0]["containerName"].as<std::string>(), "server");
  EXPECT_EQ(containers[0]["upperBound"]["cpu"].as<std::string>(), "2000m");
  EXPECT_EQ(containers[1]["containerName"].as<std::string>(), "envoy");
  EXPECT_EQ(containers[1]["lowerBound"]["memory"].as<std::string>(), "32000000");
  EXPECT_FALSE(vpa["metadata"]["annotations"]["evoscale.io/note"]);
}

// Telemetry that names no container: the one entry is named like the workload, and the VPA
// says that name was assumed. So is a recommendation from a server without containers.
TEST(RecommendationYamlTest, UnnamedContainerIsNamedLikeTheWorkloadWithANote) {
  v1::Recommendation older = UnnamedRecommendation();
  older.clear_containers();
  for (const v1::Recommendation& rec : {UnnamedRecommendation(), older}) {
    const YAML::Node vpa = YAML::LoadAll(RecommendationYaml(Workload("prod/ranker"), rec)).at(0);
    const YAML::Node containers = vpa["status"]["recommendation"]["containerRecommendations"];
    ASSERT_THAT(containers, SizeIs(1));
    EXPECT_EQ(containers[0]["containerName"].as<std::string>(), "ranker");
    EXPECT_EQ(containers[0]["target"]["cpu"].as<std::string>(), "1335m");  // the sums
    EXPECT_THAT(vpa["metadata"]["annotations"]["evoscale.io/note"].as<std::string>(),
                HasSubstr("names no container"));
  }
}

// Named containers and samples without one: the unnamed part cannot be placed in the pod.
TEST(RecommendationYamlTest, UnnamedPartBesideNamedContainersIsLeftOutWithANote) {
  v1::Recommendation rec = Recommendation();
  *rec.add_containers() = UnnamedRecommendation().containers(0);
  const YAML::Node vpa = YAML::LoadAll(RecommendationYaml(Workload("prod/ranker"), rec)).at(0);
  const YAML::Node containers = vpa["status"]["recommendation"]["containerRecommendations"];
  ASSERT_THAT(containers, SizeIs(2));
  EXPECT_EQ(containers[0]["containerName"].as<std::string>(), "server");
  EXPECT_EQ(containers[1]["containerName"].as<std::string>(), "envoy");
  EXPECT_THAT(vpa["metadata"]["annotations"]["evoscale.io/note"].as<std::string>(),
              HasSubstr("left out"));
}

// KEDA: one number from the query however many series match, and no replica bounds the
// workload did not set (KEDA's own defaults apply).
TEST(RecommendationYamlTest, ScaledObjectAggregatesAndInventsNoReplicaBounds) {
  v1::Workload workload;
  workload.set_name("prod/ranker");
  for (int max : {0, 12}) {
    workload.set_max_replicas(max);
    const YAML::Node scaled = YAML::LoadAll(RecommendationYaml(workload, Recommendation())).at(1);
    EXPECT_FALSE(scaled["spec"]["minReplicaCount"]);
    if (max == 0) {
      EXPECT_FALSE(scaled["spec"]["maxReplicaCount"]);
    } else {
      EXPECT_EQ(scaled["spec"]["maxReplicaCount"].as<int>(), 12);
    }
    const YAML::Node trigger = scaled["spec"]["triggers"][0]["metadata"];
    EXPECT_EQ(trigger["query"].as<std::string>(),
              "max(evoscale_recommended_replicas{namespace=\"prod\",workload=\"ranker\"})");
    EXPECT_EQ(trigger["ignoreNullValues"].as<std::string>(), "false");
  }
  workload.set_min_replicas(3);
  EXPECT_EQ(YAML::LoadAll(RecommendationYaml(workload, Recommendation()))
                .at(1)["spec"]["minReplicaCount"]
                .as<int>(),
            3);
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
            "server");
  // An unnamed container is named like the workload.
  const YAML::Node unnamed =
      YAML::LoadAll(RecommendationYaml(Workload(workload), UnnamedRecommendation())).at(0);
  EXPECT_EQ(unnamed["status"]["recommendation"]["containerRecommendations"][0]["containerName"]
                .as<std::string>(),
            name);
  EXPECT_EQ(scaled["spec"]["scaleTargetRef"]["name"].as<std::string>(), name);
  // The query quotes the label values as PromQL strings: Go's escapes.
  EXPECT_EQ(scaled["spec"]["triggers"][0]["metadata"]["query"].as<std::string>(),
            "max(evoscale_recommended_replicas{namespace=\"team\",workload=\"*rank: er #1 "
            "\\\"x\\\" \\\\ 'y'\\nz\"})");
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
  EXPECT_EQ(documents[0]["spec"]["recommenders"][0]["name"].as<std::string>(), "evoscale");
  EXPECT_EQ(scaled["spec"]["triggers"][0]["metadata"]["serverAddress"].as<std::string>(),
            "http://prometheus:9090");
}

TEST(KubernetesQuantityTest, RoundsUp) {
  EXPECT_EQ(CpuQuantity(0.2501), "251m");
  EXPECT_EQ(CpuQuantity(-1), "0m");
  EXPECT_EQ(MemoryQuantity(1.5e9 + 0.3), "1500000001");
}

TEST(KubernetesNameTest, NamespaceAndNameAsTheGaugesLabelThem) {
  using service::KubernetesNamespaceAndName;
  using Names = std::pair<std::string, std::string>;
  EXPECT_EQ(KubernetesNamespaceAndName("prod/ranker"), Names("prod", "ranker"));
  EXPECT_EQ(KubernetesNamespaceAndName("a/b/c"), Names("a", "b-c"));
  EXPECT_EQ(KubernetesNamespaceAndName("solo"), Names("default", "solo"));
}

}  // namespace
}  // namespace evoscale::cli
