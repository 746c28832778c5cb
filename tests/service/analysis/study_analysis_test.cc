// The dashboard's analysis document (service/analysis/study_analysis.h) on trials built here,
// and the cache that answers an unchanged study's document again.
#include "service/analysis/study_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/service/analysis/analysis_test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::service::testing::MakeStudy;
using ::evoscale::service::testing::Succeeded;
using ::google::protobuf::util::TimeUtil;
using ::testing::Contains;
using ::testing::HasSubstr;
using nlohmann::json;

json Analyse(const v1::Study& study, const std::vector<v1::Trial>& trials, AnalysisOptions o = {},
             CapacityLimit limit = {}, absl::Time now = absl::FromUnixSeconds(1000)) {
  if (o.metric.empty()) o.metric = study.spec().metrics(0).name();
  return json::parse(StudyAnalysisJson(study, trials, o, limit, now));
}

TEST(StudyAnalysisTest, HistoryHoldsEverySucceededValueAndTheBestSoFar) {
  std::vector<v1::Trial> trials = {Succeeded(1, 0.5, 0.1), Succeeded(2, 0.7, 0.2),
                                   Succeeded(3, 0.4, 0.3)};
  v1::Trial stopped = Succeeded(4, 0.1, 0.4);
  stopped.set_state(v1::Trial::STOPPED);  // never the best, not in the history
  trials.push_back(stopped);
  v1::Trial tombstone;
  tombstone.set_id(5);
  trials.push_back(tombstone);
  trials.push_back(Succeeded(6, 0.45, 0.5));
  const json a = Analyse(MakeStudy(), trials);
  EXPECT_EQ(a["history"]["total"], 4);
  EXPECT_EQ(a["history"]["trial_ids"], json({1, 2, 3, 6}));
  EXPECT_EQ(a["history"]["values"], json({0.5, 0.7, 0.4, 0.45}));
  EXPECT_EQ(a["history"]["best"], json({0.5, 0.5, 0.4, 0.4}));
  EXPECT_EQ(a["states"], json({{"STOPPED", 1}, {"SUCCEEDED", 4}}));
  EXPECT_EQ(a["goal"], "MINIMIZE");
  EXPECT_EQ(a.contains("pareto"), false);
}

TEST(StudyAnalysisTest, HistoryDownsamplesKeepingEveryImprovementAndEachBucketsExtremes) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<v1::Trial> trials;
  for (int i = 1; i <= 5000; ++i) trials.push_back(Succeeded(i, u(rng), u(rng)));
  AnalysisOptions o;
  o.max_points = 100;
  const json a = Analyse(MakeStudy(), trials, o);
  const json& h = a["history"];
  EXPECT_EQ(h["total"], 5000);
  ASSERT_LE(h["trial_ids"].size(), 100u);
  ASSERT_GE(h["trial_ids"].size(), 80u);
  // Every improvement of the best is kept, with the exact best at each kept trial.
  std::vector<int64_t> improvements;
  double best = HUGE_VAL, lowest = HUGE_VAL, highest = -HUGE_VAL;
  for (const v1::Trial& t : trials) {
    const double v = t.final_measurement().metrics().at("loss");
    if (v < best) improvements.push_back(t.id()), best = v;
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  std::set<int64_t> kept(h["trial_ids"].begin(), h["trial_ids"].end());
  for (int64_t id : improvements) EXPECT_TRUE(kept.contains(id)) << id;
  EXPECT_EQ(h["best"].back(), best);
  EXPECT_THAT(h["values"], Contains(json(lowest)));
  EXPECT_THAT(h["values"], Contains(json(highest)));
  // In id order.
  std::vector<int64_t> ids(h["trial_ids"].begin(), h["trial_ids"].end());
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
}

