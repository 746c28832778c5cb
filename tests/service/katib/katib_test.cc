// Tests service/katib/: the Katib experiment's conversion (katib_converter.cc) and the
// Suggestion calls over a real study core on a temporary SQLite database
// (katib_suggestion.cc). The wire contract end to end is tests/e2e/katib_e2e_test.cc.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "katib/v1beta1/suggestion.pb.h"
#include "service/common/clock.h"
#include "service/katib/katib_converter.h"
#include "service/katib/katib_suggestion.h"
#include "service/store/store.h"
#include "service/study/study_core.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

namespace katib = ::api::v1::beta1;
using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

katib::ParameterSpec* AddParameter(katib::Experiment* e, const std::string& name,
                                   katib::ParameterType type) {
  katib::ParameterSpec* p = e->mutable_spec()->mutable_parameter_specs()->add_parameters();
  p->set_name(name);
  p->set_parameter_type(type);
  return p;
}

katib::Experiment Experiment() {
  katib::Experiment e;
  e.set_name("mnist");
  katib::ParameterSpec* lr = AddParameter(&e, "lr", katib::DOUBLE);
  lr->mutable_feasible_space()->set_min("0.001");
  lr->mutable_feasible_space()->set_max("0.1");
  lr->mutable_feasible_space()->set_distribution(katib::LOG_UNIFORM);
  katib::ParameterSpec* dropout = AddParameter(&e, "dropout", katib::DOUBLE);
  dropout->mutable_feasible_space()->set_min("0.1");
  dropout->mutable_feasible_space()->set_max("0.5");
  dropout->mutable_feasible_space()->set_step("0.1");
  katib::ParameterSpec* batch = AddParameter(&e, "batch", katib::INT);
  batch->mutable_feasible_space()->set_min("16");
  batch->mutable_feasible_space()->set_max("100");
  batch->mutable_feasible_space()->set_step("16");
  katib::ParameterSpec* layers = AddParameter(&e, "layers", katib::INT);
  layers->mutable_feasible_space()->set_min("1");
  layers->mutable_feasible_space()->set_max("4");
  katib::ParameterSpec* momentum = AddParameter(&e, "momentum", katib::DISCRETE);
  for (const char* v : {"0.9", "0.50", "0.99"}) momentum->mutable_feasible_space()->add_list(v);
  katib::ParameterSpec* opt = AddParameter(&e, "optimizer", katib::CATEGORICAL);
  for (const char* v : {"sgd", "adam"}) opt->mutable_feasible_space()->add_list(v);
  e.mutable_spec()->mutable_objective()->set_type(katib::MAXIMIZE);
  e.mutable_spec()->mutable_objective()->set_objective_metric_name("accuracy");
  e.mutable_spec()->mutable_objective()->set_goal(0.99);
  e.mutable_spec()->mutable_objective()->add_additional_metric_names("loss");
  e.mutable_spec()->mutable_algorithm()->set_algorithm_name("evoscale-genetic");
  katib::AlgorithmSetting* seed = e.mutable_spec()->mutable_algorithm()->add_algorithm_settings();
  seed->set_name("random_state");
  seed->set_value("42");
  return e;
}

// Parameter `i` of `e`, and its feasible space.
katib::ParameterSpec* Parameter(katib::Experiment* e, int i) {
  return e->mutable_spec()->mutable_parameter_specs()->mutable_parameters(i);
}
katib::FeasibleSpace* Space(katib::Experiment* e, int i) {
  return Parameter(e, i)->mutable_feasible_space();
}

