// The time half of load_model/trial_resource_model.h (core-seconds to a step) and
// CostModelAccuracy; the usage half is tested in trial_resource_model_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "load_model/trial_resource_model.h"

namespace evoscale::load_model {
namespace {

constexpr int64_t kFullSteps = 1000;
constexpr double kExponent = 0.6;

// A study whose trials cost core_seconds(s) = 2e-3 x nrounds x s^0.6 (times a per-trial
// machine speed of +-3% and +-0.5% per measurement) and peak at 50 MB + 2 MB x dim; the learning
// rate costs nothing. Each trial holds 1, 2 or 4 cores and reports every 50 steps.
class SyntheticStudy {
 public:
  explicit SyntheticStudy(uint32_t seed) : rng_(seed) {}

  static double CoreSeconds(const TrialParams& params, int64_t step) {
    return 2e-3 * params.at("nrounds") * std::pow(double(step), kExponent);
  }

  TrialParams Params() {
    std::uniform_real_distribution<double> log_nrounds(std::log(10.0), std::log(200.0));
    std::uniform_int_distribution<int> dim(4, 64);
    std::uniform_real_distribution<double> lr(1e-4, 1e-1);
    return {{"nrounds", std::round(std::exp(log_nrounds(rng_)))},
            {"dim", double(dim(rng_))},
            {"lr", lr(rng_)}};
  }

  // A run of `params` to `last_step` (stopped when that is before kFullSteps).
  TrialTelemetry Run(const TrialParams& params, int64_t last_step) {
    std::normal_distribution<double> trial_noise(0, 0.03), point_noise(0, 0.005);
    std::uniform_int_distribution<int> cores_index(0, 2);
    TrialTelemetry t;
    t.params = params;
    t.cores_held = double(1 << cores_index(rng_));
    t.stopped = last_step < kFullSteps;
    t.peak_memory_bytes = (50e6 + 2e6 * params.at("dim")) * (t.stopped ? 0.6 : 1.0);
    t.peak_cpu_cores = t.cores_held * 0.9;
    const double speed = std::exp(trial_noise(rng_));
    double elapsed = 0;
    for (int64_t step = 50; step <= last_step; step += 50) {
      const double e = CoreSeconds(params, step) / t.cores_held * speed *
                       std::exp(point_noise(rng_));
      elapsed = std::max(elapsed, e);
      t.curve.push_back({step, elapsed});
    }
    return t;
  }

  TrialTelemetry Finished() { return Run(Params(), kFullSteps); }
  TrialTelemetry Stopped() {
    std::uniform_int_distribution<int> stop(2, 10);  // at 100..500 steps
    return Run(Params(), 50 * stop(rng_));
  }

 private:
  std::mt19937 rng_;
};

// The median over `count` fresh candidates of |predicted - true| / true core-seconds of a full
// run (the truth without noise).
double HeldOutMedianError(const TrialResourceModel& model, SyntheticStudy& study, int count) {
  std::vector<double> errors;
  for (int i = 0; i < count; ++i) {
    const TrialParams p = study.Params();
    const double truth = SyntheticStudy::CoreSeconds(p, kFullSteps);
    errors.push_back(std::abs(model.PredictCoreSeconds(p, kFullSteps) - truth) / truth);
  }
  std::nth_element(errors.begin(), errors.begin() + count / 2, errors.end());
  return errors[count / 2];
}

TEST(TrialCostModelTest, NothingIsLearnedAboutTimeBeforeATrialWithACurve) {
  TrialResourceModel model;
  TrialTelemetry t;
  t.params = {{"nrounds", 10}};
  t.peak_memory_bytes = 1e8;
  ASSERT_TRUE(model.AddTrial(t).ok());
  const TrialResourceRequest r = model.Predict(t.params);
  EXPECT_TRUE(r.learned);
  EXPECT_FALSE(r.core_seconds_learned);
  EXPECT_EQ(r.core_seconds_to(100), 0);
  EXPECT_EQ(model.PredictCoreSeconds(t.params, 100), 0);
  EXPECT_EQ(model.step_exponent(), 1);
  EXPECT_EQ(model.num_timed_trials(), 0);
}

TEST(TrialCostModelTest, PredictsCoreSecondsOfAPowerLawInStepsAfter20Trials) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    SyntheticStudy study(seed);
    TrialResourceModel model;
    CostModelAccuracy accuracy;
    for (int id = 1; id <= 20; ++id) {
      const TrialTelemetry t = study.Finished();
      accuracy.RecordPrediction(id, model.Predict(t.params));
      ASSERT_TRUE(accuracy.RecordOutcome(id, t).ok());
      ASSERT_TRUE(model.AddTrial(t).ok());
    }
    EXPECT_NEAR(model.step_exponent(), kExponent, 0.01);
    // Predicted before each ran, from the ones before it: trials 2..20 (the first had none).
    const CostModelReport report = accuracy.Report();
    EXPECT_EQ(report.predicted_trials, 19);
    EXPECT_EQ(report.core_seconds_trials, 19);
    EXPECT_LT(report.core_seconds_median_abs_pct_error, 0.06);
    EXPECT_LT(HeldOutMedianError(model, study, 101), 0.03);
    const TrialResourceRequest r = model.Predict({{"nrounds", 50}, {"dim", 8}, {"lr", 0.01}});
    EXPECT_NE(r.core_seconds_explanation.find("nrounds"), std::string::npos)
        << r.core_seconds_explanation;
    EXPECT_EQ(r.core_seconds_explanation.find("lr"), std::string::npos)
        << r.core_seconds_explanation;
    // +-3% machine speed: the margin covers it, and no more than a few times over.
    EXPECT_GT(r.core_seconds_margin, 0.05);
    EXPECT_LT(r.core_seconds_margin, 0.25);
    EXPECT_NEAR(r.core_seconds_upper_to(kFullSteps),
                r.core_seconds_to(kFullSteps) * (1 + r.core_seconds_margin), 1e-9);
  }
}