TEST(StudyAnalysisTest, CurvesAreBoundedAndKeepLiveAndBestTrials) {
  std::vector<v1::Trial> trials;
  for (int i = 1; i <= 300; ++i) {
    v1::Trial t = Succeeded(i, 1.0 / i, 0.5);
    if (i > 290) t.set_state(v1::Trial::ACTIVE);
    for (int s = 1; s <= 50; ++s) {
      auto* m = t.add_measurements();
      m->set_step(s);
      (*m->mutable_metrics())["loss"] = 1.0 / i + 1.0 / s;
    }
    trials.push_back(std::move(t));
  }
  AnalysisOptions o;
  o.max_curves = 20;
  o.max_curve_points = 10;
  const json a = Analyse(MakeStudy(), trials, o);
  const json& c = a["curves"];
  EXPECT_EQ(c["total"], 300);
  ASSERT_EQ(c["lines"].size(), 20u);
  std::set<int64_t> ids;
  for (const json& l : c["lines"]) {
    ids.insert(l["id"].get<int64_t>());
    ASSERT_EQ(l["steps"].size(), 10u);
    EXPECT_EQ(l["steps"].front(), 1);
    EXPECT_EQ(l["steps"].back(), 50);  // the last point is always kept
  }
  // Live trials (291..300), newest first, up to a quarter of the budget: 296..300.
  for (int id = 296; id <= 300; ++id) EXPECT_TRUE(ids.contains(id)) << id;
  // Then the best by last value (the higher the id, the lower the loss), up to half: 291..295.
  for (int id = 291; id <= 295; ++id) EXPECT_TRUE(ids.contains(id)) << id;
  // Then the other 10 spread evenly over 1..290, both ends included.
  EXPECT_TRUE(ids.contains(1));
  EXPECT_TRUE(ids.contains(290));
  EXPECT_EQ(std::count_if(ids.begin(), ids.end(), [](int64_t id) { return id <= 290; }), 10);
}

TEST(StudyAnalysisTest, PointsCarryCategoriesByIndexAndAbsentParametersAsNull) {
  const json a = Analyse(MakeStudy(), {Succeeded(1, 0.5, 0.1, "adam"), Succeeded(2, 0.4, 0.2, "sgd")});
  EXPECT_EQ(a["points"]["params"]["opt"], json({0, 1}));
  EXPECT_EQ(a["points"]["params"]["momentum"], json({nullptr, 0.9}));
  EXPECT_EQ(a["points"]["values"]["loss"], json({0.5, 0.4}));
  ASSERT_EQ(a["parameters"].size(), 3u);
  EXPECT_EQ(a["parameters"][1]["categories"], json({"adam", "sgd"}));
  EXPECT_EQ(a["parameters"][2]["name"], "momentum");
}

TEST(StudyAnalysisTest, ParetoFrontIsKeptWhenPointsAreDownsampled) {
  const char* spec = R"pb(
    metrics { name: "auc" goal: MAXIMIZE }
    metrics { name: "latency" goal: MINIMIZE }
    parameters { name: "x" double_spec { min: 0 max: 1 } }
  )pb";
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<v1::Trial> trials;
  for (int i = 1; i <= 3000; ++i) {
    v1::Trial t;
    t.set_id(i);
    t.set_state(v1::Trial::SUCCEEDED);
    const double x = u(rng), y = u(rng);
    (*t.mutable_final_measurement()->mutable_metrics())["auc"] = x;
    (*t.mutable_final_measurement()->mutable_metrics())["latency"] = x * x + y;
    auto* p = t.add_parameters();
    p->set_name("x");
    p->set_double_value(x);
    trials.push_back(std::move(t));
  }
  AnalysisOptions o;
  o.max_points = 200;
  const json a = Analyse(MakeStudy(spec), trials, o);
  ASSERT_TRUE(a.contains("pareto"));
  const json& front = a["pareto"]["trial_ids"];
  ASSERT_GT(front.size(), 3u);
  EXPECT_EQ(a["points"]["total"], 3000);
  ASSERT_LE(a["points"]["trial_ids"].size(), 200u);
  std::set<int64_t> drawn(a["points"]["trial_ids"].begin(), a["points"]["trial_ids"].end());
  for (const json& id : front) EXPECT_TRUE(drawn.contains(id.get<int64_t>())) << id;
}

v1::Trial Managed(int64_t id, double start, double end, double cpu, int64_t memory) {
  v1::Trial t = Succeeded(id, 0.5, 0.5);
  *t.mutable_start_time() = TimeUtil::SecondsToTimestamp(static_cast<int64_t>(start));
  if (end > 0) {
    *t.mutable_end_time() = TimeUtil::SecondsToTimestamp(static_cast<int64_t>(end));
  } else {
    t.set_state(v1::Trial::ACTIVE);
  }
  t.mutable_resources()->set_cpu_cores(cpu);
  t.mutable_resources()->set_memory_bytes(memory);
  t.mutable_usage()->set_peak_memory_bytes(memory / 2);
  t.mutable_usage()->set_wall_seconds(end - start);
  t.mutable_usage()->set_mean_cpu_cores(cpu / 2);
  return t;
}

