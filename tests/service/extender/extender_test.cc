// The kube-scheduler extender (service/extender): the JSON of k8s.io/kube-scheduler/extender/v1
// in and out, through SchedulerExtender::Handle as evoscaled's HTTP side calls it.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/extender/kube_objects.h"
#include "service/extender/scheduler_extender.h"

namespace evoscale::service::extender {
namespace {

using nlohmann::json;

json Node(const std::string& name, const std::string& cpu, const std::string& memory, int gpus) {
  json node = {{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "A100"}}}}},
               {"status", {{"allocatable", {{"cpu", cpu}, {"memory", memory}}}}}};
  if (gpus > 0) node["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(gpus);
  return node;
}

json Pod(const std::string& uid, const std::string& cpu, const std::string& memory,
         const std::string& gpus = "", const std::string& milli = "") {
  json requests = {{"cpu", cpu}, {"memory", memory}};
  if (!gpus.empty()) requests["nvidia.com/gpu"] = gpus;
  json pod = {
      {"metadata", {{"name", "p-" + uid}, {"namespace", "ml"}, {"uid", uid}}},
      {"spec", {{"containers", {{{"name", "main"}, {"resources", {{"requests", requests}}}}}}}}};
  if (!milli.empty()) pod["metadata"]["annotations"] = {{"alibabacloud.com/gpu-milli", milli}};
  return pod;
}

