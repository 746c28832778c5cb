// The dashboard's analysis document (service/study_analysis.h) on trials built here, and its
// HTTP routes (with the trial table's and the usage routes) on a real StudyCore and
// AutoscalerCore over SQLite files in a temp dir.
#include "service/study_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/clock.h"
#include "service/http_server.h"
#include "service/metrics.h"
#include "service/store/store.h"
#include "service/store/telemetry_store.h"
#include "service/study/study_core.h"
#include "tests/service/test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::service::testing::ScopedTempDir;
using ::google::protobuf::util::TimeUtil;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr char kSpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  parameters { name: "x" double_spec { min: 0 max: 1 } }
  parameters {
    name: "opt"
    categorical_spec { values: "adam" values: "sgd" }
    children {
      parent_categorical_values: "sgd"
      parameter_spec { name: "momentum" double_spec { min: 0 max: 1 } }
    }
  }
)pb";

v1::Study MakeStudy(const char* spec = kSpec) {
  v1::Study s;
  s.set_name("studies/1");
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(spec, s.mutable_spec()));
  return s;
}

v1::Trial Succeeded(int64_t id, double loss, double x, const std::string& opt = "adam") {
  v1::Trial t;
  t.set_id(id);
  t.set_name("studies/1/trials/" + std::to_string(id));
  t.set_state(v1::Trial::SUCCEEDED);
  auto* px = t.add_parameters();
  px->set_name("x");
  px->set_double_value(x);
  auto* po = t.add_parameters();
  po->set_name("opt");
  po->set_string_value(opt);
  if (opt == "sgd") {
    auto* pm = t.add_parameters();
    pm->set_name("momentum");
    pm->set_double_value(0.9);
  }
  (*t.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
  return t;
}

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

// The fingerprint moves with everything the document shows, and only then.
TEST(StudyAnalysisTest, FingerprintChangesWithWhatTheDocumentShows) {
  const v1::Study study = MakeStudy();
  const absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<v1::Trial> trials = {Succeeded(1, 0.5, 0.1), Succeeded(2, 0.4, 0.2)};
  const uint64_t base = AnalysisFingerprint(study, trials, now);
  EXPECT_EQ(AnalysisFingerprint(study, trials, now), base);
  // No running trial holds resources: the time does not matter.
  EXPECT_EQ(AnalysisFingerprint(study, trials, now + absl::Seconds(30)), base);
  std::vector<v1::Trial> changed = trials;
  auto* m = changed[0].add_measurements();
  m->set_step(1);
  (*m->mutable_metrics())["loss"] = 0.9;
  EXPECT_NE(AnalysisFingerprint(study, changed, now), base);
  changed = trials;
  (*changed[1].mutable_final_measurement()->mutable_metrics())["loss"] = 0.41;
  EXPECT_NE(AnalysisFingerprint(study, changed, now), base);
  changed = trials;
  changed[1].set_state(v1::Trial::STOPPED);
  EXPECT_NE(AnalysisFingerprint(study, changed, now), base);
  changed = trials;
  changed[0].mutable_resources()->set_memory_bytes(1 << 20);
  EXPECT_NE(AnalysisFingerprint(study, changed, now), base);
  changed = trials;
  changed.push_back(Succeeded(3, 0.3, 0.3));
  EXPECT_NE(AnalysisFingerprint(study, changed, now), base);
  // A running trial that holds resources: its capacity interval ends now.
  changed = {Managed(1, 100, 0, 1, 1 << 20)};
  EXPECT_NE(AnalysisFingerprint(study, changed, now), AnalysisFingerprint(study, changed, now + absl::Seconds(1)));
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

// The routes on real cores: a study of 30 trials told over the study API.
class AnalysisHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open(dir_.File("s.db"), Durability::kProcessCrash);
    core_ = *StudyCore::Create(store_.get(), Clock::Real());
    telemetry_ = *TelemetryStore::Open(dir_.File("t.db"), Durability::kProcessCrash);
    autoscaler_ = *AutoscalerCore::Create(telemetry_.get(), Clock::Real());
    v1::CreateStudyRequest create;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kSpec, create.mutable_study()->mutable_spec()));
    ASSERT_TRUE(core_->Call(create).ok());
    for (int i = 1; i <= 30; ++i) {
      v1::CreateTrialRequest req;
      req.set_parent("studies/1");
      *req.mutable_trial() = Succeeded(0, 1.0 / i, i / 31.0, i % 2 ? "adam" : "sgd");
      req.mutable_trial()->clear_id();
      req.mutable_trial()->clear_name();
      ASSERT_TRUE(core_->Call(req).ok());
    }
  }

  HttpResponse Get(const std::string& target) {
    return HandleHttp(core_.get(), autoscaler_.get(), &metrics_, &open_, "GET", target, "");
  }

  ScopedTempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StudyCore> core_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<AutoscalerCore> autoscaler_;
  ServiceMetrics metrics_;
  TokenAuth open_;
};