TEST(StudyAnalysisTest, CapacityIsTheStepFunctionOfRunningRequests) {
  // 1: [100, 200) 1 core; 2: [150, 300) 2 cores; 3: [200, now=1000) 1 core, still running.
  const json a = Analyse(MakeStudy(),
                         {Managed(1, 100, 200, 1, 1 << 20), Managed(2, 150, 300, 2, 2 << 20),
                          Managed(3, 200, 0, 1, 1 << 20), Succeeded(4, 0.3, 0.3)},
                         {}, {.cpu_cores = 4, .memory_bytes = 8 << 20});
  const json& c = a["capacity"];
  EXPECT_EQ(c["times"], json({100.0, 150.0, 200.0, 300.0, 1000.0}));
  EXPECT_EQ(c["cpu_cores"], json({1.0, 3.0, 3.0, 1.0, 0.0}));  // at 200: 1 ends as 3 starts
  EXPECT_EQ(c["running"], json({1, 2, 2, 1, 0}));
  EXPECT_EQ(c["memory_bytes"][1], 3 << 20);
  EXPECT_EQ(c["capacity_cpu_cores"], 4.0);
  // Resources: the three managed trials only, request against use.
  const json& r = a["resources"];
  EXPECT_EQ(r["trial_ids"], json({1, 2, 3}));
  EXPECT_EQ(r["memory_requested"], json({1 << 20, 2 << 20, 1 << 20}));
  EXPECT_EQ(r["memory_peak"], json({1 << 19, 1 << 20, 1 << 19}));
  EXPECT_EQ(r["cpu_used"], json({0.5, 1.0, nullptr}));  // no wall time yet: no mean
}

// loss (minimised) with a safety threshold on mem: a trial over 100 is not feasible.
constexpr char kCostSpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  metrics { name: "mem" goal: MINIMIZE safety_threshold: 100 }
  parameters { name: "x" double_spec { min: 0 max: 1 } }
)pb";

// Trial `id` in `state` with `loss` (none when NaN), mem 50, costing `core_seconds`, ended at
// unix second `end` (0: still running, no end time).
v1::Trial Costed(int64_t id, v1::Trial::State state, double loss, double core_seconds,
                 int64_t end) {
  v1::Trial t = Succeeded(id, loss, 0.5);
  t.set_state(state);
  auto& metrics = *t.mutable_final_measurement()->mutable_metrics();
  if (std::isnan(loss)) metrics.clear();
  else metrics["mem"] = 50;
  t.set_core_seconds(core_seconds);
  *t.mutable_start_time() = TimeUtil::SecondsToTimestamp(end > 0 ? end - 10 : 990);
  if (end > 0) *t.mutable_end_time() = TimeUtil::SecondsToTimestamp(end);
  return t;
}

TEST(StudyAnalysisTest, CostHasTheBestAgainstCoreHoursAndTheCostQualityFront) {
  v1::Study study = MakeStudy(kCostSpec);
  study.mutable_spec()->set_budget_core_seconds(36000);
  study.set_spent_core_seconds(31500);
  study.set_remaining_core_seconds(4500);
  std::vector<v1::Trial> trials = {
      Costed(1, v1::Trial::SUCCEEDED, 0.5, 3600, 100),
      Costed(2, v1::Trial::STOPPED, 0.3, 1800, 200),  // never the best, never on the front
      Costed(3, v1::Trial::SUCCEEDED, 0.6, 900, 150),  // ends before 2
      Costed(4, v1::Trial::FAILED, NAN, 1800, 250),
      Costed(5, v1::Trial::SUCCEEDED, 0.4, 7200, 300),
      Costed(6, v1::Trial::SUCCEEDED, 0.5, 3600, 350),   // the same as 1: both on the front
      Costed(7, v1::Trial::ACTIVE, NAN, 900, 0),          // running: not in the curve
      Costed(9, v1::Trial::SUCCEEDED, 0.45, 10800, 400),  // 5 costs less and is better
      Costed(10, v1::Trial::SUCCEEDED, 0.1, 900, 500),    // mem over its threshold
  };
  (*trials.back().mutable_final_measurement()->mutable_metrics())["mem"] = 200;
  v1::Trial tombstone;
  tombstone.set_id(8);
  trials.insert(trials.begin() + 7, tombstone);
  const json a = Analyse(study, trials);
  EXPECT_EQ(a["budget"], json({{"budget_core_seconds", 36000.0},
                               {"spent_core_seconds", 31500.0},
                               {"remaining_core_seconds", 4500.0}}));
  const json& cost = a["cost"];
  EXPECT_EQ(cost["metric"], "loss");
  EXPECT_EQ(cost["goal"], "MINIMIZE");
  // By end time, each at the core-hours every trial ended by then had cost.
  const json& curve = cost["curve"];
  EXPECT_EQ(curve["total"], 8);
  EXPECT_EQ(curve["trial_ids"], json({1, 3, 2, 4, 5, 6, 9, 10}));
  EXPECT_EQ(curve["core_hours"], json({1.0, 1.25, 1.75, 2.25, 4.25, 5.25, 8.25, 8.5}));
  EXPECT_EQ(curve["best"], json({0.5, 0.5, 0.5, 0.5, 0.4, 0.4, 0.4, 0.4}));
  // Every trial with a value, SUCCEEDED or STOPPED, by id.
  const json& points = cost["points"];
  EXPECT_EQ(points["total"], 7);
  EXPECT_EQ(points["trial_ids"], json({1, 2, 3, 5, 6, 9, 10}));
  EXPECT_EQ(points["core_seconds"], json({3600.0, 1800.0, 900.0, 7200.0, 3600.0, 10800.0, 900.0}));
  EXPECT_EQ(points["values"], json({0.5, 0.3, 0.6, 0.4, 0.5, 0.45, 0.1}));
  EXPECT_EQ(points["states"][1], "STOPPED");
  // Cheapest first: 3 for 900, 1 and 6 for 3600 (the same), 5 for 7200.
  const json& front = cost["front"];
  EXPECT_EQ(front["total"], 4);
  EXPECT_EQ(front["trial_ids"], json({3, 1, 6, 5}));
  EXPECT_EQ(front["core_seconds"], json({900.0, 3600.0, 3600.0, 7200.0}));
  EXPECT_EQ(front["values"], json({0.6, 0.5, 0.5, 0.4}));
}