TEST(TrialCostModelTest, StoppedTrialsCurvesTeachTheCostOfAWholeRun) {
  for (uint32_t seed : {4u, 5u, 6u}) {
    SCOPED_TRACE(seed);
    SyntheticStudy study(seed);
    TrialResourceModel model;
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(model.AddTrial(study.Stopped()).ok());
    EXPECT_EQ(model.num_timed_trials(), 12);
    EXPECT_EQ(model.num_usage_trials(), 0);
    EXPECT_NEAR(model.step_exponent(), kExponent, 0.02);
    // Extrapolated from at most half a run to a whole one.
    EXPECT_LT(HeldOutMedianError(model, study, 101), 0.05);
    // Their peaks are lower bounds: memory is still the default.
    const TrialResourceRequest r = model.Predict(study.Params());
    EXPECT_FALSE(r.learned);
    EXPECT_EQ(r.memory_bytes, int64_t{2} << 30);
  }
}

TEST(TrialCostModelTest, StoppedTrialsSharpenTheFitOfFewFinishedOnes) {
  double alone = 0, with_stopped = 0;
  for (uint32_t seed : {7u, 8u, 9u, 10u, 11u}) {
    SyntheticStudy study(seed);
    TrialResourceModel finished_only, both;
    for (int i = 0; i < 4; ++i) {
      const TrialTelemetry t = study.Finished();
      ASSERT_TRUE(finished_only.AddTrial(t).ok());
      ASSERT_TRUE(both.AddTrial(t).ok());
    }
    const TrialParams probe = {{"nrounds", 40}, {"dim", 60}, {"lr", 0.01}};
    const int64_t memory_before = both.Predict(probe).memory_bytes;
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(both.AddTrial(study.Stopped()).ok());
    // The stopped trials' smaller peaks change no memory request.
    EXPECT_EQ(both.Predict(probe).memory_bytes, memory_before);
    SyntheticStudy held_out(seed + 100), held_out_again(seed + 100);
    alone += HeldOutMedianError(finished_only, held_out, 101);
    with_stopped += HeldOutMedianError(both, held_out_again, 101);
  }
  EXPECT_LT(with_stopped, 0.5 * alone) << "with stopped " << with_stopped / 5 << ", alone "
                                       << alone / 5;
}

TEST(TrialCostModelTest, ClampsTheStepExponentToItsRange) {
  TrialResourceModel model;
  for (double nrounds : {10, 20, 40}) {
    TrialTelemetry t;
    t.params = {{"nrounds", nrounds}};
    for (int64_t step : {10, 20, 40, 80}) {
      t.curve.push_back({step, 1e-4 * nrounds * std::pow(double(step), 3.0)});
    }
    ASSERT_TRUE(model.AddTrial(t).ok());
  }
  EXPECT_DOUBLE_EQ(model.step_exponent(), 2.0);
}

