#include "bench/search/study_driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "search/designers.h"
#include "search/types.h"

namespace evoscale::bench {
namespace {

std::string ParameterName(int i) { return absl::StrCat("x", i); }

class LibraryStudy final : public StudyDriver {
 public:
  LibraryStudy(const StudySetup& setup, std::unique_ptr<search::Designer> designer)
      : setup_(setup), designer_(std::move(designer)) {}

  absl::StatusOr<std::vector<Suggestion>> Suggest(int count) override {
    std::vector<search::Trial> pending;
    for (int64_t id : pending_) pending.push_back(trials_[id - 1]);
    designer_->Update(newly_completed_, pending);
    newly_completed_.clear();
    if (setup_.max_trials > 0) {
      count = std::min<int64_t>(count, setup_.max_trials - static_cast<int64_t>(trials_.size()));
    }
    if (count <= 0) return std::vector<Suggestion>{};
    absl::StatusOr<std::vector<search::ParameterDict>> dicts =
        designer_->Suggest(count, static_cast<int64_t>(trials_.size()));
    if (!dicts.ok()) return dicts.status();
    std::vector<Suggestion> out;
    for (search::ParameterDict& dict : *dicts) {
      search::Trial trial;
      trial.id = static_cast<int64_t>(trials_.size()) + 1;
      Suggestion s{trial.id, {}};
      for (int i = 0; i < setup_.dims; ++i) s.x.push_back(std::get<double>(dict.at(ParameterName(i))));
      s.params = dict;
      trial.parameters = std::move(dict);
      trials_.push_back(std::move(trial));
      pending_.insert(s.id);
      out.push_back(std::move(s));
    }
    return out;
  }

  absl::Status Complete(int64_t id, const std::map<std::string, double>& metrics) override {
    if (!pending_.erase(id)) return absl::NotFoundError(absl::StrCat("trial ", id));
    search::Trial& trial = trials_[id - 1];
    trial.status = search::TrialStatus::kSucceeded;
    trial.final_measurement.metrics = metrics;
    newly_completed_.push_back(trial);
    return absl::OkStatus();
  }

