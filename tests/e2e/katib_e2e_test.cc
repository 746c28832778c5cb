// End-to-end: the real evoscaled with --katib-grpc, driven through Katib's wire contract (the
// generated stubs of proto/katib/v1beta1/suggestion.proto, package api.v1.beta1) the way
// Katib's suggestion client drives a suggestion service: every trial of the experiment on
// every call, current and total request numbers, trial names taken from the answer.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "katib/v1beta1/suggestion.grpc.pb.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/test_support.h"

namespace evoscale {
namespace {

namespace katib = ::api::v1::beta1;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::StatusIs;
using ::evoscale::testing::TempDir;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

constexpr int kTrials = 30;
constexpr int kParallel = 3;

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

absl::Status ToAbsl(const grpc::Status& st) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
}

void AddParameter(katib::ExperimentSpec* spec, const std::string& name, katib::ParameterType type,
                  const std::string& min, const std::string& max, const std::string& step = "",
                  std::vector<std::string> list = {}) {
  katib::ParameterSpec* p = spec->mutable_parameter_specs()->add_parameters();
  p->set_name(name);
  p->set_parameter_type(type);
  p->mutable_feasible_space()->set_min(min);
  p->mutable_feasible_space()->set_max(max);
  p->mutable_feasible_space()->set_step(step);
  for (std::string& v : list) p->mutable_feasible_space()->add_list(std::move(v));
}

// A CTR model's tuning as a Katib experiment: double (log-uniform), double with a step, int,
// int with a step, discrete and categorical parameters; minimize loss, also record auc.
katib::Experiment CtrExperiment(const std::string& name, const std::string& algorithm,
                                std::map<std::string, std::string> settings) {
  katib::Experiment e;
  e.set_name(name);
  katib::ExperimentSpec* spec = e.mutable_spec();
  AddParameter(spec, "lr", katib::DOUBLE, "0.0001", "0.1");
  spec->mutable_parameter_specs()
      ->mutable_parameters(0)
      ->mutable_feasible_space()
      ->set_distribution(katib::LOG_UNIFORM);
  AddParameter(spec, "dropout", katib::DOUBLE, "0", "0.5", "0.05");
  AddParameter(spec, "layers", katib::INT, "1", "8");
  AddParameter(spec, "batch", katib::INT, "32", "512", "32");
  AddParameter(spec, "embedding_dim", katib::DISCRETE, "", "", "", {"8", "16", "32", "64"});
  AddParameter(spec, "optimizer", katib::CATEGORICAL, "", "", "", {"sgd", "adam", "adagrad"});
  spec->mutable_objective()->set_type(katib::MINIMIZE);
  spec->mutable_objective()->set_objective_metric_name("loss");
  spec->mutable_objective()->add_additional_metric_names("auc");
  spec->mutable_algorithm()->set_algorithm_name(algorithm);
  for (const auto& [key, value] : settings) {
    katib::AlgorithmSetting* s = spec->mutable_algorithm()->add_algorithm_settings();
    s->set_name(key);
    s->set_value(value);
  }
  spec->set_parallel_trial_count(kParallel);
  spec->set_max_trial_count(kTrials);
  return e;
}

std::map<std::string, std::string> Assignments(const katib::Trial& t) {
  std::map<std::string, std::string> out;
  for (const auto& a : t.spec().parameter_assignments().assignments()) out[a.name()] = a.value();
  return out;
}

double Number(const std::string& text) {
  double x = NAN;
  EXPECT_TRUE(absl::SimpleAtod(text, &x)) << text;
  return x;
}

// The trial's result: a deterministic function of its assignments, best (0) at lr 10^-2.5,
// dropout 0.2, 4 layers, batch 256, embedding_dim 32, adam.
double Loss(const std::map<std::string, std::string>& a) {
  const std::map<std::string, double> optimizer_cost = {
      {"sgd", 0.5}, {"adam", 0}, {"adagrad", 0.25}};
  return 0.5 * std::pow(std::log10(Number(a.at("lr"))) + 2.5, 2) +
         4 * std::pow(Number(a.at("dropout")) - 0.2, 2) +
         std::pow((Number(a.at("layers")) - 4) / 4, 2) +
         std::pow((Number(a.at("batch")) - 256) / 256, 2) +
         0.1 * std::pow(std::log2(Number(a.at("embedding_dim"))) - 5, 2) +
         optimizer_cost.at(a.at("optimizer"));
}

// Whether `value` lies on the grid min, min + step, ... <= max.
bool OnGrid(double value, double min, double max, double step) {
  const double k = (value - min) / step;
  return value >= min - 1e-12 && value <= max + 1e-12 && std::abs(k - std::round(k)) < 1e-9;
}

// Every assignment of `t` lies in CtrExperiment's feasible space, written as Katib reads it.
void ExpectFeasible(const katib::Trial& t) {
  const std::map<std::string, std::string> a = Assignments(t);
  ASSERT_EQ(a.size(), 6u) << t.ShortDebugString();
  const double lr = Number(a.at("lr"));
  EXPECT_TRUE(lr >= 1e-4 && lr <= 0.1) << a.at("lr");
  EXPECT_TRUE(OnGrid(Number(a.at("dropout")), 0, 0.5, 0.05)) << a.at("dropout");
  int64_t layers = 0, batch = 0;
  EXPECT_TRUE(absl::SimpleAtoi(a.at("layers"), &layers) && layers >= 1 && layers <= 8)
      << a.at("layers");
  EXPECT_TRUE(absl::SimpleAtoi(a.at("batch"), &batch) && OnGrid(batch, 32, 512, 32))
      << a.at("batch");
  EXPECT_THAT((std::vector<std::string>{"8", "16", "32", "64"}),
              ::testing::Contains(a.at("embedding_dim")));
  EXPECT_THAT((std::vector<std::string>{"sgd", "adam", "adagrad"}),
              ::testing::Contains(a.at("optimizer")));
}

// Katib's controller for one experiment, as this test plays it: it asks for suggestions the
// way Katib's suggestion client does (the experiment and every one of its trials on every
// call, with current and total request numbers), creates the trials it is answered under the
// answer's names, runs them `parallel` at a time and reports how each ended.
class KatibController {
 public:
  explicit KatibController(katib::Experiment experiment) : experiment_(std::move(experiment)) {}