TEST(KatibExperimentTest, MapsEachKatibParameterTypeOntoTheStudySpec) {
  absl::StatusOr<KatibExperiment> x = KatibExperiment::FromProto(Experiment());
  ASSERT_TRUE(x.ok()) << x.status();
  const v1::Study& study = x->study();
  EXPECT_EQ(study.display_name(), "katib/mnist");
  const v1::StudySpec& spec = study.spec();
  ASSERT_EQ(spec.parameters_size(), 6);
  EXPECT_EQ(spec.parameters(0).double_spec().min(), 0.001);
  EXPECT_EQ(spec.parameters(0).scale(), v1::ParameterSpec::LOG);
  // A step means only these values: 0.1 .. 0.5 by 0.1, as written (0.3, not 0.30000000000000004).
  EXPECT_THAT(spec.parameters(1).discrete_spec().values(), ElementsAre(0.1, 0.2, 0.3, 0.4, 0.5));
  EXPECT_THAT(spec.parameters(2).discrete_spec().values(), ElementsAre(16, 32, 48, 64, 80, 96));
  EXPECT_EQ(spec.parameters(3).integer_spec().max(), 4);
  EXPECT_THAT(spec.parameters(4).discrete_spec().values(), ElementsAre(0.9, 0.5, 0.99));
  EXPECT_THAT(spec.parameters(5).categorical_spec().values(), ElementsAre("sgd", "adam"));
  ASSERT_EQ(spec.metrics_size(), 1);  // additional metrics are not objectives
  EXPECT_EQ(spec.metrics(0).name(), "accuracy");
  EXPECT_EQ(spec.metrics(0).goal(), v1::MetricSpec::MAXIMIZE);
  EXPECT_EQ(spec.algorithm().algorithm(), v1::AlgorithmSpec::GENETIC);
  EXPECT_EQ(spec.algorithm().seed(), 42u);
  EXPECT_TRUE(spec.algorithm().settings().empty());
  EXPECT_EQ(spec.max_trials(), 0);  // Katib keeps the budget
  EXPECT_EQ(study.metadata().at("katib.experiment"), "mnist");
  EXPECT_EQ(study.metadata().at("katib.objective_goal"), "0.99");
  EXPECT_EQ(study.metadata().at("katib.additional_metric_names"), "loss");
}

TEST(KatibExperimentTest, WritesValuesAsKatibWroteThemAndReadsThemBack) {
  absl::StatusOr<KatibExperiment> x = KatibExperiment::FromProto(Experiment());
  ASSERT_TRUE(x.ok()) << x.status();
  v1::Trial trial;
  trial.set_name("studies/1/trials/1");
  auto add = [&](const std::string& name) {
    v1::Parameter* p = trial.add_parameters();
    p->set_name(name);
    return p;
  };
  add("optimizer")->set_string_value("adam");
  add("lr")->set_double_value(0.001);
  add("dropout")->set_double_value(0.3);
  add("batch")->set_double_value(48);
  add("layers")->set_int_value(3);
  add("momentum")->set_double_value(0.5);
  absl::StatusOr<std::vector<katib::ParameterAssignment>> a = x->ToAssignments(trial);
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<std::string> written;
  for (const auto& assignment : *a) written.push_back(assignment.name() + "=" + assignment.value());
  EXPECT_THAT(written, ElementsAre("lr=0.001", "dropout=0.3", "batch=48", "layers=3",
                                   "momentum=0.50", "optimizer=adam"));

  google::protobuf::RepeatedPtrField<katib::ParameterAssignment> back(a->begin(), a->end());
  absl::StatusOr<google::protobuf::RepeatedPtrField<v1::Parameter>> parameters =
      x->ToParameters(back, "assignments");
  ASSERT_TRUE(parameters.ok()) << parameters.status();
  ASSERT_EQ(parameters->size(), 6);
  EXPECT_EQ((*parameters)[0].double_value(), 0.001);
  EXPECT_EQ((*parameters)[3].int_value(), 3);
  EXPECT_EQ((*parameters)[4].double_value(), 0.5);
  EXPECT_EQ((*parameters)[5].string_value(), "adam");

  google::protobuf::RepeatedPtrField<katib::ParameterAssignment> unknown;
  unknown.Add()->set_name("width");
  unknown[0].set_value("3");
  EXPECT_THAT(x->ToParameters(unknown, "assignments").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "assignments[0].name: \"width\" is not a parameter of \"mnist\""));
}

