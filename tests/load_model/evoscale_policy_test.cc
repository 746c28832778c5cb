#include "load_model/evoscale_policy.h"

#include <cmath>

#include "gtest/gtest.h"
#include "load_model/vpa.h"

namespace evoscale::load_model {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(EvoscaleResourceTest, CoversASteadyNoisyLoadWithLessSlackThanTheVpa) {
  EvoscaleResourceRecommender evo;
  VpaRecommender vpa;
  int evo_over = 0, vpa_over = 0, scored = 0;
  double evo_slack = 0, vpa_slack = 0;
  for (int i = 0; i < 3 * 288; ++i) {  // Three days of 5-minute samples.
    const absl::Time t = kT0 + absl::Minutes(5 * i);
    const double cpu = 1.0 + 0.1 * std::sin(i * 0.7) + 0.05 * std::sin(i * 2.3);
    if (i >= 288) {
      const double e = evo.Recommend(t).cpu_cores.target;
      const double v = vpa.Recommend(t).cpu_cores.target;
      ++scored;
      evo_over += cpu > e;
      vpa_over += cpu > v;
      evo_slack += (e - cpu) / e;
      vpa_slack += (v - cpu) / v;
    }
    UsageSample s;
    s.time = t;
    s.cpu_cores = cpu;
    s.memory_bytes = 1e9;
    evo.AddSample(s);
    vpa.AddSample(s);
  }
  EXPECT_LT(evo_over, scored / 50);
  EXPECT_LE(vpa_over, evo_over);  // The VPA's p90 x 1.15 covers this signal too...
  EXPECT_LT(evo_slack, 0.9 * vpa_slack);  // ...with more slack.
}

TEST(EvoscaleResourceTest, RequestsApartFromLimitsSitAtAUsagePercentileBelowTheLimit) {
  EvoscaleResourceOptions apart;
  apart.cpu_request_percentile = 0.5;
  apart.memory_request_percentile = 0.5;
  EvoscaleResourceRecommender split(apart), together;
  for (int i = 0; i < 2 * 288; ++i) {
    UsageSample s;
    s.time = kT0 + absl::Minutes(5 * i);
    s.cpu_cores = i % 10 == 0 ? 2.0 : 0.5;  // A spike every 50 minutes.
    s.memory_bytes = i % 10 == 0 ? 2e9 : 1e9;
    split.AddSample(s);
    together.AddSample(s);
  }
  const absl::Time now = kT0 + absl::Hours(48);
  const ResourceRecommendation a = split.Recommend(now), t = together.Recommend(now);
  // Limits as before: the ensemble's value, above the spikes.
  EXPECT_DOUBLE_EQ(LimitOf(a.cpu_cores), LimitOf(t.cpu_cores));
  EXPECT_DOUBLE_EQ(LimitOf(a.memory_bytes), LimitOf(t.memory_bytes));
  EXPECT_GE(LimitOf(a.cpu_cores), 2.0);
  // Requests at the median usage (within a histogram bucket), limits unchanged.
  EXPECT_NEAR(a.cpu_cores.target, 0.5, 0.02);
  EXPECT_NEAR(a.memory_bytes.target, 1e9, 0.03e9);
  // Together: request = limit.
  EXPECT_DOUBLE_EQ(t.cpu_cores.target, LimitOf(t.cpu_cores));
}

// A request apart from its limit is held by the limits' hysteresis, so the band evoscale
// publishes ([request, request / 0.9], what it leaves alone) is true of it: a usage percentile
// that drifts down a little leaves it, one that falls further or rises moves it at once.
TEST(EvoscaleResourceTest, RequestsApartFromLimitsKeepTheHysteresisOfTheirBand) {
  EvoscaleResourceOptions apart;
  apart.memory_request_percentile = 0.5;
  apart.request_half_life = absl::Hours(1);  // the median follows usage within hours
  EvoscaleResourceRecommender rec(apart);
  absl::Time t = kT0;
  // Memory steady at `bytes` for `hours` (one sample a minute); the request after.
  auto run = [&](double bytes, int hours) {
    for (int i = 0; i < 60 * hours; ++i) {
      UsageSample s;
      s.time = t;
      s.cpu_cores = 0.5;
      s.memory_bytes = bytes;
      rec.AddSample(s);
      t += absl::Minutes(1);
    }
    return rec.Peek(t).memory_bytes;
  };
  const ResourceEstimate first = run(1e9, 12);
  EXPECT_NEAR(first.target, 1e9, 0.05e9);
  EXPECT_DOUBLE_EQ(first.upper_bound, first.target / 0.9);
  // 5% less usage: the median moves within the band, the request stays.
  const ResourceEstimate drift = run(0.95e9, 12);
  EXPECT_DOUBLE_EQ(drift.target, first.target);
  // 30% less: out of the band, the request follows.
  const ResourceEstimate fall = run(0.7e9, 12);
  EXPECT_LT(fall.target, 0.9 * first.target);
  EXPECT_NEAR(fall.target, 0.7e9, 0.05e9);
  // A rise moves it at once, and it never exceeds the limit.
  const ResourceEstimate rise = run(0.8e9, 12);
  EXPECT_GT(rise.target, fall.target);
  EXPECT_LE(rise.target, LimitOf(rise));
  // Peek and Recommend agree, and reading changes nothing.
  EXPECT_DOUBLE_EQ(rec.Recommend(t).memory_bytes.target, rise.target);
  EXPECT_DOUBLE_EQ(rec.Peek(t).memory_bytes.target, rise.target);
}

// The risk knob: each limit's margin calibrates itself from the workload's own overruns, so
// that a higher target rate gives more overruns and less slack, near the rate asked for.
TEST(EvoscaleResourceTest, CalibratedMarginsMeetTheTargetRate) {
  struct Outcome { double rate = 0, mean_limit = 0; };
  auto run = [](double rate) {
    EvoscaleResourceOptions o;
    o.target_oom_rate = rate;
    o.target_throttle_rate = rate;
    o.calibration_step = 0.05;
    EvoscaleResourceRecommender rec(o);
    uint64_t x = 12345;
    auto uniform = [&x] {  // A small LCG: the same noise for every rate.
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<double>(x >> 11) / 9007199254740992.0;
    };
    Outcome out;
    int scored = 0, over = 0;
    for (int i = 0; i < 20 * 288; ++i) {  // Twenty days of 5-minute samples.
      const absl::Time t = kT0 + absl::Minutes(5 * i);
      const double u = uniform();
      const double cpu = 0.5 + 0.5 * u * u;  // Skewed noise: rare highs.
      const double memory = 1e9 * (1 + u * u * u);
      const ResourceRecommendation r = rec.Recommend(t);
      if (i >= 5 * 288) {
        ++scored;
        over += cpu > LimitOf(r.cpu_cores);
        out.mean_limit += LimitOf(r.cpu_cores);
      }
      UsageSample s;
      s.time = t;
      s.cpu_cores = cpu;
      s.memory_bytes = memory;
      if (memory > LimitOf(r.memory_bytes)) rec.RecordOom(t, LimitOf(r.memory_bytes));
      rec.AddSample(s);
    }
    out.rate = static_cast<double>(over) / scored;
    out.mean_limit /= scored;
    return out;
  };
  const Outcome tight = run(0.002), loose = run(0.05), off = run(0);
  EXPECT_GT(loose.rate, 0.025);
  EXPECT_LT(loose.rate, 0.1);
  EXPECT_LT(tight.rate, 0.01);
  EXPECT_LT(loose.mean_limit, tight.mean_limit);
  // Without calibration the ensemble alone sets the limit: more than at 5% risk.
  EXPECT_GT(off.mean_limit, loose.mean_limit);
}

TEST(EvoscaleResourceTest, OomRaisesTheMemoryRecommendation) {
  EvoscaleResourceRecommender rec;
  for (int i = 0; i < 100; ++i) {
    UsageSample s;
    s.time = kT0 + absl::Minutes(5 * i);
    s.cpu_cores = 0.5;
    s.memory_bytes = 1e9;
    rec.AddSample(s);
  }
  const absl::Time now = kT0 + absl::Minutes(500);
  const double before = rec.Recommend(now).memory_bytes.target;
  rec.RecordOom(now, before);
  const ResourceRecommendation after = rec.Recommend(now + absl::Minutes(1));
  EXPECT_GE(after.memory_bytes.target, std::max(before * 1.2, before + 100.0 * (1 << 20)));
  EXPECT_NE(after.explanation.find("OOM"), std::string::npos);
}

TEST(EvoscaleReplicaTest, FollowsDemandUpAndDown) {
  EvoscaleReplicaOptions o;
  o.target_utilization = 0.5;
  EvoscaleReplicaRecommender rec(o);
  int replicas = 2;
  for (int i = 0; i < 200; ++i) {
    const double demand = i < 100 ? 1.0 : 10.0;  // Busy replicas.
    LoadSample s;
    s.time = kT0 + absl::Minutes(i);
    s.replicas = replicas;
    s.utilization = demand / replicas;
    s.qps = demand * 2;
    rec.AddSample(s);
    replicas = rec.Recommend(s.time, replicas).replicas;
    if (i == 99) {
      EXPECT_LE(replicas, 4);
    }
  }
  EXPECT_GE(replicas, 20);  // 10 busy at 50% target.
  EXPECT_LE(replicas, 26);
  for (int i = 200; i < 300; ++i) {
    LoadSample s;
    s.time = kT0 + absl::Minutes(i);
    s.replicas = replicas;
    s.utilization = 1.0 / replicas;
    s.qps = 2;
    rec.AddSample(s);
    replicas = rec.Recommend(s.time, replicas).replicas;
  }
  EXPECT_LE(replicas, 4);
}

// More regressors and load-scaled errors still follow the demand.
TEST(EvoscaleReplicaTest, LagsAndScaledErrorsFollowDemand) {
  EvoscaleReplicaOptions o;
  o.target_utilization = 0.5;
  o.demand_lags = 3;
  o.qps_lags = 2;
  o.error_scale_exponent = 0.5;
  EvoscaleReplicaRecommender rec(o);
  int replicas = 2;
  for (int i = 0; i < 300; ++i) {
    const double demand = i < 150 ? 2.0 + 0.3 * std::sin(i) : 8.0 + 0.3 * std::sin(i);
    LoadSample s;
    s.time = kT0 + absl::Minutes(i);
    s.replicas = replicas;
    s.utilization = demand / replicas;
    s.qps = demand * 3;
    rec.AddSample(s);
    replicas = rec.Recommend(s.time, replicas).replicas;
    if (i == 149) {
      EXPECT_GE(replicas, 4);  // 1.7-2.3 busy at 50% (lags can predict the sine).
      EXPECT_LE(replicas, 8);
    }
  }
  EXPECT_GE(replicas, 17);  // ~8.3 busy at 50%.
  EXPECT_LE(replicas, 24);
}


// A service reads recommendations whenever clients, scrapes and charts ask; what it recommends
// later must not depend on how often they did. Three recommenders take the same samples (a CPU
// spike that decays, memory with an OOM): one is never read, one peeks after every sample and
// between samples, one decides before every sample as the replay does. They agree throughout.
TEST(EvoscaleResourceTest, ReadsDoNotChangeLaterRecommendations) {
  EvoscaleResourceRecommender quiet, peeked, replayed;
  const auto usage = [](int i) {
    UsageSample s;
    s.time = kT0 + absl::Minutes(i);
    s.cpu_cores = (i >= 600 && i < 620 ? 3.0 : 1.0) + 0.2 * std::sin(i * 0.37);
    s.memory_bytes = (i >= 1500 && i < 1510 ? 3e9 : 1e9) + 5e7 * std::sin(i * 0.11);
    return s;
  };
  int oom = 0;
  for (int i = 0; i < 3 * 1440; ++i) {
    const UsageSample s = usage(i);
    // The replay's order: decide, see the OOM, then learn the sample.
    const ResourceRecommendation in_force = replayed.Recommend(s.time);
    const double limit = LimitOf(in_force.memory_bytes);
    const bool killed = s.memory_bytes > limit;
    oom += killed;
    if (killed) replayed.RecordOom(s.time, limit);
    replayed.AddSample(s);
    // The service's order: the sample, with its OOM report.
    (void)peeked.Peek(s.time - absl::Seconds(30));
    for (EvoscaleResourceRecommender* r : {&quiet, &peeked}) {
      r->AddSample(s);
      if (killed) r->RecordOom(s.time, limit);
    }
    (void)peeked.Peek(s.time);
    (void)peeked.Peek(s.time + absl::Seconds(20));
    if (i % 97 == 0) {  // Spot checks that do not disturb `quiet` either.
      const absl::Time t = s.time + absl::Seconds(1);
      ASSERT_EQ(quiet.Peek(t).cpu_cores.target, peeked.Peek(t).cpu_cores.target) << i;
      ASSERT_EQ(quiet.Peek(t).memory_bytes.target, replayed.Peek(t).memory_bytes.target) << i;
    }
  }
  ASSERT_GT(oom, 0);  // The memory spike overran the limit in force: the floor and margin moved.
  const absl::Time end = kT0 + absl::Minutes(3 * 1440);
  const ResourceRecommendation q = quiet.Peek(end), p = peeked.Peek(end), r = replayed.Peek(end);
  EXPECT_EQ(q.cpu_cores.target, p.cpu_cores.target);
  EXPECT_EQ(q.cpu_cores.target, r.cpu_cores.target);
  EXPECT_EQ(q.memory_bytes.target, p.memory_bytes.target);
  EXPECT_EQ(q.memory_bytes.target, r.memory_bytes.target);
  EXPECT_EQ(q.explanation, r.explanation);
  // Peek answers what Recommend decides.
  const ResourceRecommendation decided = quiet.Recommend(end);
  EXPECT_EQ(decided.cpu_cores.target, q.cpu_cores.target);
  EXPECT_EQ(decided.memory_bytes.target, q.memory_bytes.target);
  // The spike has decayed: the CPU limit came down from it, so the hysteresis had work to do.
  EXPECT_LT(q.cpu_cores.target, 3.0);
}

// The bounds are the band evoscale leaves alone: [target, target / (1 - hysteresis)]. A pod
// set to an earlier target stays inside the new band exactly while evoscale's own
// recommendation stands, and falls outside it when the recommendation moves.
TEST(EvoscaleResourceTest, BoundsAreTheBandItsHysteresisLeavesAlone) {
  EvoscaleResourceRecommender rec;
  double pod_cpu = 0;  // The request an updater acting outside the bounds would have set.
  int moves = 0, evictions = 0;
  for (int i = 0; i < 4 * 288; ++i) {  // Four days of 5-minute samples; the load halves.
    const absl::Time t = kT0 + absl::Minutes(5 * i);
    const ResourceRecommendation r = rec.Recommend(t);
    ASSERT_EQ(r.cpu_cores.lower_bound, r.cpu_cores.target);
    ASSERT_NEAR(r.cpu_cores.upper_bound, r.cpu_cores.target / 0.9, 1e-12);
    ASSERT_EQ(r.memory_bytes.lower_bound, r.memory_bytes.target);
    ASSERT_NEAR(r.memory_bytes.upper_bound, r.memory_bytes.target / 0.9, 1e-3);
    if (pod_cpu != 0 && r.cpu_cores.target != pod_cpu) ++moves;
    if (pod_cpu < r.cpu_cores.lower_bound || pod_cpu > r.cpu_cores.upper_bound) {
      ++evictions;
      pod_cpu = r.cpu_cores.target;
    }
    UsageSample s;
    s.time = t;
    s.cpu_cores = (i < 2 * 288 ? 2.0 : 1.0) * (1.0 + 0.05 * std::sin(i * 0.7));
    s.memory_bytes = 1e9;
    rec.AddSample(s);
  }
  EXPECT_GT(moves, 0);
  EXPECT_EQ(evictions, moves + 1);  // The first placement, then once per move.
  // A request rounded up a little stays inside the band.
  const ResourceRecommendation r = rec.Recommend(kT0 + absl::Hours(96));
  EXPECT_LE(r.cpu_cores.target * 1.01, r.cpu_cores.upper_bound);
}

}  // namespace
}  // namespace evoscale::load_model