  katib::GetSuggestionsRequest Request(int count) const {
    katib::GetSuggestionsRequest req;
    *req.mutable_experiment() = experiment_;
    for (const katib::Trial& t : trials_) *req.add_trials() = t;
    req.set_current_request_number(count);
    req.set_total_request_number(requested_ + count);
    return req;
  }

  // GetSuggestions for `count` trials. With `deliver`, the trials are created (CREATED);
  // without, the answer is lost on its way, as when Katib's call times out.
  absl::StatusOr<katib::GetSuggestionsReply> Ask(katib::Suggestion::Stub* stub, int count,
                                                 bool deliver = true) {
    katib::GetSuggestionsRequest req = Request(count);
    katib::GetSuggestionsReply reply;
    grpc::Status st = stub->GetSuggestions(Ctx().get(), req, &reply);
    if (!st.ok()) return ToAbsl(st);
    last_request_ = std::move(req);
    if (!deliver) return reply;
    requested_ += count;
    for (const auto& assignment : reply.parameter_assignments()) {
      katib::Trial& t = trials_.emplace_back();
      t.set_name(assignment.trial_name());
      *t.mutable_spec()->mutable_objective() = experiment_.spec().objective();
      *t.mutable_spec()->mutable_parameter_assignments()->mutable_assignments() =
          assignment.assignments();
      t.mutable_status()->set_condition(katib::TrialStatus::CREATED);
    }
    return reply;
  }