TEST(StudyAnalysisTest, CostOfAMaximisedObjectiveBeforeAnySuccessIsNull) {
  v1::Study study = MakeStudy(R"pb(
    metrics { name: "auc" goal: MAXIMIZE }
    parameters { name: "x" double_spec { min: 0 max: 1 } }
  )pb");
  auto auc = [](v1::Trial t, double v) {
    auto& metrics = *t.mutable_final_measurement()->mutable_metrics();
    metrics.clear();
    metrics["auc"] = v;
    return t;
  };
  const json a = Analyse(study, {auc(Costed(1, v1::Trial::STOPPED, 0, 1800, 100), 0.9),
                                 auc(Costed(2, v1::Trial::SUCCEEDED, 0, 1800, 200), 0.7),
                                 auc(Costed(3, v1::Trial::SUCCEEDED, 0, 3600, 300), 0.8),
                                 auc(Costed(4, v1::Trial::SUCCEEDED, 0, 5400, 400), 0.75)});
  EXPECT_EQ(a["budget"]["budget_core_seconds"], 0.0);
  EXPECT_EQ(a["cost"]["goal"], "MAXIMIZE");
  EXPECT_EQ(a["cost"]["curve"]["core_hours"], json({0.5, 1.0, 2.0, 3.5}));
  EXPECT_EQ(a["cost"]["curve"]["best"], json({nullptr, 0.7, 0.8, 0.8}));
  EXPECT_EQ(a["cost"]["front"]["trial_ids"], json({2, 3}));
}

TEST(StudyAnalysisTest, CostIsLeftOutOfAStudyOfSeveralObjectives) {
  const json a = Analyse(MakeStudy(R"pb(
                           metrics { name: "auc" goal: MAXIMIZE }
                           metrics { name: "latency" goal: MINIMIZE }
                           parameters { name: "x" double_spec { min: 0 max: 1 } }
                         )pb"),
                         {});
  EXPECT_FALSE(a.contains("cost"));
  EXPECT_TRUE(a.contains("budget"));
}

TEST(StudyAnalysisTest, CostCurveDownsamplesKeepingEveryImprovementAndTheLastTrial) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<v1::Trial> trials;
  double best = HUGE_VAL, spent = 0;
  std::vector<int64_t> improvements;
  for (int i = 1; i <= 5000; ++i) {
    const double loss = u(rng);
    const double seconds = std::floor(1 + 100 * u(rng));
    trials.push_back(Costed(i, v1::Trial::SUCCEEDED, loss, seconds, 100 + i));
    if (loss < best) best = loss, improvements.push_back(i);
    spent += seconds;
  }
  AnalysisOptions o;
  o.max_points = 100;
  const json a = Analyse(MakeStudy(kCostSpec), trials, o);
  const json& curve = a["cost"]["curve"];
  EXPECT_EQ(curve["total"], 5000);
  ASSERT_EQ(curve["trial_ids"].size(), 100u);
  std::set<int64_t> kept(curve["trial_ids"].begin(), curve["trial_ids"].end());
  for (int64_t id : improvements) EXPECT_TRUE(kept.contains(id)) << id;
  EXPECT_EQ(curve["trial_ids"].back(), 5000);
  EXPECT_EQ(curve["core_hours"].back(), spent / 3600);
  EXPECT_EQ(curve["best"].back(), best);
  EXPECT_LE(a["cost"]["points"]["trial_ids"].size(), 100u);
  EXPECT_EQ(a["cost"]["points"]["total"], 5000);
}

