#include "placement/openb.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::placement {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kPodHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

absl::Status PodError(const std::string& rows) {
  return ParseOpenbPods(std::string(kPodHeader) + rows, "pods.csv").status();
}

absl::Status NodeError(const std::string& rows) {
  return ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\n" + rows, "nodes.csv").status();
}

TEST(OpenbTest, ReadsPodsWithSpecsQosAndTimes) {
  absl::StatusOr<std::vector<PodSpec>> pods =
      ParseOpenbPods(std::string(kPodHeader) +
                         "p0,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497\r\n"
                         "p1,4000,15258,1,220,V100M16|V100M32,LS,Running,10,,10\n"
                         "p2,2000,100,0,0,,BE,Running,,,\n\n",
                     "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 3u);
  const PodSpec& p0 = (*pods)[0];
  EXPECT_EQ(p0.name, "p0");
  EXPECT_EQ(p0.cpu_milli, 88000);
  EXPECT_EQ(p0.memory_mib, 327680);
  EXPECT_EQ(p0.TotalGpuMilli(), 8000);
  EXPECT_EQ(p0.qos, QosClass::kBurstable);
  EXPECT_EQ(p0.creation_time, 9437497);
  EXPECT_EQ(p0.deletion_time, 10769854);
  EXPECT_THAT((*pods)[1].gpu_models, ElementsAre("V100M16", "V100M32"));
  EXPECT_EQ((*pods)[1].gpu_milli, 220);
  EXPECT_EQ((*pods)[1].deletion_time, -1);
  EXPECT_EQ((*pods)[2].num_gpus, 0);
  EXPECT_TRUE((*pods)[2].gpu_models.empty());
}

TEST(OpenbTest, ReadsTheMultiGpuVariantsShorterHeader) {
  absl::StatusOr<std::vector<PodSpec>> pods = ParseOpenbPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,12000,16384,2,1000\n", "multigpu20.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)[0].qos, QosClass::kUnspecified);
  EXPECT_EQ((*pods)[0].TotalGpuMilli(), 2000);
}

TEST(OpenbTest, IgnoresGpuMilliOfPodsWithoutGpus) {
  absl::StatusOr<std::vector<PodSpec>> pods =
      ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,0,500\n", "p.csv");
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ((*pods)[0].gpu_milli, 0);
}

TEST(OpenbTest, PodErrorsNameTheFileLineAndField) {
  EXPECT_EQ(PodError("p0,1000,10,two,0,,LS,Running,0,0,0\n"),
            absl::InvalidArgumentError("pods.csv:2: field \"num_gpu\": \"two\" is not an integer"));
  EXPECT_EQ(PodError("p0,1000,10,1,1000,,LS,Running,0,0,0\np1,1000,10,1\n"),
            absl::InvalidArgumentError("pods.csv:3: 4 fields, the header has 11"));
  EXPECT_EQ(PodError("p0,1000,10,1,1500,,LS,Running,0,0,0\n"),
            absl::InvalidArgumentError(
                "pods.csv:2: field \"gpu_milli\": 1500 is out of range [1, 1000]"));
  EXPECT_EQ(
      PodError("p0,1000,10,1,0,,LS,Running,0,0,0\n"),
      absl::InvalidArgumentError("pods.csv:2: field \"gpu_milli\": 0 is out of range [1, 1000]"));
  EXPECT_EQ(PodError("p0,1000,10,2,500,,LS,Running,0,0,0\n"),
            absl::InvalidArgumentError("pods.csv:2: field \"gpu_milli\": 500: a pod of 2 GPUs "
                                       "must ask for whole GPUs (1000)"));
  EXPECT_EQ(PodError("p0,-5,10,0,0,,LS,Running,0,0,0\n"),
            absl::InvalidArgumentError(
                "pods.csv:2: field \"cpu_milli\": -5 is out of range [0, 1099511627776]"));
  EXPECT_EQ(PodError("p0,1000,10,0,0,,VIP,Running,0,0,0\n"),
            absl::InvalidArgumentError(
                "pods.csv:2: field \"qos\": \"VIP\" is not LS, Guaranteed, Burstable or BE"));
  EXPECT_EQ(PodError(",1000,10,0,0,,LS,Running,0,0,0\n"),
            absl::InvalidArgumentError("pods.csv:2: field \"name\": empty"));
  EXPECT_EQ(PodError("p0,1000,10,0,0,,LS,Running,soon,0,0\n"),
            absl::InvalidArgumentError(
                "pods.csv:2: field \"creation_time\": \"soon\" is not an integer"));
  EXPECT_EQ(ParseOpenbPods("name,cpu_milli,memory_mib,num_gpu\np0,1,1,0\n", "pods.csv").status(),
            absl::InvalidArgumentError("pods.csv:1: missing column \"gpu_milli\""));
  EXPECT_EQ(ParseOpenbPods("\n\n", "pods.csv").status(),
            absl::InvalidArgumentError("pods.csv: empty file, no header"));
}

TEST(OpenbTest, ReadsNodes) {
  absl::StatusOr<std::vector<NodeSpec>> nodes = ParseOpenbNodes(
      "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,1024,0,\n", "n.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "n0");
  EXPECT_EQ((*nodes)[0].cpu_milli, 64000);
  EXPECT_EQ((*nodes)[0].memory_mib, 262144);
  EXPECT_EQ((*nodes)[0].num_gpus, 2);
  EXPECT_EQ((*nodes)[0].gpu_model, "P100");
  EXPECT_EQ((*nodes)[1].num_gpus, 0);
}

TEST(OpenbTest, NodeErrorsNameTheFileLineAndField) {
  EXPECT_EQ(NodeError("n1,1,1,1,T4\nn1,1,1,1,T4\n"),
            absl::InvalidArgumentError("nodes.csv:3: field \"sn\": node \"n1\" listed twice"));
  EXPECT_EQ(NodeError("n1,1,1,9,T4\n"),
            absl::InvalidArgumentError("nodes.csv:2: field \"gpu\": 9 is out of range [0, 8]"));
  EXPECT_EQ(
      NodeError("n1,1,1,2,\n"),
      absl::InvalidArgumentError("nodes.csv:2: field \"model\": empty, but the node has 2 GPUs"));
  EXPECT_EQ(
      NodeError("n1,lots,1,2,T4\n"),
      absl::InvalidArgumentError("nodes.csv:2: field \"cpu_milli\": \"lots\" is not an integer"));
  EXPECT_EQ(ParseOpenbNodes("sn,cpu_milli,gpu,model\n", "nodes.csv").status(),
            absl::InvalidArgumentError("nodes.csv:1: missing column \"memory_mib\""));
}

TEST(OpenbTest, AMissingFileIsNotFound) {
  absl::StatusOr<std::vector<PodSpec>> pods = ReadOpenbPods("/nonexistent/pods.csv");
  EXPECT_EQ(pods.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(pods.status().message(), HasSubstr("/nonexistent/pods.csv: cannot open"));
  EXPECT_EQ(ReadOpenbNodes("/nonexistent/nodes.csv").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace evoscale::placement