  // The oldest running trial ends (SUCCEEDED with its loss and auc, or FAILED); the created
  // ones start running.
  void Step(bool fail = false) {
    for (katib::Trial& t : trials_) {
      if (t.status().condition() != katib::TrialStatus::RUNNING) continue;
      t.mutable_status()->set_completion_time(Time(++clock_));
      if (fail) {
        t.mutable_status()->set_condition(katib::TrialStatus::FAILED);
        break;
      }
      t.mutable_status()->set_condition(katib::TrialStatus::SUCCEEDED);
      const double loss = Loss(Assignments(t));
      for (const auto& [name, value] :
           {std::pair{"loss", loss}, std::pair{"auc", 1 / (1 + loss)}}) {
        katib::Metric* m = t.mutable_status()->mutable_observation()->add_metrics();
        m->set_name(name);
        m->set_value(absl::StrFormat("%.17g", value));
      }
      break;
    }
    for (katib::Trial& t : trials_) {
      if (t.status().condition() != katib::TrialStatus::CREATED) continue;
      t.mutable_status()->set_condition(katib::TrialStatus::RUNNING);
      t.mutable_status()->set_start_time(Time(++clock_));
    }
  }

  // How many trials more Katib asks for now: free parallel slots, within the budget.
  int Wanted() const { return std::min(kParallel - Unfinished(), kTrials - requested_); }
  int requested() const { return requested_; }
  int Unfinished() const {
    return static_cast<int>(std::count_if(trials_.begin(), trials_.end(), [](const auto& t) {
      return t.status().condition() == katib::TrialStatus::CREATED ||
             t.status().condition() == katib::TrialStatus::RUNNING;
    }));
  }
  int Finished() const { return static_cast<int>(trials_.size()) - Unfinished(); }
  const std::vector<katib::Trial>& trials() const { return trials_; }
  // The trials as Katib sent them in its last call.
  const katib::GetSuggestionsRequest& last_request() const { return last_request_; }

  // The lowest loss Katib observed.
  double BestLoss() const {
    double best = INFINITY;
    for (const katib::Trial& t : trials_) {
      for (const katib::Metric& m : t.status().observation().metrics()) {
        if (m.name() == "loss") best = std::min(best, Number(m.value()));
      }
    }
    return best;
  }

 private:
  static std::string Time(int second) {
    return absl::FormatTime(absl::RFC3339_sec, absl::FromUnixSeconds(1750000000 + second),
                            absl::UTCTimeZone());
  }

