// suite_bench: evoscale's designers on the search suite (suite.h): median regret per problem
// over seeds, sequentially and several suggestions at a time, and NSGA2's hypervolume on
// ZDT1-3 and DTLZ2. With --serve it is the suite's oracle for optuna_suite.py instead:
// JSON requests on stdin, one JSON answer per line on stdout.
//
//   {"op": "describe"}                                  -> the problems and their spaces
//   {"op": "eval", "problem": P, "seed": S, "index": I, "values": [...]}
//                                                       -> {"value": observed, "true": f}
//   {"op": "mo_eval", "problem": P, "x": [...]}         -> {"f": [...]}
//   {"op": "hv", "problem": P, "points": [[...], ...]}  -> {"hv": h}
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/search/study_driver.h"
#include "bench/search/suite.h"
#include "nlohmann/json.hpp"
#include "search/types.h"

ABSL_FLAG(int, budget, 200, "trials per study");
ABSL_FLAG(int, seeds, 5, "seeds per (problem, algorithm): 0 .. seeds-1");
ABSL_FLAG(std::string, algorithms, "GENETIC", "designers of the sequential table");
ABSL_FLAG(std::string, problems, "", "comma-separated subset of the problems (default all)");
ABSL_FLAG(std::string, split, "", "only this part of the suite: tuning or held-out");
ABSL_FLAG(int, parallel, 8, "suggestions per request in the parallel table (0 skips it)");
ABSL_FLAG(int, mo_budget, 300, "evaluations per multi-objective study (0 skips them)");
ABSL_FLAG(int, mo_seeds, 5, "seeds per multi-objective problem");
ABSL_FLAG(std::string, settings, "", "AlgorithmSpec.settings: key=value,key=value");
ABSL_FLAG(std::string, json_out, "", "also write JSON lines of every result to this file");
ABSL_FLAG(std::string, checkpoints, "",
          "also record each run's regret after these many trials (comma-separated), as "
          "\"regrets_at\" in --json_out");
ABSL_FLAG(int, async_workers, 0,
          "also a table of GENETIC with this many trials always in flight: each completion "
          "(oldest first) is followed by one new suggestion (0 skips it)");
ABSL_FLAG(bool, serve, false, "answer optuna_suite.py's requests on stdin instead");