// The cache answers its document again while the study's trial version, its state and, while
// a running trial holds resources, the second stay; any of them moving builds a new one.
TEST(AnalysisCacheTest, KeepsADocumentWhileItsStudyIsUnchanged) {
  AnalysisCache cache;
  const v1::Study study = MakeStudy();
  const absl::Time now = absl::FromUnixSeconds(1000);
  const AnalysisOptions o{.metric = "loss"};
  const std::vector<v1::Trial> trials = {Succeeded(1, 0.5, 0.1), Succeeded(2, 0.4, 0.2)};
  const std::string base = cache.Document(study, trials, 7, o, {}, now);
  EXPECT_EQ(base, StudyAnalysisJson(study, trials, o, {}, now));
  EXPECT_EQ(cache.Document(study, trials, 7, o, {}, now), base);
  // No running trial holds resources: the time does not matter.
  EXPECT_EQ(cache.Document(study, trials, 7, o, {}, now + absl::Seconds(30)), base);
  // Kept by the version (which every trial write moves), not by the trials' contents.
  std::vector<v1::Trial> changed = trials;
  changed.push_back(Succeeded(3, 0.3, 0.3));
  EXPECT_EQ(cache.Document(study, changed, 7, o, {}, now), base);
  EXPECT_EQ(cache.Document(study, changed, 8, o, {}, now),
            StudyAnalysisJson(study, changed, o, {}, now));
  // The study's state moves no version, but the document shows it.
  v1::Study completed = study;
  completed.set_state(v1::Study::COMPLETED);
  EXPECT_EQ(cache.Document(completed, changed, 8, o, {}, now),
            StudyAnalysisJson(completed, changed, o, {}, now));
  // Other options, or another capacity, are another document.
  const AnalysisOptions fewer{.metric = "loss", .max_points = 10};
  EXPECT_EQ(cache.Document(completed, changed, 8, fewer, {}, now),
            StudyAnalysisJson(completed, changed, fewer, {}, now));
  const CapacityLimit limit{.cpu_cores = 4};
  EXPECT_EQ(cache.Document(completed, changed, 8, o, limit, now),
            StudyAnalysisJson(completed, changed, o, limit, now));
  // A running trial that holds resources: its capacity interval ends now, so its document
  // holds for the second.
  const std::vector<v1::Trial> running = {Managed(1, 100, 0, 1, 1 << 20)};
  const std::string at = cache.Document(study, running, 9, o, {}, now);
  EXPECT_EQ(cache.Document(study, running, 9, o, {}, now + absl::Milliseconds(500)), at);
  EXPECT_EQ(cache.Document(study, running, 9, o, {}, now + absl::Seconds(1)),
            StudyAnalysisJson(study, running, o, {}, now + absl::Seconds(1)));
  EXPECT_NE(cache.Document(study, running, 9, o, {}, now + absl::Seconds(1)), at);
}

TEST(StudyAnalysisTest, QueryErrorsNameTheField) {
  const v1::Study s = MakeStudy();
  auto parse = [&](std::vector<std::pair<std::string, std::string>> q) {
    return ParseAnalysisQuery(s.spec(), q);
  };
  EXPECT_EQ(parse({})->metric, "loss");
  EXPECT_THAT(parse({{"metric", "auc"}}).status().message(),
              HasSubstr("metric: \"auc\" is not a metric of the study (want one of \"loss\")"));
  EXPECT_THAT(parse({{"max_points", "5"}}).status().message(),
              HasSubstr("max_points: \"5\" is not an integer in [10, 100000]"));
  EXPECT_THAT(parse({{"max_curves", "x"}}).status().message(), HasSubstr("max_curves:"));
  EXPECT_THAT(parse({{"max_curve_points", "1"}}).status().message(), HasSubstr("max_curve_points:"));
  EXPECT_EQ(parse({{"max_curves", "0"}, {"other", "1"}})->max_curves, 0);
}

}  // namespace
}  // namespace evoscale::service