TEST_F(AnalysisHttpTest, AnalysisAndTheTrialTable) {
  HttpResponse r = Get("/api/v1/studies/1/analysis?max_points=10");
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = json::parse(r.body);
  EXPECT_EQ(a["history"]["total"], 30);
  EXPECT_LE(a["history"]["trial_ids"].size(), 10u);
  EXPECT_EQ(a["history"]["best"].back(), 1.0 / 30);
  // Asked again unchanged: the same document; after a new trial, the new one.
  EXPECT_EQ(Get("/api/v1/studies/1/analysis?max_points=10").body, r.body);
  v1::CreateTrialRequest more;
  more.set_parent("studies/1");
  *more.mutable_trial() = Succeeded(0, 0.001, 0.5);
  more.mutable_trial()->clear_id();
  more.mutable_trial()->clear_name();
  ASSERT_TRUE(core_->Call(more).ok());
  const json after = json::parse(Get("/api/v1/studies/1/analysis?max_points=10").body);
  EXPECT_EQ(after["history"]["total"], 31);
  EXPECT_EQ(after["history"]["best"].back(), 0.001);

  // Sorted by loss, SGD only (percent-encoded as a browser sends it), 5 a page.
  r = Get("/api/v1/studies/1/trials?order_by=metric%3Aloss&param=opt%3Asgd&page_size=5");
  ASSERT_EQ(r.status, 200) << r.body;
  json page = json::parse(r.body);
  EXPECT_EQ(page["total_size"], 15);
  ASSERT_EQ(page["trials"].size(), 5u);
  EXPECT_EQ(page["trials"][0]["id"], "30");  // protobuf's JSON: int64 as a string
  ASSERT_FALSE(page["next_page_token"].get<std::string>().empty());
  r = Get("/api/v1/studies/1/trials?order_by=metric%3Aloss&param=opt%3Asgd&page_size=5&page_token=" +
          page["next_page_token"].get<std::string>());
  page = json::parse(r.body);
  EXPECT_EQ(page["trials"][0]["id"], "20");

  // A single trial, and why an ask/tell trial has no usage.
  EXPECT_EQ(Get("/api/v1/studies/1/trials/3").status, 200);
  r = Get("/api/v1/studies/1/trials/3/usage");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, HasSubstr("no usage recorded for studies/1/trials/3"));
  EXPECT_EQ(Get("/api/v1/studies/1/trials/99/usage").status, 404);
}

TEST_F(AnalysisHttpTest, BadQueriesAre400sNamingTheField) {
  for (const auto& [target, field] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1/studies/1/analysis?metric=auc", "metric: \\\"auc\\\""},
           {"/api/v1/studies/1/analysis?max_points=abc", "max_points:"},
           {"/api/v1/studies/1/trials?param=x%3A0.9..0.1", "param:"},
           {"/api/v1/studies/1/trials?order_by=metric%3Aauc", "order_by:"},
           {"/api/v1/studies/1/trials/1/usage?max_points=0", "max_points:"},
           {"/api/v1/workloads/default/none/history", "default/none"},
       }) {
    const HttpResponse r = Get(target);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << target << " " << r.status;
    EXPECT_THAT(r.body, HasSubstr(field)) << target;
  }
  EXPECT_EQ(Get("/api/v1/studies/9/analysis").status, 404);
}

}  // namespace
}  // namespace evoscale::service