TEST(KatibExperimentTest, RejectsWhatEvoscaleCannotRunNamingKatibsField) {
  struct Case {
    std::function<void(katib::Experiment*)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](katib::Experiment* e) { e->clear_name(); }, "experiment.name: must not be empty"},
      {[](katib::Experiment* e) { Space(e, 0)->set_min("tiny"); },
       "experiment.spec.parameter_specs.parameters[0].feasible_space.min: \"tiny\" is not a "
       "finite number"},
      {[](katib::Experiment* e) { Space(e, 3)->set_step("0.5"); },
       "experiment.spec.parameter_specs.parameters[3].feasible_space.step: \"0.5\" is not an "
       "integer"},
      {[](katib::Experiment* e) { Space(e, 1)->set_step("0.00001"); },
       "experiment.spec.parameter_specs.parameters[1].feasible_space.step: 1e-05 makes 40001 "
       "values from min to max; at most 10000"},
      {[](katib::Experiment* e) { Space(e, 4)->add_list("0.9"); },
       "experiment.spec.parameter_specs.parameters[4].feasible_space.list: duplicate value 0.9"},
      {[](katib::Experiment* e) { Space(e, 0)->set_min("0"); },
       "experiment.spec.parameter_specs.parameters[0].feasible_space: min 0 must be > 0 for a "
       "log scale"},
      {[](katib::Experiment* e) { Space(e, 0)->set_distribution(katib::LOG_NORMAL); },
       "experiment.spec.parameter_specs.parameters[0].feasible_space.distribution: LOG_NORMAL "
       "is not supported by evoscale"},
      {[](katib::Experiment* e) { Parameter(e, 5)->set_parameter_type(katib::UNKNOWN_TYPE); },
       "experiment.spec.parameter_specs.parameters[5].parameter_type: must be DOUBLE, INT, "
       "DISCRETE or CATEGORICAL"},
      {[](katib::Experiment* e) {
         e->mutable_spec()->mutable_objective()->set_type(katib::UNKNOWN);
       },
       "experiment.spec.objective.type: must be MINIMIZE or MAXIMIZE"},
      {[](katib::Experiment* e) {
         katib::AlgorithmSetting* s =
             e->mutable_spec()->mutable_algorithm()->add_algorithm_settings();
         s->set_name("crossover_rate");
         s->set_value("1.5");
       },
       "experiment.spec.algorithm.algorithm_settings[\"crossover_rate\"]: must be a number in "
       "[0, 1], got \"1.5\""},
      {[](katib::Experiment* e) {
         e->mutable_spec()->mutable_algorithm()->set_algorithm_name("bayesianoptimization");
       },
       "experiment.spec.algorithm.algorithm_name: \"bayesianoptimization\" is not an evoscale "
       "algorithm; evoscaled serves evoscale-genetic, evoscale-regularized-evolution, "
       "evoscale-nsga2, evoscale-random"},
  };
  for (const Case& c : cases) {
    katib::Experiment e = Experiment();
    c.change(&e);
    EXPECT_THAT(KatibExperiment::FromProto(e).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

TEST(KatibExperimentTest, TrialNamesAreKubernetesNamesOfAtMost63Characters) {
  katib::Experiment e = Experiment();
  e.set_name(std::string(60, 'x'));
  absl::StatusOr<KatibExperiment> x = KatibExperiment::FromProto(e);
  ASSERT_TRUE(x.ok()) << x.status();
  v1::Study study;
  study.mutable_create_time()->set_seconds(1750000000);
  const std::string name = x->TrialName(study, 12345);
  EXPECT_LE(name.size(), 63u);
  EXPECT_THAT(name, ::testing::MatchesRegex("x+-[0-9a-z]{5}-12345"));
  v1::Study later = study;
  later.mutable_create_time()->set_nanos(1);
  EXPECT_NE(x->TrialName(later, 12345), name);  // another study: other names
}

TEST(KatibExperimentTest, MeasurementNeedsTheObjectiveAsANumber) {
  absl::StatusOr<KatibExperiment> x = KatibExperiment::FromProto(Experiment());
  ASSERT_TRUE(x.ok()) << x.status();
  katib::TrialStatus status;
  status.set_start_time("2025-06-01T10:00:00Z");
  status.set_completion_time("2025-06-01T10:01:30Z");
  auto add = [&](const std::string& name, const std::string& value) {
    katib::Metric* m = status.mutable_observation()->add_metrics();
    m->set_name(name);
    m->set_value(value);
  };
  add("loss", "unavailable");
  EXPECT_THAT(x->ToMeasurement(status).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Katib's observation has no objective metric \"accuracy\""));
  add("accuracy", "0.93");
  absl::StatusOr<v1::Measurement> m = x->ToMeasurement(status);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->metrics().at("accuracy"), 0.93);
  EXPECT_FALSE(m->metrics().contains("loss"));  // "unavailable" is no number
  EXPECT_EQ(m->elapsed_seconds(), 90);
}

// KatibSuggestion over a real study core (SQLite in a temp dir).
class KatibSuggestionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(dir_.File("evoscale.db"), Durability::kProcessCrash);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    absl::StatusOr<std::unique_ptr<StudyCore>> core = StudyCore::Create(store_.get(), &clock_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
    katib_ = std::make_unique<KatibSuggestion>(core_.get());
  }

  katib::GetSuggestionsRequest Request(int count, int total) {
    katib::GetSuggestionsRequest req;
    *req.mutable_experiment() = Experiment();
    for (const katib::Trial& t : trials_) *req.add_trials() = t;
    req.set_current_request_number(count);
    req.set_total_request_number(total);
    return req;
  }

  // Asks, and keeps the answer as Katib's trials (CREATED).
  katib::GetSuggestionsReply Ask(int count, int total) {
    absl::StatusOr<katib::GetSuggestionsReply> reply =
        katib_->GetSuggestions(Request(count, total));
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return {};
    for (const auto& a : reply->parameter_assignments()) {
      katib::Trial& t = trials_.emplace_back();
      t.set_name(a.trial_name());
      *t.mutable_spec()->mutable_parameter_assignments()->mutable_assignments() = a.assignments();
    }
    return *reply;
  }

  void End(int index, katib::TrialStatus::TrialConditionType condition,
           const std::string& accuracy) {
    trials_[index].mutable_status()->set_condition(condition);
    if (!accuracy.empty()) {
      katib::Metric* m = trials_[index].mutable_status()->mutable_observation()->add_metrics();
      m->set_name("accuracy");
      m->set_value(accuracy);
    }
  }

  std::vector<v1::Trial> StudyTrials() {
    v1::ListStudiesRequest list;
    absl::StatusOr<v1::ListStudiesResponse> studies = core_->Call(list);
    EXPECT_TRUE(studies.ok() && studies->studies_size() == 1);
    if (!studies.ok() || studies->studies_size() != 1) return {};
    v1::ListTrialsRequest req;
    req.set_parent(studies->studies(0).name());
    absl::StatusOr<v1::ListTrialsResponse> trials = core_->Call(req);
    EXPECT_TRUE(trials.ok()) << trials.status();
    return trials.ok() ? std::vector<v1::Trial>(trials->trials().begin(), trials->trials().end())
                       : std::vector<v1::Trial>{};
  }

  ScopedTempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1750000000)};
  std::unique_ptr<Store> store_;
  std::unique_ptr<StudyCore> core_;
  std::unique_ptr<KatibSuggestion> katib_;
  std::vector<katib::Trial> trials_;
};

