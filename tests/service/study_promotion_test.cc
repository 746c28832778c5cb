// COST_AWARE promotion in the study core (no scheduler: the test plays the workers through the
// core's API): a managed study whose template resumes from ${checkpoint_dir} hands a STOPPED
// trial the policy stopped back to a client, ACTIVE with its measurements, once later arrivals
// at its rung put it back among those that continue.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/common/clock.h"
#include "service/store/store.h"
#include "service/study/study_core.h"
#include "service/study/study_limits.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::testing::ScopedTempDir;

v1::StudySpec PromotingSpec(bool resumes) {
  v1::StudySpec spec;
  v1::MetricSpec* auc = spec.add_metrics();
  auc->set_name("auc");
  auc->set_goal(v1::MetricSpec::MAXIMIZE);
  v1::ParameterSpec* x = spec.add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_min(0);
  x->mutable_double_spec()->set_max(1);
  spec.mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  spec.mutable_early_stopping()->set_policy(v1::EarlyStoppingSpec::COST_AWARE);
  spec.mutable_early_stopping()->set_max_step(9);
  v1::TrialTemplate* tt = spec.mutable_trial_template();
  tt->set_command("trainer");
  if (resumes) tt->add_args("--checkpoint-dir=${checkpoint_dir}");
  return spec;
}

v1::Measurement Auc(double auc, int64_t step) {
  v1::Measurement m;
  m.set_step(step);
  m.set_elapsed_seconds(static_cast<double>(step));
  (*m.mutable_metrics())["auc"] = auc;
  return m;
}

class StudyPromotionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open(dir_.File("s.db"), Durability::kProcessCrash);
    core_ = *StudyCore::Create(store_.get(), &clock_);
  }

  // A finished run created as a result from elsewhere: AUC `end - 0.2 / step` at steps 1..9.
  void AddFinishedRun(double end) {
    v1::CreateTrialRequest req;
    req.set_parent(study_);
    v1::Trial* t = req.mutable_trial();
    v1::Parameter* p = t->add_parameters();
    p->set_name("x");
    p->set_double_value(end / 2);
    t->set_state(v1::Trial::SUCCEEDED);
    for (int step = 1; step <= 9; ++step) *t->add_measurements() = Auc(end - 0.2 / step, step);
    *t->mutable_final_measurement() = t->measurements(8);
    ASSERT_TRUE(core_->Call(req).ok());
  }

  // A trial for `client` that reports `auc` at steps 1..3 and asks whether to stop.
  std::string RunToRung(const std::string& client, double auc, bool* stopped) {
    v1::SuggestTrialsRequest ask;
    ask.set_parent(study_);
    ask.set_suggestion_count(1);
    ask.set_client_id(client);
    absl::StatusOr<v1::SuggestTrialsResponse> got = core_->Call(ask);
    EXPECT_TRUE(got.ok() && got->trials_size() == 1);
    const std::string name = got->trials(0).name();
    for (int step = 1; step <= 3; ++step) {
      v1::AddTrialMeasurementRequest m;
      m.set_trial_name(name);
      *m.mutable_measurement() = Auc(auc, step);
      EXPECT_TRUE(core_->Call(m).ok());
    }
    v1::CheckTrialEarlyStoppingStateRequest check;
    check.set_trial_name(name);
    *stopped = core_->Call(check)->should_stop();
    if (*stopped) {
      v1::CompleteTrialRequest done;
      done.set_name(name);
      EXPECT_EQ(core_->Call(done)->state(), v1::Trial::STOPPED);
    }
    return name;
  }

  void Create(bool resumes) {
    v1::CreateStudyRequest req;
    *req.mutable_study()->mutable_spec() = PromotingSpec(resumes);
    absl::StatusOr<v1::Study> study = core_->Call(req);
    ASSERT_TRUE(study.ok()) << study.status();
    study_ = study->name();
  }

  ScopedTempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<Store> store_;
  std::unique_ptr<StudyCore> core_;
  std::string study_;
};