namespace evoscale::bench {
namespace {

using Json = nlohmann::ordered_json;

const SuiteProblem* FindProblem(const std::string& name) {
  for (const SuiteProblem& p : Suite()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const MoProblem* FindMo(const std::string& name) {
  for (const MoProblem& p : MoSuite()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// The suite's parameters as a search space: conditional ones hang under their parent.
search::SearchSpace SpaceOf(const SuiteProblem& problem) {
  auto config = [&](size_t i) {
    const SuiteParam& p = problem.params[i];
    search::ParameterConfig c;
    c.name = p.name;
    c.scale = p.log ? search::ScaleType::kLog : search::ScaleType::kLinear;
    c.min = p.low;
    c.max = p.high;
    if (p.type == SuiteParam::Type::kInt) c.type = search::ParameterType::kInteger;
    if (p.type == SuiteParam::Type::kCategorical) {
      c.type = search::ParameterType::kCategorical;
      c.categories = p.choices;
    }
    return c;
  };
  std::vector<search::ParameterConfig> configs;
  for (size_t i = 0; i < problem.params.size(); ++i) configs.push_back(config(i));
  // Children first into their parents (parents precede their children in the list and are
  // top-level in this suite).
  for (size_t i = problem.params.size(); i-- > 0;) {
    const SuiteParam& p = problem.params[i];
    if (p.parent < 0) continue;
    search::ConditionalChild child;
    for (int c : p.parent_choices) child.parent_categories.push_back(problem.params[p.parent].choices[c]);
    child.parameters.push_back(configs[i]);
    auto& siblings = configs[p.parent].children;
    siblings.insert(siblings.begin(), std::move(child));
  }
  search::SearchSpace space;
  for (size_t i = 0; i < problem.params.size(); ++i) {
    if (problem.params[i].parent < 0) space.parameters.push_back(configs[i]);
  }
  return space;
}

// One value per suite parameter (see SuiteProblem::f) from an assignment.
std::vector<double> ValuesOf(const SuiteProblem& problem, const search::ParameterDict& params) {
  std::vector<double> values;
  for (const SuiteParam& p : problem.params) {
    const auto it = params.find(p.name);
    double v = std::nan("");
    if (it != params.end()) {
      if (const double* d = std::get_if<double>(&it->second)) v = *d;
      if (const int64_t* n = std::get_if<int64_t>(&it->second)) v = static_cast<double>(*n);
      if (const std::string* s = std::get_if<std::string>(&it->second)) {
        v = static_cast<double>(std::find(p.choices.begin(), p.choices.end(), *s) - p.choices.begin());
      }
    }
    values.push_back(v);
  }
  return values;
}

// Observed and true value of the `index`-th evaluation of a study seeded `seed`.
std::pair<double, double> Evaluate(const SuiteProblem& problem, uint64_t seed, uint64_t index,
                                   const std::vector<double>& values) {
  const double f = problem.f(values);
  if (!problem.noise) return {f, f};
  return {problem.noise(f, SuiteNoiseDraw(problem.name, seed, index)), f};
}

// The true regret of the trial with the best observed value after `budget` evaluations,
// asking `batch` suggestions at a time (`async`: keeping `batch` trials in flight, one new
// suggestion after each completion, the oldest completing first); `at[c]`, when given, the
// same after c evaluations for each checkpoint c.
absl::StatusOr<double> Optimise(const SuiteProblem& problem, search::Algorithm algorithm,
                                uint64_t seed, int budget, int batch, bool async,
                                std::map<int, double>* at = nullptr) {
  StudySetup setup{.space = SpaceOf(problem), .metrics = {"f"}, .algorithm = algorithm,
                   .seed = seed, .max_trials = budget,
                   .settings = ParseSettings(absl::GetFlag(FLAGS_settings))};
  absl::StatusOr<std::unique_ptr<StudyDriver>> study = NewLibraryStudy(setup);
  if (!study.ok()) return study.status();
  double best_observed = std::numeric_limits<double>::infinity(), regret = best_observed;
  // Evaluates suggestion `s` as trial `index` (its noise draw) and completes it; `done`
  // trials are then complete.
  auto tell = [&](int index, const Suggestion& s, int done) -> absl::Status {
    const auto [observed, truth] =
        Evaluate(problem, seed, static_cast<uint64_t>(index), ValuesOf(problem, s.params));
    if (observed < best_observed) {
      best_observed = observed;
      regret = truth;
    }
    if (absl::Status st = (*study)->Complete(s.id, {{"f", observed}}); !st.ok()) return st;
    if (at != nullptr && at->contains(done)) (*at)[done] = regret;
    return absl::OkStatus();
  };
  if (async) {
    std::deque<std::pair<int, Suggestion>> in_flight;  // (order asked, suggestion)
    for (int asked = 0, done = 0; done < budget; ++done) {
      while (static_cast<int>(in_flight.size()) < batch && asked < budget) {
        absl::StatusOr<std::vector<Suggestion>> got = (*study)->Suggest(1);
        if (!got.ok()) return got.status();
        if (got->empty()) break;
        in_flight.emplace_back(asked++, std::move((*got)[0]));
      }
      if (in_flight.empty()) break;
      const auto [index, s] = std::move(in_flight.front());
      in_flight.pop_front();
      if (absl::Status st = tell(index, s, done + 1); !st.ok()) return st;
    }
    return regret;
  }
  for (int done = 0; done < budget;) {
    absl::StatusOr<std::vector<Suggestion>> asked = (*study)->Suggest(std::min(batch, budget - done));
    if (!asked.ok()) return asked.status();
    if (asked->empty()) break;
    for (const Suggestion& s : *asked) {
      if (absl::Status st = tell(done, s, done + 1); !st.ok()) return st;
      ++done;
    }
  }
  return regret;
}

absl::Status QualityTable(const std::vector<const SuiteProblem*>& problems,
                          const std::vector<search::Algorithm>& algorithms, int batch,
                          bool async, std::ofstream* json) {
  const int budget = absl::GetFlag(FLAGS_budget), seeds = absl::GetFlag(FLAGS_seeds);
  std::printf("\n## suite: median regret, budget %d, %d seeds, %d %s\n\n", budget, seeds, batch,
              async ? "trials in flight" : "suggestion(s) per request");
  std::printf("| problem | split |");
  for (search::Algorithm a : algorithms) std::printf(" %s |", AlgorithmName(a).c_str());
  std::printf("\n|---|---|");
  for (size_t i = 0; i < algorithms.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const SuiteProblem* problem : problems) {
    std::printf("| %s | %s |", problem->name.c_str(), problem->split.c_str());
    for (search::Algorithm a : algorithms) {
      std::vector<double> regrets;
      std::map<int, std::vector<double>> regrets_at;
      for (int seed = 0; seed < seeds; ++seed) {
        std::map<int, double> at;
        for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_checkpoints), ',', absl::SkipEmpty())) {
          int trials = 0;
          if (!absl::SimpleAtoi(c, &trials) || trials < 1) {
            return absl::InvalidArgumentError(absl::StrCat("--checkpoints: not a trial count: \"", c, "\""));
          }
          at[trials] = std::numeric_limits<double>::quiet_NaN();
        }
        absl::StatusOr<double> r =
            Optimise(*problem, a, static_cast<uint64_t>(seed), budget, batch, async, &at);
        if (!r.ok()) return r.status();
        regrets.push_back(*r);
        for (const auto& [trials, regret] : at) regrets_at[trials].push_back(regret);
      }
      std::printf(" %.4g |", Median(regrets));
      std::fflush(stdout);
      if (json != nullptr) {
        Json line{{"suite", problem->name}, {"split", problem->split},
                  {"algorithm", AlgorithmName(a)}, {"batch", async ? 1 : batch},
                  {"async_workers", async ? batch : 0}, {"budget", budget},
                  {"median_regret", Median(regrets)}, {"regrets", regrets}};
        for (const auto& [trials, at] : regrets_at) line["regrets_at"][std::to_string(trials)] = at;
        *json << line.dump() << "\n";
      }
    }
    std::printf("\n");
  }
  return absl::OkStatus();
}

absl::StatusOr<double> MoHypervolume(const MoProblem& problem, uint64_t seed, int budget) {
  std::vector<std::string> metrics;
  for (int k = 0; k < problem.objectives; ++k) metrics.push_back(absl::StrCat("f", k + 1));
  StudySetup setup{.dims = problem.dims, .lower = 0, .upper = 1, .metrics = metrics,
                   .algorithm = search::Algorithm::kNsga2, .seed = seed, .max_trials = budget};
  absl::StatusOr<std::unique_ptr<StudyDriver>> study = NewLibraryStudy(setup);
  if (!study.ok()) return study.status();
  std::vector<std::vector<double>> points;
  for (int done = 0; done < budget; ++done) {
    absl::StatusOr<std::vector<Suggestion>> asked = (*study)->Suggest(1);
    if (!asked.ok()) return asked.status();
    if (asked->empty()) break;
    std::vector<double> f = problem.f((*asked)[0].x);
    std::map<std::string, double> told;
    for (int k = 0; k < problem.objectives; ++k) told[metrics[k]] = f[k];
    points.push_back(std::move(f));
    if (absl::Status st = (*study)->Complete((*asked)[0].id, told); !st.ok()) return st;
  }
  return Hypervolume(points, problem.reference);
}

absl::Status MoTable(std::ofstream* json) {
  const int budget = absl::GetFlag(FLAGS_mo_budget), seeds = absl::GetFlag(FLAGS_mo_seeds);
  std::printf("\n## NSGA2 hypervolume, %d evaluations, %d seeds\n\n| problem | median | per seed |\n|---|---|---|\n",
              budget, seeds);
  for (const MoProblem& problem : MoSuite()) {
    std::vector<double> hvs;
    for (int seed = 0; seed < seeds; ++seed) {
      absl::StatusOr<double> hv = MoHypervolume(problem, static_cast<uint64_t>(seed), budget);
      if (!hv.ok()) return hv.status();
      hvs.push_back(*hv);
    }
    std::string per_seed;
    for (double h : hvs) absl::StrAppend(&per_seed, per_seed.empty() ? "" : " ", absl::StrFormat("%.4f", h));
    std::printf("| %s | %.4f | %s |\n", problem.name.c_str(), Median(hvs), per_seed.c_str());
    if (json != nullptr) {
      *json << Json{{"mo", problem.name}, {"algorithm", "NSGA2"}, {"budget", budget},
                    {"median_hv", Median(hvs)}, {"hv", hvs}}.dump()
            << "\n";
    }
  }
  return absl::OkStatus();
}

Json Describe() {
  Json problems = Json::array();
  for (const SuiteProblem& p : Suite()) {
    Json params = Json::array();
    for (const SuiteParam& q : p.params) {
      Json j = {{"name", q.name}};
      switch (q.type) {
        case SuiteParam::Type::kFloat: j["type"] = "float"; break;
        case SuiteParam::Type::kInt: j["type"] = "int"; break;
        case SuiteParam::Type::kCategorical: j["type"] = "categorical"; break;
      }
      if (q.type == SuiteParam::Type::kCategorical) {
        j["choices"] = q.choices;
      } else {
        j["low"] = q.low;
        j["high"] = q.high;
        j["log"] = q.log;
      }
      if (q.parent >= 0) {
        j["parent"] = p.params[q.parent].name;
        j["parent_choices"] = q.parent_choices;
      }
      params.push_back(std::move(j));
    }
    problems.push_back({{"name", p.name}, {"split", p.split}, {"noisy", bool(p.noise)}, {"params", params}});
  }
  Json mo = Json::array();
  for (const MoProblem& p : MoSuite()) {
    mo.push_back({{"name", p.name}, {"dims", p.dims}, {"objectives", p.objectives}, {"reference", p.reference}});
  }
  return {{"problems", problems}, {"mo", mo}};
}

Json Answer(const Json& request) {
  const std::string op = request.value("op", "");
  if (op == "describe") return Describe();
  if (op == "eval") {
    const SuiteProblem* p = FindProblem(request.value("problem", ""));
    if (p == nullptr) return {{"error", "eval: unknown problem"}};
    std::vector<double> values;
    for (const Json& v : request.at("values")) values.push_back(v.is_null() ? std::nan("") : v.get<double>());
    if (values.size() != p->params.size()) return {{"error", "eval: values must have one entry per parameter"}};
    const auto [observed, truth] =
        Evaluate(*p, request.value("seed", uint64_t{0}), request.value("index", uint64_t{0}), values);
    return {{"value", observed}, {"true", truth}};
  }
  if (op == "mo_eval") {
    const MoProblem* p = FindMo(request.value("problem", ""));
    if (p == nullptr) return {{"error", "mo_eval: unknown problem"}};
    const std::vector<double> x = request.at("x").get<std::vector<double>>();
    if (static_cast<int>(x.size()) != p->dims) return {{"error", "mo_eval: x has the wrong length"}};
    return {{"f", p->f(x)}};
  }
  if (op == "hv") {
    const MoProblem* p = FindMo(request.value("problem", ""));
    if (p == nullptr) return {{"error", "hv: unknown problem"}};
    return {{"hv", Hypervolume(request.at("points").get<std::vector<std::vector<double>>>(), p->reference)}};
  }
  return {{"error", absl::StrCat("unknown op \"", op, "\"")}};
}

int Serve() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Json answer;
    try {
      answer = Answer(Json::parse(line));
    } catch (const std::exception& e) {
      answer = {{"error", e.what()}};
    }
    std::cout << answer.dump() << "\n" << std::flush;
  }
  return 0;
}

int Main() {
  if (absl::GetFlag(FLAGS_serve)) return Serve();
  std::vector<const SuiteProblem*> problems;
  const std::string wanted = absl::GetFlag(FLAGS_problems), split = absl::GetFlag(FLAGS_split);
  for (const SuiteProblem& p : Suite()) {
    if (!wanted.empty() && !absl::StrContains(absl::StrCat(",", wanted, ","), absl::StrCat(",", p.name, ","))) continue;
    if (!split.empty() && p.split != split) continue;
    problems.push_back(&p);
  }
  const absl::StatusOr<std::vector<search::Algorithm>> algorithms =
      ParseAlgorithms(absl::GetFlag(FLAGS_algorithms));
  if (!algorithms.ok()) {
    std::fprintf(stderr, "suite_bench: --algorithms: %s\n", algorithms.status().ToString().c_str());
    return 2;
  }
  std::unique_ptr<std::ofstream> json;
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    json = std::make_unique<std::ofstream>(absl::GetFlag(FLAGS_json_out));
  }
  absl::Status st;
  if (!problems.empty() && !algorithms->empty()) {
    st = QualityTable(problems, *algorithms, 1, /*async=*/false, json.get());
  }
  const int parallel = absl::GetFlag(FLAGS_parallel);
  if (st.ok() && parallel > 1 && !problems.empty()) {
    st = QualityTable(problems, {search::Algorithm::kGenetic}, parallel, /*async=*/false, json.get());
  }
  const int workers = absl::GetFlag(FLAGS_async_workers);
  if (st.ok() && workers > 0 && !problems.empty()) {
    st = QualityTable(problems, {search::Algorithm::kGenetic}, workers, /*async=*/true, json.get());
  }
  if (st.ok() && absl::GetFlag(FLAGS_mo_budget) > 0) st = MoTable(json.get());
  if (!st.ok()) {
    std::fprintf(stderr, "suite_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace evoscale::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "suite_bench [--budget 200] [--seeds 5] [--split tuning|held-out] [--parallel 8] "
      "[--json_out FILE] | --serve");
  absl::ParseCommandLine(argc, argv);
  return evoscale::bench::Main();
}