TEST(TrialCostModelTest, OneTrialGivesItsOwnPowerLawWithTheFirstMargin) {
  TrialResourceModel model;
  TrialTelemetry t;
  t.params = {{"nrounds", 10}};
  t.cores_held = 2;
  t.curve = {{0, 0}, {100, 10}, {400, 20}};  // elapsed ~ step^0.5; step 0 teaches nothing
  ASSERT_TRUE(model.AddTrial(t).ok());
  const TrialResourceRequest r = model.Predict({{"nrounds", 99}});
  EXPECT_TRUE(r.core_seconds_learned);
  EXPECT_NEAR(r.step_exponent, 0.5, 1e-9);
  EXPECT_NEAR(r.core_seconds_to(400), 40, 1e-9);  // 2 cores x 20 s
  EXPECT_NEAR(r.core_seconds_to(1600), 80, 1e-9);
  EXPECT_DOUBLE_EQ(r.core_seconds_margin, 0.2);
  EXPECT_EQ(r.core_seconds_to(0), 0);
}

TEST(TrialCostModelTest, UnsetCoresHeldCountsAsOneCore) {
  TrialResourceModel model;
  TrialTelemetry t;
  t.curve = {{100, 30}};
  ASSERT_TRUE(model.AddTrial(t).ok());
  EXPECT_NEAR(model.PredictCoreSeconds({}, 100), 30, 1e-9);
}

// AddTrial and RecordOutcome both reject `t` with exactly `message`, and keep nothing of it.
void ExpectRejected(const TrialTelemetry& t, const std::string& message) {
  TrialResourceModel model;
  const absl::Status st = model.AddTrial(t);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), message);
  EXPECT_EQ(model.num_trials(), 0);
  CostModelAccuracy accuracy;
  TrialResourceRequest predicted;
  predicted.core_seconds_learned = true;
  accuracy.RecordPrediction(1, predicted);
  const absl::Status scored = accuracy.RecordOutcome(1, t);
  EXPECT_EQ(scored.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scored.message(), message);
  EXPECT_EQ(accuracy.Report().predicted_trials, 0);
  EXPECT_EQ(accuracy.pending(), 1);
}

TEST(TrialCostModelTest, RejectsANegativeElapsedTime) {
  TrialTelemetry t;
  t.curve = {{10, 1}, {20, -1}};
  ExpectRejected(t, "trial telemetry: curve[1].elapsed_seconds -1 must be finite and >= 0");
}

TEST(TrialCostModelTest, RejectsANanElapsedTime) {
  TrialTelemetry t;
  t.curve = {{10, std::nan("")}};
  ExpectRejected(t, "trial telemetry: curve[0].elapsed_seconds nan must be finite and >= 0");
}

TEST(TrialCostModelTest, RejectsAnInfiniteElapsedTime) {
  TrialTelemetry t;
  t.curve = {{10, std::numeric_limits<double>::infinity()}};
  ExpectRejected(t, "trial telemetry: curve[0].elapsed_seconds inf must be finite and >= 0");
}

TEST(TrialCostModelTest, RejectsElapsedTimeThatGoesDownAsStepsGoUp) {
  TrialTelemetry t;
  t.curve = {{10, 1}, {20, 2}, {30, 1.5}};
  ExpectRejected(t, "trial telemetry: curve[2].elapsed_seconds 1.5 at step 30 is below 2 at step 20");
}

TEST(TrialCostModelTest, RejectsStepsThatGoDown) {
  TrialTelemetry t;
  t.curve = {{20, 1}, {10, 2}};
  ExpectRejected(t, "trial telemetry: curve[1].step 10 is below curve[0].step 20");
}

TEST(TrialCostModelTest, RejectsANegativeStep) {
  TrialTelemetry t;
  t.curve = {{-5, 1}};
  ExpectRejected(t, "trial telemetry: curve[0].step -5 must be >= 0");
}

TEST(TrialCostModelTest, RejectsNonFiniteCoresHeld) {
  TrialTelemetry t;
  t.cores_held = std::nan("");
  ExpectRejected(t, "trial telemetry: cores_held nan must be finite and >= 0");
}