 private:
  const StudySetup setup_;
  std::unique_ptr<search::Designer> designer_;
  std::vector<search::Trial> trials_;           // trials_[i] has id i + 1
  std::vector<search::Trial> newly_completed_;  // since the last Update, in order
  std::set<int64_t> pending_;                   // ids, ascending like the service's
};

v1::AlgorithmSpec::Algorithm ToProto(search::Algorithm algorithm) {
  switch (algorithm) {
    case search::Algorithm::kGenetic:
      return v1::AlgorithmSpec::GENETIC;
    case search::Algorithm::kRegularizedEvolution:
      return v1::AlgorithmSpec::REGULARIZED_EVOLUTION;
    case search::Algorithm::kNsga2:
      return v1::AlgorithmSpec::NSGA2;
    case search::Algorithm::kRandom:
      return v1::AlgorithmSpec::RANDOM;
    case search::Algorithm::kQuasiRandom:
      return v1::AlgorithmSpec::QUASI_RANDOM;
    case search::Algorithm::kGrid:
      return v1::AlgorithmSpec::GRID;
  }
  return v1::AlgorithmSpec::GENETIC;
}

absl::Status FromGrpc(const grpc::Status& status, const char* what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

class GrpcStudy final : public StudyDriver {
 public:
  GrpcStudy(const StudySetup& setup, std::unique_ptr<v1::StudyService::Stub> stub)
      : setup_(setup), stub_(std::move(stub)) {}

  ~GrpcStudy() override {
    if (name_.empty()) return;
    grpc::ClientContext ctx;
    v1::DeleteStudyRequest req;
    req.set_name(name_);
    v1::DeleteStudyResponse resp;
    (void)stub_->DeleteStudy(&ctx, req, &resp);
  }

  absl::Status Create() {
    v1::CreateStudyRequest req;
    v1::Study* study = req.mutable_study();
    study->set_display_name("search_bench");
    v1::StudySpec* spec = study->mutable_spec();
    for (const std::string& metric : setup_.metrics) {
      v1::MetricSpec* m = spec->add_metrics();
      m->set_name(metric);
      m->set_goal(v1::MetricSpec::MINIMIZE);
    }
    for (int i = 0; i < setup_.dims; ++i) {
      v1::ParameterSpec* p = spec->add_parameters();
      p->set_name(ParameterName(i));
      p->mutable_double_spec()->set_min(setup_.lower);
      p->mutable_double_spec()->set_max(setup_.upper);
    }
    spec->mutable_algorithm()->set_algorithm(ToProto(setup_.algorithm));
    spec->mutable_algorithm()->set_seed(setup_.seed);
    for (const auto& [k, v] : setup_.settings) (*spec->mutable_algorithm()->mutable_settings())[k] = v;
    spec->set_max_trials(setup_.max_trials);
    grpc::ClientContext ctx;
    v1::Study created;
    if (absl::Status st = FromGrpc(stub_->CreateStudy(&ctx, req, &created), "CreateStudy");
        !st.ok()) {
      return st;
    }
    name_ = created.name();
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Suggestion>> Suggest(int count) override {
    grpc::ClientContext ctx;
    v1::SuggestTrialsRequest req;
    req.set_parent(name_);
    req.set_suggestion_count(count);
    req.set_client_id("search_bench");
    v1::SuggestTrialsResponse resp;
    if (absl::Status st = FromGrpc(stub_->SuggestTrials(&ctx, req, &resp), "SuggestTrials");
        !st.ok()) {
      return st;
    }
    std::vector<Suggestion> out;
    for (const v1::Trial& trial : resp.trials()) {
      Suggestion s{trial.id(), std::vector<double>(setup_.dims, 0.0)};
      for (const v1::Parameter& p : trial.parameters()) {
        const int i = std::stoi(p.name().substr(1));
        if (i >= 0 && i < setup_.dims) s.x[i] = p.double_value();
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  absl::Status Complete(int64_t id, const std::map<std::string, double>& metrics) override {
    grpc::ClientContext ctx;
    v1::CompleteTrialRequest req;
    req.set_name(absl::StrCat(name_, "/trials/", id));
    for (const auto& [k, v] : metrics) (*req.mutable_final_measurement()->mutable_metrics())[k] = v;
    v1::Trial resp;
    return FromGrpc(stub_->CompleteTrial(&ctx, req, &resp), "CompleteTrial");
  }

 private:
  const StudySetup setup_;
  std::unique_ptr<v1::StudyService::Stub> stub_;
  std::string name_;
};

}  // namespace

std::string AlgorithmName(search::Algorithm algorithm) {
  switch (algorithm) {
    case search::Algorithm::kGenetic:
      return "GENETIC";
    case search::Algorithm::kRegularizedEvolution:
      return "REGULARIZED_EVOLUTION";
    case search::Algorithm::kNsga2:
      return "NSGA2";
    case search::Algorithm::kRandom:
      return "RANDOM";
    case search::Algorithm::kQuasiRandom:
      return "QUASI_RANDOM";
    case search::Algorithm::kGrid:
      return "GRID";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::vector<search::Algorithm>> ParseAlgorithms(const std::string& list) {
  std::vector<search::Algorithm> out;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    bool known = false;
    for (search::Algorithm a :
         {search::Algorithm::kGenetic, search::Algorithm::kRegularizedEvolution,
          search::Algorithm::kNsga2, search::Algorithm::kRandom, search::Algorithm::kQuasiRandom,
          search::Algorithm::kGrid}) {
      if (AlgorithmName(a) != name) continue;
      out.push_back(a);
      known = true;
    }
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown algorithm \"", name, "\""));
  }
  return out;
}

std::map<std::string, std::string> ParseSettings(const std::string& list) {
  std::map<std::string, std::string> settings;
  for (absl::string_view kv : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> pair = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    settings[pair.first] = pair.second;
  }
  return settings;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return std::nan("");
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::StatusOr<std::unique_ptr<StudyDriver>> NewLibraryStudy(const StudySetup& setup) {
  search::ProblemStatement problem;
  problem.space = setup.space;
  for (int i = 0; i < setup.dims && setup.space.parameters.empty(); ++i) {
    search::ParameterConfig p;
    p.name = ParameterName(i);
    p.type = search::ParameterType::kDouble;
    p.min = setup.lower;
    p.max = setup.upper;
    problem.space.parameters.push_back(std::move(p));
  }
  for (const std::string& metric : setup.metrics) {
    problem.metrics.push_back({.name = metric, .goal = search::Goal::kMinimize});
  }
  problem.algorithm = setup.algorithm;
  problem.seed = setup.seed;
  problem.settings = setup.settings;
  absl::StatusOr<std::unique_ptr<search::Designer>> designer = search::CreateDesigner(problem);
  if (!designer.ok()) return designer.status();
  return std::make_unique<LibraryStudy>(setup, *std::move(designer));
}

absl::StatusOr<std::unique_ptr<StudyDriver>> NewGrpcStudy(const std::string& server,
                                                          const StudySetup& setup) {
  if (!setup.space.parameters.empty()) {
    return absl::UnimplementedError("search_bench drives evoscaled over gRPC with a box only");
  }
  auto stub = v1::StudyService::NewStub(
      grpc::CreateChannel(server, grpc::InsecureChannelCredentials()));
  auto study = std::make_unique<GrpcStudy>(setup, std::move(stub));
  if (absl::Status st = study->Create(); !st.ok()) return st;
  return study;
}

}  // namespace evoscale::bench
