// kube-scheduler's extender API through the real evoscaled's HTTP port: POST /scheduler/filter
// and /scheduler/prioritize with ExtenderArgs, a body that is not JSON, the method and the
// tokens (a writer's, as for every HTTP call that changes state).
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/http_get.h"

namespace evoscale {
namespace {

using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::HttpGet;
using ::evoscale::testing::HttpPost;
using ::evoscale::testing::TempDir;
using nlohmann::json;

const char kArgs[] = R"({
  "Pod": {"metadata": {"name": "train", "namespace": "ml", "uid": "uid-1",
                       "annotations": {"alibabacloud.com/gpu-milli": "500"}},
          "spec": {"containers": [{"name": "main",
                                   "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}},
  "Nodes": {"apiVersion": "v1", "kind": "NodeList", "items": [
    {"metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.product": "A100"}},
     "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2"}}},
    {"metadata": {"name": "cpu-b"},
     "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}}}]},
  "NodeNames": null
})";

TEST(ExtenderE2eTest, ServesFilterAndPrioritizeOnTheHttpPort) {
  TempDir dir;
  auto server = EvoscaledProcess::Start(dir.path() + "/e.db");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->http_address();

  auto filter = HttpPost(address, "/scheduler/filter", kArgs);
  ASSERT_EQ(filter.status, 200) << filter.body;
  const json f = json::parse(filter.body);
  EXPECT_EQ(f["Error"], "");
  ASSERT_EQ(f["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(f["Nodes"]["items"][0]["metadata"]["name"], "gpu-a");
  EXPECT_TRUE(f["FailedNodes"].contains("cpu-b"));

  auto prioritize = HttpPost(address, "/scheduler/prioritize", kArgs);
  ASSERT_EQ(prioritize.status, 200) << prioritize.body;
  EXPECT_EQ(json::parse(prioritize.body),
            json::parse(R"([{"Host":"gpu-a","Score":10},{"Host":"cpu-b","Score":0}])"));

  auto bad = HttpPost(address, "/scheduler/filter", "not json");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["Error"], "the request body is not JSON");
  EXPECT_EQ(HttpGet(address, "/scheduler/filter").status, 405);
}

TEST(ExtenderE2eTest, NeedsAWritersTokenWhenTokensAreOn) {
  TempDir dir;
  const std::string tokens = dir.path() + "/tokens";
  std::ofstream(tokens) << "reader-0123456789abcdef reader\nwriter-0123456789abcdef writer\n";
  auto server = EvoscaledProcess::Start(dir.path() + "/e.db", {"--auth-tokens", tokens});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->http_address();
  EXPECT_EQ(HttpPost(address, "/scheduler/filter", kArgs).status, 401);
  EXPECT_EQ(HttpPost(address, "/scheduler/filter", kArgs, "reader-0123456789abcdef").status, 403);
  EXPECT_EQ(HttpPost(address, "/scheduler/filter", kArgs, "writer-0123456789abcdef").status, 200);
}

}  // namespace
}  // namespace evoscale