TEST(TrialCostModelTest, AcceptsARepeatedStepWhoseTimeDoesNotGoDown) {
  TrialResourceModel model;
  TrialTelemetry t;
  t.curve = {{10, 1}, {10, 1}, {10, 1.2}, {20, 2}};
  EXPECT_TRUE(model.AddTrial(t).ok());
}

// A prediction of `memory_bytes` and core-seconds = step (exponent 1).
TrialResourceRequest Predicted(int64_t memory_bytes, bool memory_learned, bool time_learned) {
  TrialResourceRequest r;
  r.memory_bytes = memory_bytes;
  r.learned = memory_learned;
  r.core_seconds_coefficient = 1;
  r.step_exponent = 1;
  r.core_seconds_learned = time_learned;
  return r;
}

// A trial that peaked at `peak` and reached `step` after `elapsed` seconds on `cores`.
TrialTelemetry Ended(double peak, int64_t step, double elapsed, double cores, bool stopped) {
  TrialTelemetry t;
  t.peak_memory_bytes = peak;
  t.curve = {{step / 2, elapsed / 2}, {step, elapsed}};
  t.cores_held = cores;
  t.stopped = stopped;
  return t;
}

TEST(CostModelAccuracyTest, CountsUnderPredictionsAndTakesMedians) {
  CostModelAccuracy accuracy;
  struct Case {
    int64_t id;
    std::optional<TrialResourceRequest> predicted;
    TrialTelemetry ended;
  };
  const std::vector<Case> cases = {
      // APE 2/12; slack 10/90.
      {1, Predicted(100, true, true), Ended(90, 10, 12, 1, false)},
      // Under-predicted; APE 0; slack -10/110.
      {2, Predicted(100, true, true), Ended(110, 10, 10, 1, false)},
      // A peak at the request is not above it; APE |20 - 40| / 40; slack 0.
      {3, Predicted(100, true, true), Ended(100, 20, 20, 2, false)},
      // Stopped above its request: under-predicted, no slack; APE 0.
      {4, Predicted(100, true, true), Ended(120, 5, 5, 1, true)},
      // A prediction that learned nothing is not recorded.
      {5, Predicted(100, false, false), Ended(500, 10, 99, 1, false)},
      // No prediction at all.
      {6, std::nullopt, Ended(500, 10, 99, 1, false)},
      // No measured peak: time only, APE 1.
      {7, Predicted(100, true, true), Ended(0, 10, 5, 1, false)},
      // Memory only: slack 1.
      {8, Predicted(100, true, false), Ended(50, 10, 99, 1, false)},
  };
  for (const Case& c : cases) {
    if (c.predicted) accuracy.RecordPrediction(c.id, *c.predicted);
  }
  // A later prediction (a retry) does not replace the first.
  accuracy.RecordPrediction(2, Predicted(1000, true, true));
  EXPECT_EQ(accuracy.pending(), 6);
  for (const Case& c : cases) ASSERT_TRUE(accuracy.RecordOutcome(c.id, c.ended).ok());
  EXPECT_EQ(accuracy.pending(), 0);
  const CostModelReport report = accuracy.Report();
  EXPECT_EQ(report.predicted_trials, 6);
  EXPECT_EQ(report.core_seconds_trials, 5);
  EXPECT_DOUBLE_EQ(report.core_seconds_median_abs_pct_error, 2.0 / 12);  // of 0, 0, 1/6, 1/2, 1
  EXPECT_EQ(report.memory_trials, 5);
  EXPECT_EQ(report.memory_under_predictions, 2);
  EXPECT_DOUBLE_EQ(report.memory_median_slack, (0 + 10.0 / 90) / 2);  // of -1/11, 0, 1/9, 1
  // Ended again: nothing pending, nothing counted twice.
  ASSERT_TRUE(accuracy.RecordOutcome(1, cases[0].ended).ok());
  EXPECT_EQ(accuracy.Report().predicted_trials, 6);
}

TEST(CostModelAccuracyTest, ReportsZerosBeforeAnyTrialEnded) {
  const CostModelReport report = CostModelAccuracy().Report();
  EXPECT_EQ(report.predicted_trials, 0);
  EXPECT_EQ(report.core_seconds_median_abs_pct_error, 0);
  EXPECT_EQ(report.memory_under_predictions, 0);
  EXPECT_EQ(report.memory_median_slack, 0);
}

}  // namespace
}  // namespace evoscale::load_model