  const katib::Experiment experiment_;
  std::vector<katib::Trial> trials_;
  int requested_ = 0;  // Katib's Suggestion.Spec.Requests
  int clock_ = 0;
  katib::GetSuggestionsRequest last_request_;
};

class KatibE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.path() + "/evoscale.db";
    Restart();
  }

  void Restart() {
    server_.reset();
    auto p = EvoscaledProcess::Start(db_, {"--katib-grpc", "127.0.0.1:0"});
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
    ASSERT_FALSE(server_->katib_address().empty());
    katib_ = katib::Suggestion::NewStub(
        grpc::CreateChannel(server_->katib_address(), grpc::InsecureChannelCredentials()));
    studies_ = server_->NewStub();
  }

  // Plays Katib through a whole experiment: ask, run, report, until kTrials were asked for.
  // Checks each answer (exactly as many as asked, every trial_name set and new). `between`
  // runs after each step.
  void RunExperiment(KatibController* katib,
                     const std::function<void(KatibController*)>& between = nullptr) {
    std::set<std::string> names;
    while (katib->requested() < kTrials) {
      if (const int wanted = katib->Wanted(); wanted > 0) {
        absl::StatusOr<katib::GetSuggestionsReply> reply = katib->Ask(katib_.get(), wanted);
        ASSERT_TRUE(reply.ok()) << reply.status();
        ASSERT_EQ(reply->parameter_assignments_size(), wanted);
        for (const auto& a : reply->parameter_assignments()) {
          EXPECT_FALSE(a.trial_name().empty());
          EXPECT_TRUE(names.insert(a.trial_name()).second) << "repeated: " << a.trial_name();
        }
      }
      katib->Step(/*fail=*/katib->Finished() == 4);  // Katib's fifth trial to end fails
      if (between) between(katib);
    }
    while (katib->Unfinished() > 0) katib->Step();  // Katib asks no more, its trials run on
  }

  std::vector<v1::Study> Studies() {
    v1::ListStudiesRequest req;
    req.set_page_size(1000);
    v1::ListStudiesResponse resp;
    grpc::Status st = studies_->ListStudies(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return {resp.studies().begin(), resp.studies().end()};
  }

  std::vector<v1::Trial> Trials(const std::string& study) {
    v1::ListTrialsRequest req;
    req.set_parent(study);
    req.set_page_size(1000);
    v1::ListTrialsResponse resp;
    grpc::Status st = studies_->ListTrials(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return {resp.trials().begin(), resp.trials().end()};
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<EvoscaledProcess> server_;
  std::unique_ptr<katib::Suggestion::Stub> katib_;
  std::unique_ptr<v1::StudyService::Stub> studies_;
};

TEST_F(KatibE2eTest, GeneticExperimentRunsThirtyKatibTrialsAcrossAKillAndBeatsRandomSearch) {
  KatibController katib(CtrExperiment("ctr-tuning", "evoscale-genetic",
                                      {{"random_state", "7"}, {"population_size", "8"}}));
  bool restarted = false;
  RunExperiment(&katib, [&](KatibController* k) {
    if (restarted || k->requested() < 12 || k->Wanted() == 0) return;
    restarted = true;
    // Katib asks; the answer is lost (its call timed out) and evoscaled is killed. Started
    // again on its database, it answers Katib's same call with the same trials and names.
    const int wanted = k->Wanted();
    absl::StatusOr<katib::GetSuggestionsReply> lost = k->Ask(katib_.get(), wanted, false);
    ASSERT_TRUE(lost.ok()) << lost.status();
    server_->Stop(SIGKILL);
    Restart();
    absl::StatusOr<katib::GetSuggestionsReply> again = k->Ask(katib_.get(), wanted);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*lost, *again)) << lost->ShortDebugString() << "\nvs\n"
                                                           << again->ShortDebugString();
  });
  ASSERT_TRUE(restarted);

  // Katib's view: 30 distinct trials, each named, each in the feasible space.
  ASSERT_EQ(katib.trials().size(), static_cast<size_t>(kTrials));
  std::set<std::string> katib_names;
  for (const katib::Trial& t : katib.trials()) {
    katib_names.insert(t.name());
    ExpectFeasible(t);
  }
  EXPECT_EQ(katib_names.size(), static_cast<size_t>(kTrials));

  // evoscale's view: one study of exactly the trials Katib asked for, each ended trial Katib
  // reported recorded once, with its result.
  std::vector<v1::Study> studies = Studies();
  ASSERT_EQ(studies.size(), 1u);
  const v1::Study& study = studies[0];
  EXPECT_EQ(study.display_name(), "katib/ctr-tuning");
  EXPECT_EQ(study.metadata().at("katib.experiment"), "ctr-tuning");
  EXPECT_EQ(study.metadata().at("katib.additional_metric_names"), "auc");
  EXPECT_EQ(study.trial_count(), kTrials);
  std::map<std::string, v1::Trial> by_katib_name;
  for (const v1::Trial& t : Trials(study.name())) {
    ASSERT_TRUE(t.metadata().contains("katib.trial")) << t.ShortDebugString();
    EXPECT_TRUE(by_katib_name.emplace(t.metadata().at("katib.trial"), t).second);
  }
  ASSERT_EQ(by_katib_name.size(), static_cast<size_t>(kTrials));
  int succeeded = 0;
  for (const katib::Trial& reported : katib.last_request().trials()) {
    ASSERT_TRUE(by_katib_name.contains(reported.name())) << reported.name();
    const v1::Trial& ours = by_katib_name.at(reported.name());
    switch (reported.status().condition()) {
      case katib::TrialStatus::SUCCEEDED:
        ++succeeded;
        EXPECT_EQ(ours.state(), v1::Trial::SUCCEEDED) << ours.ShortDebugString();
        EXPECT_DOUBLE_EQ(ours.final_measurement().metrics().at("loss"),
                         Loss(Assignments(reported)));
        EXPECT_TRUE(ours.final_measurement().metrics().contains("auc"));
        break;
      case katib::TrialStatus::FAILED:
        EXPECT_EQ(ours.state(), v1::Trial::INFEASIBLE) << ours.ShortDebugString();
        EXPECT_THAT(ours.infeasible_reason(), HasSubstr("FAILED"));
        break;
      default:
        EXPECT_EQ(ours.state(), v1::Trial::ACTIVE) << ours.ShortDebugString();
    }
  }
  EXPECT_GE(succeeded, kTrials - 2 * kParallel);
  int recorded = 0;
  for (const auto& [name, t] : by_katib_name) recorded += t.state() == v1::Trial::SUCCEEDED;
  EXPECT_EQ(recorded, succeeded);  // none twice

  // The GA against random search on the same objective and budget, five seeds.
  const double genetic_best = katib.BestLoss();
  std::vector<double> random_best;
  for (int seed = 1; seed <= 5; ++seed) {
    KatibController random(CtrExperiment(absl::StrCat("ctr-tuning-random-", seed),
                                         "evoscale-random",
                                         {{"random_state", absl::StrCat(seed)}}));
    RunExperiment(&random);
    random_best.push_back(random.BestLoss());
  }
  std::sort(random_best.begin(), random_best.end());
  const double random_median = random_best[2];
  RecordProperty("genetic_best_loss", absl::StrFormat("%.4f", genetic_best));
  RecordProperty("random_median_best_loss", absl::StrFormat("%.4f", random_median));
  std::printf(
      "best loss after %d Katib trials: evoscale-genetic %.4f; evoscale-random median "
      "of 5 seeds %.4f (%.4f %.4f %.4f %.4f %.4f)\n",
      kTrials, genetic_best, random_median, random_best[0], random_best[1], random_best[2],
      random_best[3], random_best[4]);
  EXPECT_LT(genetic_best, random_median);
}