TEST_F(KatibSuggestionTest, EndedTrialsBecomeTheStudysFinalStatesOnce) {
  Ask(4, 4);
  End(0, katib::TrialStatus::SUCCEEDED, "0.9");
  End(1, katib::TrialStatus::EARLYSTOPPED, "0.5");
  End(2, katib::TrialStatus::KILLED, "");
  End(3, katib::TrialStatus::SUCCEEDED, "unavailable");
  Ask(1, 5);
  Ask(1, 6);  // the same ended trials again: recorded already
  std::vector<v1::Trial> trials = StudyTrials();
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[0].state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(trials[0].final_measurement().metrics().at("accuracy"), 0.9);
  EXPECT_EQ(trials[1].state(), v1::Trial::STOPPED);
  EXPECT_EQ(trials[2].state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(trials[2].infeasible_reason(), "Katib reported the trial KILLED");
  EXPECT_EQ(trials[3].state(), v1::Trial::INFEASIBLE);
  EXPECT_THAT(trials[3].infeasible_reason(),
              HasSubstr("SUCCEEDED, but objective metric \"accuracy\" is \"unavailable\""));
  EXPECT_EQ(trials[4].state(), v1::Trial::ACTIVE);
  EXPECT_EQ(trials[5].state(), v1::Trial::ACTIVE);
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].metadata().at("katib.trial"), trials_[i].name());
  }
}

TEST_F(KatibSuggestionTest, ATrialSuggestedButNeverAnsweredGoesToTheNextCall) {
  Ask(2, 2);
  // evoscaled stopped after SuggestTrials and before the answer: a trial without a Katib name.
  v1::ListStudiesRequest list;
  absl::StatusOr<v1::ListStudiesResponse> studies = core_->Call(list);
  ASSERT_TRUE(studies.ok() && studies->studies_size() == 1);
  v1::SuggestTrialsRequest suggest;
  suggest.set_parent(studies->studies(0).name());
  suggest.set_suggestion_count(1);
  suggest.set_client_id("katib-3");
  absl::StatusOr<v1::SuggestTrialsResponse> orphan = core_->Call(suggest);
  ASSERT_TRUE(orphan.ok()) << orphan.status();

  katib::GetSuggestionsReply reply = Ask(2, 4);
  ASSERT_EQ(reply.parameter_assignments_size(), 2);
  EXPECT_THAT(reply.parameter_assignments(0).trial_name(), ::testing::EndsWith("-3"));
  EXPECT_EQ(StudyTrials().size(), 4u);  // exactly what Katib asked for
}

TEST_F(KatibSuggestionTest, RejectsRequestNumbersKatibNeverSends) {
  EXPECT_THAT(katib_->GetSuggestions(Request(0, 0)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "current_request_number: 0 must be in [1, 1000]"));
  EXPECT_THAT(katib_->GetSuggestions(Request(3, 2)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("total_request_number: 2 must be >= current_request_number 3")));
}

}  // namespace
}  // namespace evoscale::service
