// Tests of load_model/replica_load_window.h: hand-computed windows.
#include "load_model/replica_load_window.h"

#include <optional>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

double NoRequest(absl::Time) { return 0; }

TEST(ReplicaLoadWindowTest, ClosesAWindowWhenALaterOneOpensWithItsMeans) {
  ReplicaLoadWindow window(60);
  auto cpu_request = [](absl::Time) { return 2.0; };
  // Window [60, 120): two instances, three samples, no GPU: CPU-bound utilisation.
  EXPECT_FALSE(window.Add({.instance = 1, .timestamp = 60, .cpu_cores = 1, .qps = 10,
                           .latency_ms = 20}, cpu_request));
  EXPECT_FALSE(window.Add({.instance = 2, .timestamp = 70, .cpu_cores = 2, .qps = 20,
                           .latency_ms = 0}, cpu_request));
  EXPECT_FALSE(window.Add({.instance = 1, .timestamp = 119.5, .cpu_cores = 3, .qps = 30,
                           .latency_ms = 40}, cpu_request));
  std::optional<LoadSample> closed =
      window.Add({.instance = 1, .timestamp = 120, .cpu_cores = 1}, cpu_request);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->time, absl::FromUnixSeconds(120));
  EXPECT_EQ(closed->replicas, 2);
  EXPECT_DOUBLE_EQ(closed->utilization, (1 + 2 + 3) / 3.0 / 2.0);  // mean CPU / request
  EXPECT_DOUBLE_EQ(closed->qps, (10 + 20 + 30) / 3.0 * 2);         // mean QPS x instances
  EXPECT_DOUBLE_EQ(closed->latency_ms, (20 + 40) / 2.0);           // reported ones only
}

TEST(ReplicaLoadWindowTest, GpuUtilizationWinsOverCpuAndMissingLatencyIsMinusOne) {
  ReplicaLoadWindow window(60);
  EXPECT_FALSE(window.Add({.instance = 7, .timestamp = 0, .cpu_cores = 4, .gpu_utilization = 0.5},
                          NoRequest));
  EXPECT_FALSE(window.Add({.instance = 7, .timestamp = 30, .cpu_cores = 4, .gpu_utilization = 0},
                          NoRequest));
  std::optional<LoadSample> closed = window.Add({.instance = 7, .timestamp = 600}, NoRequest);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->replicas, 1);
  EXPECT_DOUBLE_EQ(closed->utilization, 0.5);  // the mean over samples that reported a GPU
  EXPECT_DOUBLE_EQ(closed->latency_ms, -1);
}

TEST(ReplicaLoadWindowTest, ZeroCpuRequestGivesZeroUtilizationAndOlderSamplesJoinTheOpenWindow) {
  ReplicaLoadWindow window(60);
  EXPECT_FALSE(window.Add({.instance = 1, .timestamp = 200, .cpu_cores = 1}, NoRequest));
  EXPECT_FALSE(window.Add({.instance = 2, .timestamp = 100, .cpu_cores = 1}, NoRequest));
  std::optional<LoadSample> closed = window.Add({.instance = 1, .timestamp = 300}, NoRequest);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->time, absl::FromUnixSeconds(240));
  EXPECT_EQ(closed->replicas, 2);
  EXPECT_DOUBLE_EQ(closed->utilization, 0);
}

TEST(ReplicaLoadWindowTest, ContainersOfOneInstanceAddUpToOneReplica) {
  ReplicaLoadWindow window(60);
  auto cpu_request = [](absl::Time) { return 2.0; };  // the instance's, over its containers
  // Two instances of two containers each (a server and a sidecar), reporting twice; the
  // server's sample carries the instance's QPS, the sidecar's none.
  for (double t : {0.0, 30.0}) {
    for (int64_t instance : {1, 2}) {
      EXPECT_FALSE(window.Add({.instance = instance, .timestamp = t, .cpu_cores = 1.5,
                               .qps = 100, .latency_ms = 10}, cpu_request));
      EXPECT_FALSE(window.Add({.instance = instance, .timestamp = t, .cpu_cores = 0.1},
                              cpu_request));
    }
  }
  std::optional<LoadSample> closed = window.Add({.instance = 1, .timestamp = 60}, cpu_request);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->replicas, 2);
  EXPECT_DOUBLE_EQ(closed->utilization, (1.5 + 0.1) / 2.0);  // per instance, not per container
  EXPECT_DOUBLE_EQ(closed->qps, 2 * 100.0);
  EXPECT_DOUBLE_EQ(closed->latency_ms, 10);
}

// Reported requests are what the pods hold: utilisation is their usage over them (as the
// HorizontalPodAutoscaler computes it), not over the recommended request.
TEST(ReplicaLoadWindowTest, ReportedRequestsAreTheUtilisationDenominator) {
  ReplicaLoadWindow window(60);
  auto recommended = [](absl::Time) { return 10.0; };  // would give 0.03 if it counted
  EXPECT_FALSE(window.Add({.instance = 1, .timestamp = 0, .cpu_cores = 0.2, .qps = 50,
                           .cpu_request_cores = 0.25}, recommended));
  EXPECT_FALSE(window.Add({.instance = 2, .timestamp = 10, .cpu_cores = 0.1, .qps = 30,
                           .cpu_request_cores = 0.25}, recommended));
  std::optional<LoadSample> closed = window.Add({.instance = 1, .timestamp = 60}, recommended);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->replicas, 2);
  EXPECT_DOUBLE_EQ(closed->utilization, (0.2 + 0.1) / (0.25 + 0.25));
  EXPECT_DOUBLE_EQ(closed->qps, 80);
  // A later window whose samples report no request goes back to the recommended one.
  EXPECT_FALSE(window.Add({.instance = 2, .timestamp = 70, .cpu_cores = 5}, recommended));
  closed = window.Add({.instance = 1, .timestamp = 130}, recommended);
  ASSERT_TRUE(closed.has_value());
  EXPECT_DOUBLE_EQ(closed->utilization, (0.0 + 5.0) / 2 / 10.0);
}

}  // namespace
}  // namespace evoscale::load_model
