// The HTTP routes (service/http_api.h) on a real StudyCore and AutoscalerCore over SQLite
// files in a temp dir: the dashboard's analysis document and its cache, the trial table and
// the usage routes.
#include "service/http_api.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/clock.h"
#include "service/metrics.h"
#include "service/store/store.h"
#include "service/store/telemetry_store.h"
#include "service/study/study_core.h"
#include "tests/service/analysis/analysis_test_support.h"
#include "tests/service/test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::service::testing::ScopedTempDir;
using ::evoscale::service::testing::Succeeded;
using nlohmann::json;
using ::testing::HasSubstr;

// The routes on real cores: a study of 30 trials told over the study API.
class AnalysisHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open(dir_.File("s.db"), Durability::kProcessCrash);
    core_ = *StudyCore::Create(store_.get(), Clock::Real());
    telemetry_ = *TelemetryStore::Open(dir_.File("t.db"), Durability::kProcessCrash);
    autoscaler_ = *AutoscalerCore::Create(telemetry_.get(), Clock::Real());
    v1::CreateStudyRequest create;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        testing::kAnalysisSpec, create.mutable_study()->mutable_spec()));
    ASSERT_TRUE(core_->Call(create).ok());
    for (int i = 1; i <= 30; ++i) {
      v1::CreateTrialRequest req;
      req.set_parent("studies/1");
      *req.mutable_trial() = Succeeded(0, 1.0 / i, i / 31.0, i % 2 ? "adam" : "sgd");
      req.mutable_trial()->clear_id();
      req.mutable_trial()->clear_name();
      ASSERT_TRUE(core_->Call(req).ok());
    }
    api_ = std::make_unique<HttpApi>(core_.get(), autoscaler_.get(), &metrics_, &open_);
  }

  HttpResponse Get(const std::string& target) { return api_->Handle("GET", target, ""); }

  ScopedTempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StudyCore> core_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<AutoscalerCore> autoscaler_;
  ServiceMetrics metrics_;
  TokenAuth open_;
  std::unique_ptr<HttpApi> api_;
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

// The document is kept while the study is unchanged and follows every write of a trial (a new
// one, a measurement, a new resource request, its completion) and the study's state.
TEST_F(AnalysisHttpTest, TheAnalysisFollowsEveryTrialWriteAndTheStudysState) {
  std::string last = Get("/api/v1/studies/1/analysis").body;
  auto moved = [&] {
    const HttpResponse r = Get("/api/v1/studies/1/analysis");
    EXPECT_EQ(r.status, 200) << r.body;
    const bool differs = r.body != last;
    last = r.body;
    return differs;
  };
  EXPECT_FALSE(moved());
  v1::SuggestTrialsRequest suggest;
  suggest.set_parent("studies/1");
  suggest.set_suggestion_count(1);
  suggest.set_client_id("analysis-test");
  absl::StatusOr<v1::SuggestTrialsResponse> suggested = core_->Call(suggest);
  ASSERT_TRUE(suggested.ok()) << suggested.status();
  const std::string trial = suggested->trials(0).name();
  EXPECT_TRUE(moved());
  v1::AddTrialMeasurementRequest measure;
  measure.set_trial_name(trial);
  measure.mutable_measurement()->set_step(1);
  (*measure.mutable_measurement()->mutable_metrics())["loss"] = 0.9;
  ASSERT_TRUE(core_->Call(measure).ok());
  EXPECT_TRUE(moved());
  RerunTrialRequest rerun{.name = trial, .keep_measurements = true};
  rerun.resources.set_memory_bytes(1 << 20);
  ASSERT_TRUE(core_->Call(rerun).ok());
  EXPECT_TRUE(moved());
  v1::CompleteTrialRequest complete;
  complete.set_name(trial);
  (*complete.mutable_final_measurement()->mutable_metrics())["loss"] = 0.0001;
  ASSERT_TRUE(core_->Call(complete).ok());
  EXPECT_TRUE(moved());
  EXPECT_FALSE(moved());
  v1::SetStudyStateRequest inactive;
  inactive.set_name("studies/1");
  inactive.set_state(v1::Study::INACTIVE);
  ASSERT_TRUE(core_->Call(inactive).ok());
  EXPECT_TRUE(moved());
  EXPECT_THAT(last, HasSubstr("\"state\":\"INACTIVE\""));
  EXPECT_FALSE(moved());
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
