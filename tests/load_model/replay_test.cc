#include "load_model/replay.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace evoscale::load_model {
namespace {

const std::string kTraces = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/traces";

TEST(ReplayTest, ParsesBindingNames) {
  EXPECT_EQ(*ParsePolicy("vpa"), Policy::kVpa);
  EXPECT_EQ(*ParsePolicy("hpa"), Policy::kHpa);
  EXPECT_EQ(*ParsePolicy("evoscale"), Policy::kEvoscale);
  EXPECT_EQ(ParsePolicy("keda").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseTraceKind("alibaba-genai"), TraceKind::kAlibabaGenAi);
  EXPECT_EQ(*ParseTraceKind("azure-llm"), TraceKind::kAzureLlm);
  EXPECT_NE(ParseTraceKind("google").status().message().find("\"google\""), std::string::npos);
}

TEST(ReplayTest, PolicyMustFitTheTrace) {
  ReplayOptions o;
  o.trace = TraceKind::kBitbrains;
  o.policy = Policy::kHpa;
  o.path = "/nonexistent";
  EXPECT_EQ(Replay(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.trace = TraceKind::kAlibabaGenAi;
  o.policy = Policy::kVpa;
  EXPECT_EQ(Replay(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.policy = Policy::kHpa;
  EXPECT_EQ(Replay(o).status().code(), absl::StatusCode::kNotFound);
}

TEST(ReplayTest, OnlineReplayOfASyntheticVm) {
  VmTrace vm;
  vm.name = "synthetic";
  for (int i = 0; i < 2 * 288; ++i) {
    VmSample s;
    s.time = absl::FromUnixSeconds(1'000'000) + absl::Minutes(5 * i);
    s.cpu_cores = 0.5;
    s.cpu_capacity_cores = 2;
    s.memory_bytes = i == 400 ? 4e9 : 1e9;  // One spike: an OOM for any sane policy.
    vm.samples.push_back(s);
  }
  VpaRecommender vpa;
  const SeriesReport r = ReplayVm(vm, vpa, absl::Hours(24));
  EXPECT_EQ(r.samples, 288);
  EXPECT_EQ(r.oom_events, 1);
  EXPECT_EQ(r.underprovisioned_samples, 0);
  // VPA's target is 0.511135 * 1.15 for a flat 0.5 cores.
  EXPECT_NEAR(r.relative_slack_cpu, 1 - 0.5 / (0.511135 * 1.15), 1e-4);
}

// A held-out part is scored from the same online run: the halves add up to the whole.
TEST(ReplayTest, ReplicaScoringWindowSplitsTheRun) {
  ReplicaTrace trace;
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  for (int i = 0; i < 120; ++i) {
    ReplicaStep s;
    s.time = t0 + absl::Minutes(i);
    s.demand = 3.0 + 2.0 * ((i / 7) % 3);
    s.qps = 2 * s.demand;
    trace.steps.push_back(s);
  }
  const absl::Time mid = trace.steps[60].time;
  auto run = [&](absl::Time from, absl::Time until) {
    HpaController hpa;
    return ReplayReplicas(trace, hpa, 0.6, 1, 100, from, until);
  };
  const SeriesReport all = run(absl::InfinitePast(), absl::InfiniteFuture());
  const SeriesReport first = run(absl::InfinitePast(), mid);
  const SeriesReport second = run(mid, absl::InfiniteFuture());
  EXPECT_EQ(all.samples, 119);
  EXPECT_EQ(first.samples + second.samples, all.samples);
  EXPECT_EQ(second.samples, 60);
  EXPECT_NEAR(first.replica_hours + second.replica_hours, all.replica_hours, 1e-9);
  EXPECT_NEAR(first.minutes_over_target + second.minutes_over_target, all.minutes_over_target,
              1e-9);
  EXPECT_EQ(first.scaling_actions + second.scaling_actions, all.scaling_actions);
}

// A fixed request and limit, and the memory limits it was told about at each OOM.
class FixedResources : public ResourceRecommender {
 public:
  FixedResources(double cpu, double cpu_limit, double memory, double memory_limit)
      : cpu_(cpu), cpu_limit_(cpu_limit), memory_(memory), memory_limit_(memory_limit) {}
  void AddSample(const UsageSample&) override {}
  void RecordOom(absl::Time, double memory_limit_bytes) override { ooms.push_back(memory_limit_bytes); }
  ResourceRecommendation Recommend(absl::Time) override {
    ResourceRecommendation r;
    r.cpu_cores = {.target = cpu_, .limit = cpu_limit_};
    r.memory_bytes = {.target = memory_, .limit = memory_limit_};
    return r;
  }
  std::vector<double> ooms;

 private:
  double cpu_, cpu_limit_, memory_, memory_limit_;
};

// Requests and limits apart: slack on the request, OOM and throttling on the limit, usage
// between them counted as over the request.
TEST(ReplayTest, RequestsAndLimitsAreScoredApart) {
  VmTrace vm;
  vm.name = "vm";
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  // cpu / memory per 5-minute sample: under the request, between, over the limit.
  const double cpu[] = {0.5, 0.5, 1.5, 2.5};
  const double memory[] = {1e9, 1e9, 3e9, 5e9};
  for (int i = 0; i < 4; ++i) {
    vm.samples.push_back({.time = t0 + absl::Minutes(5 * i), .cpu_cores = cpu[i],
                          .cpu_capacity_cores = 1, .memory_bytes = memory[i]});
  }
  FixedResources apart(1.0, 2.0, 2e9, 4e9);
  const SeriesReport r = ReplayVm(vm, apart, absl::ZeroDuration());
  EXPECT_EQ(r.samples, 3);
  EXPECT_EQ(r.oom_events, 1);                 // 5e9 > 4e9; 3e9 is only over the request
  EXPECT_EQ(apart.ooms, std::vector<double>{4e9});  // told the limit it crossed
  EXPECT_EQ(r.underprovisioned_samples, 1);   // 2.5 > 2.0 cores: throttled
  EXPECT_EQ(r.cpu_over_request_samples, 2);
  EXPECT_EQ(r.memory_over_request_samples, 2);
  EXPECT_NEAR(r.relative_slack_cpu, (0.5 / 1.0) / 3, 1e-12);
  EXPECT_NEAR(r.relative_slack_cpu_limit, (1.5 / 2.0 + 0.5 / 2.0) / 3, 1e-12);
  EXPECT_NEAR(r.relative_slack_memory, (1e9 / 2e9) / 3, 1e-12);
  EXPECT_NEAR(r.relative_slack_memory_limit, (3e9 / 4e9 + 1e9 / 4e9) / 3, 1e-12);
  // Limit = request (a limit of 0 means so): every overrun of the request is an overrun.
  FixedResources together(1.0, 0, 2e9, 0);
  const SeriesReport t = ReplayVm(vm, together, absl::ZeroDuration());
  EXPECT_EQ(t.oom_events, 2);
  EXPECT_EQ(t.underprovisioned_samples, 2);
  EXPECT_DOUBLE_EQ(t.relative_slack_cpu_limit, t.relative_slack_cpu);
}

// A policy that follows a script, one entry per decision, and records what it was told.
class ScriptedReplicas : public ReplicaRecommender {
 public:
  explicit ScriptedReplicas(std::vector<int> plan) : plan_(std::move(plan)) {}
  void AddSample(const LoadSample& sample) override { serving.push_back(sample.replicas); }
  ReplicaRecommendation Recommend(absl::Time, int current_replicas) override {
    current.push_back(current_replicas);
    ReplicaRecommendation rec;
    rec.replicas = plan_[std::min(calls_++, plan_.size() - 1)];
    return rec;
  }
  std::vector<int> serving, current;

 private:
  std::vector<int> plan_;
  size_t calls_ = 0;
};

// Demand 1.2 for ten minutes, then 1.8 (2 then 3 replicas at the 0.6 target), one step a minute.
ReplicaTrace StepUpTrace() {
  ReplicaTrace trace;
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  for (int i = 0; i < 30; ++i) trace.steps.push_back({.time = t0 + absl::Minutes(i), .demand = i < 10 ? 1.2 : 1.8});
  return trace;
}

TEST(ReplayTest, StartingReplicasArePaidForButServeOnlyAfterTheDelay) {
  // Decisions 0-8 keep 2; decision 9 asks for 5, decision 10 settles for 3.
  std::vector<int> plan(9, 2);
  plan.insert(plan.end(), {5, 3});
  ScriptedReplicas policy(plan);
  const SeriesReport r = ReplayReplicas(StepUpTrace(), policy, 0.6, 1, 100, absl::InfinitePast(),
                                        absl::InfiniteFuture(), absl::Minutes(3));
  // The 3 replicas asked for at minute 9 would serve from minute 12; decision 10 cancels two
  // of them (starting ones go first), so minutes 10, 11 and 12 run over the target on 2 ready
  // replicas, and 2 ready + 3 starting, then 2 + 1, are paid for meanwhile.
  EXPECT_DOUBLE_EQ(r.minutes_over_target, 3);
  EXPECT_NEAR(r.replica_hours * 60, 9 * 2 + 5 + 3 + 3 + 17 * 3, 1e-9);
  EXPECT_EQ(r.scaling_actions, 2);
  // The policy is told the replicas that served (ready) and every replica it has (current).
  EXPECT_EQ(policy.serving[10], 2);
  EXPECT_EQ(policy.current[10], 5);
  EXPECT_EQ(policy.current[11], 3);
  EXPECT_EQ(policy.serving[12], 2);
  EXPECT_EQ(policy.serving[13], 3);
}

TEST(ReplayTest, WithoutADelayScaledReplicasServeAtOnce) {
  std::vector<int> plan(9, 2);
  plan.insert(plan.end(), {5, 3});
  ScriptedReplicas policy(plan);
  const SeriesReport r = ReplayReplicas(StepUpTrace(), policy, 0.6, 1, 100);
  EXPECT_DOUBLE_EQ(r.minutes_over_target, 0);
  EXPECT_NEAR(r.replica_hours * 60, 9 * 2 + 5 + 19 * 3, 1e-9);
  EXPECT_EQ(policy.serving[10], 5);
}

TEST(ReplayTest, StartupDelayAppliesToReplicaTracesOnly) {
  ReplayOptions o;
  o.trace = TraceKind::kBitbrains;
  o.path = "/nonexistent";
  o.startup_delay = absl::Minutes(3);
  EXPECT_EQ(Replay(o).status().message(),
            "startup_delay applies to replica traces; trace \"bitbrains\" is per-VM usage");
  o.trace = TraceKind::kAlibabaGenAi;
  o.startup_delay = -absl::Minutes(1);
  EXPECT_EQ(Replay(o).status().message(), "startup_delay must be >= 0, got -1m");
}

// Told the start-up delay, evoscale forecasts that far ahead and runs over the target less
// than when it is not told, on a load that ramps up and down every hour.
TEST(ReplayTest, EvoscaleToldTheDelayRunsOverTheTargetLess) {
  ReplicaTrace trace;
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  for (int i = 0; i < 24 * 60; ++i) {
    const double phase = (i % 60) / 60.0;
    const double demand = 2 + 8 * (phase < 0.5 ? phase : 1 - phase);
    trace.steps.push_back({.time = t0 + absl::Minutes(i), .demand = demand, .qps = 10 * demand});
  }
  EvoscaleReplicaOptions told;
  told.startup_delay = absl::Minutes(3);
  EvoscaleReplicaRecommender aware(told), unaware;
  const SeriesReport a = ReplayReplicas(trace, aware, 0.6, 1, 100, absl::InfinitePast(),
                                        absl::InfiniteFuture(), absl::Minutes(3));
  const SeriesReport u = ReplayReplicas(trace, unaware, 0.6, 1, 100, absl::InfinitePast(),
                                        absl::InfiniteFuture(), absl::Minutes(3));
  EXPECT_LT(a.minutes_over_target, 0.5 * u.minutes_over_target)
      << a.minutes_over_target << " vs " << u.minutes_over_target;
}

TEST(ReplayTest, JsonCarriesTheDesignFields) {
  ReplayReport r;
  r.policy = "hpa";
  r.trace = "alibaba-genai";
  r.replica_trace = true;
  r.replica_hours = 12.5;
  const std::string json = r.ToJson();
  for (const char* field :
       {"\"policy\":\"hpa\"", "\"relative_slack_cpu\":null", "\"relative_slack_memory\":null",
        "\"oom_events\":0", "\"underprovisioned_fraction\":0", "\"changes\":0",
        "\"replica_hours\":12.5", "\"minutes_over_target\":0", "\"scaling_actions\":0"}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
  }
}

class RealTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTraces + "/bitbrains-rnd-2013-7/1.csv") ||
        !std::filesystem::exists(kTraces + "/alibaba-genai-2026/pod_gpu_duty_cycle_anon.csv")) {
      GTEST_SKIP() << "shared traces not found under " << kTraces;
    }
  }
};

// Issue 5, "must show" 1, the parts that hold: less CPU slack than the VPA by >= 25%, no
// more OOM events, no larger share of under-provisioned samples. (Memory slack is about
// level with the VPA's; see bench/load_model/README.md.)
TEST_F(RealTraceTest, BitbrainsEvoscaleVersusVpa) {
  ReplayOptions o;
  o.trace = TraceKind::kBitbrains;
  o.path = kTraces + "/bitbrains-rnd-2013-7";
  o.policy = Policy::kVpa;
  const absl::StatusOr<ReplayReport> vpa = Replay(o);
  ASSERT_TRUE(vpa.ok()) << vpa.status();
  o.policy = Policy::kEvoscale;
  const absl::StatusOr<ReplayReport> evo = Replay(o);
  ASSERT_TRUE(evo.ok()) << evo.status();
  ASSERT_EQ(vpa->series.size(), 10u);
  EXPECT_LE(evo->relative_slack_cpu_sum, 0.75 * vpa->relative_slack_cpu_sum);
  EXPECT_LE(evo->relative_slack_memory_sum, vpa->relative_slack_memory_sum);
  EXPECT_LE(evo->oom_events, vpa->oom_events);
  EXPECT_LE(evo->underprovisioned_fraction, vpa->underprovisioned_fraction);
}

// Issue 5, "must show" 2, the part that holds: fewer replica-hours than the HPA with no
// more minutes over target (about 5% fewer, not the 15% the issue asks for).
TEST_F(RealTraceTest, AlibabaEvoscaleVersusHpa) {
  ReplayOptions o;
  o.trace = TraceKind::kAlibabaGenAi;
  o.path = kTraces + "/alibaba-genai-2026";
  o.policy = Policy::kHpa;
  const absl::StatusOr<ReplayReport> hpa = Replay(o);
  ASSERT_TRUE(hpa.ok()) << hpa.status();
  o.policy = Policy::kEvoscale;
  const absl::StatusOr<ReplayReport> evo = Replay(o);
  ASSERT_TRUE(evo.ok()) << evo.status();
  EXPECT_GT(hpa->replica_hours, 0);
  EXPECT_LT(evo->replica_hours, hpa->replica_hours);
  EXPECT_LE(evo->minutes_over_target, hpa->minutes_over_target);
}

}  // namespace
}  // namespace evoscale::load_model