TEST_F(KatibE2eTest, ValidateAlgorithmSettingsRejectsABadSettingByNameAndCreatesNothing) {
  // One experiment already runs, so "nothing created" is a listing that stays as it was.
  KatibController running(CtrExperiment("already-running", "evoscale-genetic", {}));
  ASSERT_TRUE(running.Ask(katib_.get(), 2).ok());
  const std::vector<v1::Study> before = Studies();
  ASSERT_EQ(before.size(), 1u);

  auto validate = [&](const katib::Experiment& e) {
    katib::ValidateAlgorithmSettingsRequest req;
    *req.mutable_experiment() = e;
    katib::ValidateAlgorithmSettingsReply reply;
    return ToAbsl(katib_->ValidateAlgorithmSettings(Ctx().get(), req, &reply));
  };
  EXPECT_THAT(validate(CtrExperiment("bad", "evoscale-genetic", {{"population_size", "many"}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("experiment.spec.algorithm.algorithm_settings[\"population_size\"]"
                                 ": must be an integer in [4, 10000], got \"many\"")));
  EXPECT_THAT(validate(CtrExperiment("bad", "evoscale-nsga2", {{"tournament_size", "3"}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("algorithm_settings[\"tournament_size\"]: unknown setting")));
  EXPECT_THAT(validate(CtrExperiment("bad", "evoscale-random", {{"random_state", "-1"}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("algorithm_settings[\"random_state\"]: must be an integer >= 0")));
  EXPECT_THAT(validate(CtrExperiment("bad", "tpe", {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("experiment.spec.algorithm.algorithm_name: \"tpe\" is not an "
                                 "evoscale algorithm")));
  katib::Experiment normal = CtrExperiment("bad", "evoscale-genetic", {});
  normal.mutable_spec()
      ->mutable_parameter_specs()
      ->mutable_parameters(0)
      ->mutable_feasible_space()
      ->set_distribution(katib::NORMAL);
  EXPECT_THAT(validate(normal),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parameters[0].feasible_space.distribution: NORMAL")));
  // The same experiment under a running experiment's name, with another space: refused too.
  katib::Experiment changed = CtrExperiment("already-running", "evoscale-genetic", {});
  changed.mutable_spec()
      ->mutable_parameter_specs()
      ->mutable_parameters(2)
      ->mutable_feasible_space()
      ->set_max("16");
  EXPECT_THAT(validate(changed), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("made from another experiment spec")));
  // Good settings pass; GetSuggestions with a bad one fails the same way.
  EXPECT_TRUE(validate(CtrExperiment("good", "evoscale-regularized-evolution",
                                     {{"population_size", "12"}, {"tournament_size", "3"}}))
                  .ok());
  KatibController bad(CtrExperiment("bad", "evoscale-genetic", {{"mutation_rate", "2"}}));
  EXPECT_THAT(
      bad.Ask(katib_.get(), 1).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("algorithm_settings[\"mutation_rate\"]: must be a number in (0, 1]")));

  const std::vector<v1::Study> after = Studies();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(before[i], after[i]))
        << before[i].ShortDebugString() << "\nvs\n"
        << after[i].ShortDebugString();
  }
}

TEST_F(KatibE2eTest, KatibPortServesHealthAndOnlyTheSuggestionService) {
  EXPECT_NE(server_->katib_address(), server_->grpc_address());
  // grpc.health.v1.Health/Check{service} -> {status: SERVING}, for the names Katib's probe
  // (manager.v1beta1.Suggestion) and a person (api.v1.beta1.Suggestion) would ask.
  for (const std::string service : {"", "api.v1.beta1.Suggestion", "manager.v1beta1.Suggestion"}) {
    absl::StatusOr<std::string> health = testing::HealthCheck(server_->katib_address(), service);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, testing::kHealthServing) << service;
  }
  // The study API is not on Katib's port (it takes no token there).
  auto stub = v1::StudyService::NewStub(
      grpc::CreateChannel(server_->katib_address(), grpc::InsecureChannelCredentials()));
  v1::ListStudiesResponse resp;
  EXPECT_EQ(stub->ListStudies(Ctx().get(), v1::ListStudiesRequest(), &resp).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(KatibE2eTest, AnEmptyDatabaseLearnsKatibsFinishedTrialsOnce) {
  // Katib ran 6 trials with another suggestion service (or evoscaled lost its database).
  KatibController katib(CtrExperiment("moved-here", "evoscale-genetic", {}));
  ASSERT_TRUE(katib.Ask(katib_.get(), 3).ok());
  ASSERT_TRUE(katib.Ask(katib_.get(), 3).ok());
  katib.Step();                                             // all six run
  for (int i = 0; i < 6; ++i) katib.Step(/*fail=*/i == 0);  // one fails, five succeed
  ASSERT_EQ(katib.Unfinished(), 0);
  server_->Stop(SIGKILL);
  db_ = dir_.path() + "/empty.db";
  Restart();
  ASSERT_TRUE(Studies().empty());

  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(katib.Ask(katib_.get(), 1).ok());
    std::vector<v1::Study> studies = Studies();
    ASSERT_EQ(studies.size(), 1u);
    int learnt = 0, active = 0;
    for (const v1::Trial& t : Trials(studies[0].name())) {
      learnt += t.state() == v1::Trial::SUCCEEDED;
      active += t.state() == v1::Trial::ACTIVE;
    }
    EXPECT_EQ(learnt, 5) << "call " << call;  // the succeeded ones, once; the failed one not
    EXPECT_EQ(active, call + 1);
  }
}

TEST_F(KatibE2eTest, KatibIsOffByDefault) {
  auto plain = EvoscaledProcess::Start(dir_.path() + "/plain.db");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE((*plain)->katib_address().empty());
}

}  // namespace
}  // namespace evoscale
