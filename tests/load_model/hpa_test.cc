#include "load_model/hpa.h"

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

LoadSample Load(absl::Time t, int replicas, double utilization) {
  LoadSample s;
  s.time = t;
  s.replicas = replicas;
  s.utilization = utilization;
  return s;
}

TEST(HpaFormulaTest, DesiredIsCeilOfCurrentTimesRatio) {
  EXPECT_EQ(HpaDesiredReplicas(4, 0.9, 0.6, 0.1), 6);    // ceil(4 * 1.5)
  EXPECT_EQ(HpaDesiredReplicas(4, 0.3, 0.6, 0.1), 2);    // ceil(4 * 0.5)
  EXPECT_EQ(HpaDesiredReplicas(3, 0.7, 0.6, 0.1), 4);    // ceil(3 * 1.1667) = ceil(3.5)
  EXPECT_EQ(HpaDesiredReplicas(10, 0.01, 0.6, 0.1), 1);  // ceil(0.1667)
}

TEST(HpaFormulaTest, WithinToleranceNothingChanges) {
  EXPECT_EQ(HpaDesiredReplicas(4, 0.65, 0.6, 0.1), 4);  // ratio 1.083
  EXPECT_EQ(HpaDesiredReplicas(4, 0.55, 0.6, 0.1), 4);  // ratio 0.917
  EXPECT_EQ(HpaDesiredReplicas(4, 0.67, 0.6, 0.1), 5);  // ratio 1.117: ceil(4.47)
}

TEST(HpaControllerTest, ScaleDownWaitsForTheStabilisationWindow) {
  HpaController hpa;  // target 0.6, 300 s window.
  hpa.AddSample(Load(kT0, 10, 0.6));
  EXPECT_EQ(hpa.Recommend(kT0, 10).replicas, 10);
  // Load halves: proposal 5, but the window still holds the proposal of 10.
  for (int s = 60; s <= 240; s += 60) {
    hpa.AddSample(Load(kT0 + absl::Seconds(s), 10, 0.3));
    EXPECT_EQ(hpa.Recommend(kT0 + absl::Seconds(s), 10).replicas, 10) << "at " << s << " s";
  }
  // At 300 s the proposal made at 0 s has left the (now - 300 s, now] window.
  hpa.AddSample(Load(kT0 + absl::Seconds(300), 10, 0.3));
  EXPECT_EQ(hpa.Recommend(kT0 + absl::Seconds(300), 10).replicas, 5);
}

TEST(HpaControllerTest, ScaleDownGoesToTheHighestProposalInTheWindow) {
  HpaController hpa;
  hpa.AddSample(Load(kT0, 10, 0.6));
  hpa.Recommend(kT0, 10);
  hpa.AddSample(Load(kT0 + absl::Seconds(200), 10, 0.48));  // proposal 8
  EXPECT_EQ(hpa.Recommend(kT0 + absl::Seconds(200), 10).replicas, 10);
  hpa.AddSample(Load(kT0 + absl::Seconds(320), 10, 0.3));   // proposal 5; window max 8
  EXPECT_EQ(hpa.Recommend(kT0 + absl::Seconds(320), 10).replicas, 8);
}

TEST(HpaControllerTest, ScaleUpIsLimitedToDoubleOrPlusFourPer15s) {
  HpaOptions o;
  o.target_utilization = 0.1;
  HpaController hpa(o);
  // 2 replicas at 100% want 20; the limit is max(2 * 2, 2 + 4) = 6.
  hpa.AddSample(Load(kT0, 2, 1.0));
  EXPECT_EQ(hpa.Recommend(kT0, 2).replicas, 6);
  // 10 s later the period still started at 2 replicas: no further growth.
  hpa.AddSample(Load(kT0 + absl::Seconds(10), 6, 1.0));
  EXPECT_EQ(hpa.Recommend(kT0 + absl::Seconds(10), 6).replicas, 6);
  // After 15 s the period starts at 6: max(12, 10) = 12.
  hpa.AddSample(Load(kT0 + absl::Seconds(16), 6, 1.0));
  EXPECT_EQ(hpa.Recommend(kT0 + absl::Seconds(16), 6).replicas, 12);
  // Large counts: +100% wins over +4.
  HpaController big(o);
  big.AddSample(Load(kT0, 50, 1.0));
  EXPECT_EQ(big.Recommend(kT0, 50).replicas, 100);
}

TEST(HpaControllerTest, QpsMetricTakesTheLargerProposal) {
  HpaOptions o;
  o.target_qps_per_replica = 10;
  HpaController hpa(o);
  LoadSample s = Load(kT0, 4, 0.6);  // utilisation on target
  s.qps = 80;                        // 20 per replica: wants ceil(4 * 2) = 8
  hpa.AddSample(s);
  EXPECT_EQ(hpa.Recommend(kT0, 4).replicas, 8);
}

TEST(HpaControllerTest, RespectsMinAndMaxReplicas) {
  HpaOptions o;
  o.min_replicas = 2;
  o.max_replicas = 5;
  HpaController hpa(o);
  hpa.AddSample(Load(kT0, 4, 3.0));
  EXPECT_EQ(hpa.Recommend(kT0, 4).replicas, 5);
  HpaController idle(o);
  idle.AddSample(Load(kT0, 4, 0.0));
  idle.Recommend(kT0, 4);
  idle.AddSample(Load(kT0 + absl::Seconds(400), 4, 0.0));
  EXPECT_EQ(idle.Recommend(kT0 + absl::Seconds(400), 4).replicas, 2);
}

}  // namespace
}  // namespace evoscale::load_model