json Args(const json& pod, const json& nodes) {
  return {{"Pod", pod}, {"Nodes", {{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", nodes}}}};
}

json Call(SchedulerExtender& e, const std::string& verb, const json& body, int status = 200) {
  const ExtenderReply r = e.Handle(verb, body.dump());
  EXPECT_EQ(r.status, status) << r.body;
  return json::parse(r.body);
}

TEST(KubeObjectsTest, ParsesQuantities) {
  EXPECT_EQ(*ParseQuantityMilli("500m", "f"), 500);
  EXPECT_EQ(*ParseQuantityMilli("2", "f"), 2000);
  EXPECT_EQ(*ParseQuantityMilli("1.5", "f"), 1500);
  EXPECT_EQ(*ParseQuantityMilli("1Gi", "f"), (int64_t{1} << 30) * 1000);
  EXPECT_EQ(*ParseQuantityMilli("512Mi", "f"), (int64_t{512} << 20) * 1000);
  EXPECT_EQ(*ParseQuantityMilli("1G", "f"), int64_t{1000000000} * 1000);
  EXPECT_EQ(ParseQuantityMilli("12xb", "cpu").status().message(),
            "cpu: \"12xb\" is not a quantity");
  EXPECT_FALSE(ParseQuantityMilli("", "f").ok());
  EXPECT_FALSE(ParseQuantityMilli("-1", "f").ok());
}

TEST(ExtenderTest, FilterWithFullNodesFailsNodesWithoutRoom) {
  SchedulerExtender e;
  const json nodes = {Node("gpu-1", "32", "128Gi", 2), Node("cpu-1", "64", "256Gi", 0),
                      Node("small", "1", "1Gi", 1)};
  const json r = Call(e, "filter", Args(Pod("u1", "4", "8Gi", "1"), nodes));
  EXPECT_EQ(r["Error"], "");
  ASSERT_EQ(r["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(r["Nodes"]["items"][0]["metadata"]["name"], "gpu-1");
  EXPECT_TRUE(r["NodeNames"].is_null());
  EXPECT_EQ(r["FailedNodes"]["cpu-1"],
            "Insufficient resources (evoscale): the pod asks for cpu 4000m, memory 8192Mi, 1 GPU "
            "x 1000 milli; the node has cpu 64000m, memory 262144Mi, GPU milli free []");
  EXPECT_THAT(r["FailedNodes"]["small"].get<std::string>(), testing::HasSubstr("cpu 1000m"));
  EXPECT_TRUE(r["FailedAndUnresolvableNodes"].empty());
}

TEST(ExtenderTest, FilterWithNodeNamesUsesTheNodesSeenBefore) {
  SchedulerExtender e;
  Call(e, "filter", Args(Pod("u0", "1", "1Gi"), json::array({Node("gpu-1", "32", "128Gi", 2)})));
  const json args = {{"Pod", Pod("u1", "1", "1Gi", "", "500")},
                     {"NodeNames", {"gpu-1", "never-seen"}}};
  const json r = Call(e, "filter", args);
  EXPECT_EQ(r["Error"], "");
  EXPECT_TRUE(r["Nodes"].is_null());
  EXPECT_EQ(r["NodeNames"], json({"gpu-1"}));
  EXPECT_THAT(r["FailedAndUnresolvableNodes"]["never-seen"].get<std::string>(),
              testing::HasSubstr("node unknown to the evoscale extender"));
}

TEST(ExtenderTest, PrioritizeScoresThePolicysChoiceTenAndAssumesThePod) {
  SchedulerExtender e;
  // A sharing pod goes where a GPU is already shared (evoscale/FGD keep whole GPUs whole).
  const json nodes = {Node("a", "32", "128Gi", 1), Node("b", "32", "128Gi", 1),
                      Node("cpu", "32", "128Gi", 0)};
  json r = Call(e, "prioritize", Args(Pod("u1", "1", "1Gi", "", "500"), nodes));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["Host"], "a");
  EXPECT_EQ(r[0]["Score"], 10);
  EXPECT_EQ(r[1]["Score"], 9);
  EXPECT_EQ(r[2]["Host"], "cpu");
  EXPECT_EQ(r[2]["Score"], 0);  // does not fit
  r = Call(e, "prioritize", Args(Pod("u2", "1", "1Gi", "", "500"), nodes));
  EXPECT_EQ(r[0]["Score"], 10) << r.dump();  // next to the first one on "a"
  // Now "a" has no room left for a whole GPU.
  r = Call(e, "filter", Args(Pod("u3", "1", "1Gi", "1"), nodes));
  EXPECT_EQ(r["Nodes"]["items"].size(), 1u);
  EXPECT_TRUE(r["FailedNodes"].contains("a"));
}

TEST(ExtenderTest, PreemptKeepsKnownNodesWhereThePodFitsWithoutTheVictims) {
  SchedulerExtender e;
  const json nodes = json::array({Node("a", "32", "128Gi", 1)});
  Call(e, "prioritize", Args(Pod("victim", "1", "1Gi", "1"), nodes));
  const json args = {{"Pod", Pod("high", "1", "1Gi", "1")},
                     {"NodeNameToMetaVictims",
                      {{"a", {{"Pods", {{{"UID", "victim"}}}}, {"NumPDBViolations", 0}}},
                       {"unknown", {{"Pods", {{{"UID", "x"}}}}, {"NumPDBViolations", 0}}}}}};
  json r = Call(e, "preempt", args);
  EXPECT_EQ(r, json::parse(R"({"NodeNameToMetaVictims":{"a":{"Pods":[{"UID":"victim"}],
                                                            "NumPDBViolations":0}}})"));
  // Without evicting the victim the pod does not fit: the node is dropped.
  const json none = {{"Pod", Pod("high", "1", "1Gi", "1")},
                     {"NodeNameToVictims", {{"a", {{"Pods", json::array()}}}}}};
  r = Call(e, "preempt", none);
  EXPECT_TRUE(r["NodeNameToMetaVictims"].empty()) << r.dump();
}

TEST(ExtenderTest, BadInputIsAnsweredWithTheField) {
  SchedulerExtender e;
  json r =
      Call(e, "filter", Args(Pod("u1", "12xb", "1Gi"), json::array({Node("a", "1", "1Gi", 0)})));
  EXPECT_EQ(r["Error"],
            "Pod.spec.containers[0].resources.requests.cpu: \"12xb\" is not a quantity");
  r = Call(e, "filter", Args(Pod("u1", "1", "1Gi"), json::array({Node("a", "1", "1Qi", 0)})));
  EXPECT_EQ(r["Error"], "Nodes.items[0].status.allocatable.memory: \"1Qi\" is not a quantity");
  r = Call(e, "filter", json{{"Pod", Pod("u1", "1", "1Gi")}});
  EXPECT_EQ(r["Error"], "Nodes, NodeNames: neither is given");
  r = Call(e, "filter", json{{"Nodes", nullptr}});
  EXPECT_EQ(r["Error"], "Pod: is missing");
  r = Call(e, "filter",
           Args(Pod("u1", "1", "1Gi", "1", "1500"), json::array({Node("a", "1", "1Gi", 0)})));
  EXPECT_EQ(r["Error"],
            "Pod.metadata.annotations[\"alibabacloud.com/gpu-milli\"]: \"1500\" is not an integer "
            "in 1..1000");
  r = Call(e, "prioritize", Args(Pod("u1", "1", "2xb"), json::array({Node("a", "1", "1Gi", 0)})),
           400);
  EXPECT_EQ(r["Error"],
            "Pod.spec.containers[0].resources.requests.memory: \"2xb\" is not a quantity");
  const ExtenderReply not_json = e.Handle("filter", "{not json");
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(json::parse(not_json.body)["Error"], "the request body is not JSON");
  EXPECT_EQ(e.Handle("bind", "{}").status, 404);
}

}  // namespace
}  // namespace evoscale::service::extender