TEST_F(StudyPromotionTest, AStoppedTrialIsPromotedOnceWorseTrialsReachItsRung) {
  Create(/*resumes=*/true);
  for (int i = 0; i < 8; ++i) AddFinishedRun(0.70 + 0.01 * i);  // rung 3: 0.633 .. 0.703
  bool stopped = false;
  // At 0.64 it is behind most of the eight at rung 3: stopped (by the policy).
  const std::string trial = RunToRung("a", 0.64, &stopped);
  ASSERT_TRUE(stopped);
  v1::GetTrialRequest get;
  get.set_name(trial);
  EXPECT_TRUE(core_->Call(get)->policy_stopped());
  // Nothing better to do yet: the next client gets a new trial, not the stopped one.
  bool also_stopped = false;
  EXPECT_NE(RunToRung("b", 0.30, &also_stopped), trial);
  EXPECT_TRUE(also_stopped);
  // Fourteen more arrivals at rung 3, all worse: until they are all there the first trial is
  // not in the top third (7 are ahead of it); then, with 24 trials there, the top third is 8,
  // and the next client gets it back.
  for (int i = 0; i < 14; ++i) {
    bool ignored = false;
    EXPECT_NE(RunToRung("c" + std::to_string(i), 0.30 + 0.01 * i, &ignored), trial) << i;
  }
  v1::SuggestTrialsRequest ask;
  ask.set_parent(study_);
  ask.set_suggestion_count(1);
  ask.set_client_id("resumer");
  absl::StatusOr<v1::SuggestTrialsResponse> got = core_->Call(ask);
  ASSERT_TRUE(got.ok() && got->trials_size() == 1);
  const v1::Trial& promoted = got->trials(0);
  EXPECT_EQ(promoted.name(), trial);
  EXPECT_EQ(promoted.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(promoted.client_id(), "resumer");
  EXPECT_EQ(promoted.promotions(), 1);
  EXPECT_FALSE(promoted.policy_stopped());
  EXPECT_EQ(promoted.measurements_size(), 3);  // it resumes after step 3
  EXPECT_FALSE(promoted.has_final_measurement());
  // It runs on to the full run and ends SUCCEEDED, once, in the designer's history.
  for (int step = 4; step <= 9; ++step) {
    v1::AddTrialMeasurementRequest m;
    m.set_trial_name(trial);
    *m.mutable_measurement() = Auc(0.64 + 0.01 * step, step);
    ASSERT_TRUE(core_->Call(m).ok());
  }
  v1::CompleteTrialRequest done;
  done.set_name(trial);
  EXPECT_EQ(core_->Call(done)->state(), v1::Trial::SUCCEEDED);
  // A restart rebuilds the same: SUCCEEDED, one promotion, nine measurements.
  core_.reset();
  core_ = *StudyCore::Create(store_.get(), &clock_);
  absl::StatusOr<v1::Trial> after = core_->Call(get);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(after->promotions(), 1);
  EXPECT_EQ(after->measurements_size(), 9);
}

TEST_F(StudyPromotionTest, NoPromotionWithoutACheckpointToResumeFromOrForAClientsStop) {
  Create(/*resumes=*/false);
  for (int i = 0; i < 8; ++i) AddFinishedRun(0.70 + 0.01 * i);
  bool stopped = false;
  const std::string trial = RunToRung("a", 0.64, &stopped);
  ASSERT_TRUE(stopped);
  for (int i = 0; i < 15; ++i) {
    bool ignored = false;
    EXPECT_NE(RunToRung("c" + std::to_string(i), 0.30 + 0.01 * i, &ignored), trial);
  }
}

// Study.cost_model: what the scheduler noted on each managed trial before it ran (metadata
// kCostModel*) against what it used, over the ended trials.
TEST_F(StudyPromotionTest, TheStudyReportsHowItsCostModelPredictedItsEndedTrials) {
  Create(/*resumes=*/false);
  // (predicted core-seconds coefficient, memory request; actual elapsed at step 9, peak, stopped)
  struct Case {
    double coefficient, memory, elapsed, peak;
    bool stopped;
  };
  const Case cases[] = {{1.0, 100, 10, 90, false},   // predicts 9: 10% off; slack 10/90
                        {1.0, 100, 9, 120, false},   // exact; under-predicted; slack -20/120
                        {2.0, 100, 9, 50, true},     // 100% off; stopped: no slack
                        {1.0, 200, 12, 100, false}};  // 25% off; slack 1
  for (const Case& c : cases) {
    v1::SuggestTrialsRequest ask;
    ask.set_parent(study_);
    ask.set_suggestion_count(1);
    ask.set_client_id("w");
    const v1::Trial t = core_->Call(ask)->trials(0);
    RerunTrialRequest start{.name = t.name(), .resources = {}, .metadata = {
        {kCostModelCoefficient, absl::StrCat(c.coefficient)},
        {kCostModelExponent, "1"},
        {kCostModelMemory, absl::StrCat(c.memory)}}};
    start.resources.set_cpu_cores(1);
    ASSERT_TRUE(core_->Call(start).ok());
    v1::AddTrialMeasurementRequest m;
    m.set_trial_name(t.name());
    *m.mutable_measurement() = Auc(0.7, 9);
    m.mutable_measurement()->set_elapsed_seconds(c.elapsed);
    ASSERT_TRUE(core_->Call(m).ok());
    v1::CompleteTrialRequest done;
    done.set_name(t.name());
    done.mutable_usage()->set_peak_memory_bytes(static_cast<int64_t>(c.peak));
    done.mutable_usage()->set_stopped(c.stopped);
    ASSERT_TRUE(core_->Call(done).ok());
  }
  v1::GetStudyRequest get;
  get.set_name(study_);
  const v1::CostModelReport r = core_->Call(get)->cost_model();
  EXPECT_EQ(r.predicted_trials(), 4);
  // |errors| 0.1, 0, 1, 0.25: the upper median.
  EXPECT_DOUBLE_EQ(r.core_seconds_median_abs_pct_error(), 0.25);
  EXPECT_EQ(r.memory_under_predictions(), 1);
  // Slack over the runs that ended on their own: 0.111, -0.167, 1: the median.
  EXPECT_NEAR(r.memory_median_slack(), 10.0 / 90, 1e-12);
}

}  // namespace
}  // namespace evoscale::service
