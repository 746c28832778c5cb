// Cost of one suggestion as a study grows: a 10-D study (the same box as
// ../shared/bench/hpo/optuna_latency.py) is fed N completed trials, then each iteration
// asks one suggestion and tells its result (Update + Suggest, what the service does per
// SuggestTrials with one new completion). Compare with optuna_latency.py's ms per ask+tell.
// BM_AskTell20: the same in 20 dimensions, 60 ask+tells from 200 and from 10,000 completed
// trials (GENETIC's model of the objective is refitted as the study grows); compare with
// optuna_gp_latency.py (GPSampler, TPE) on the same box.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "search/designers.h"
#include "search/importance.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

constexpr int kDims = 10;

ProblemStatement Problem(Algorithm algorithm, int dims = kDims) {
  ProblemStatement problem;
  for (int i = 0; i < dims; ++i) {
    problem.space.parameters.push_back({.name = absl::StrCat("x", i),
                                        .type = ParameterType::kDouble,
                                        .min = -5.0,
                                        .max = 5.0});
  }
  problem.metrics = {{.name = "f", .goal = Goal::kMinimize}};
  problem.algorithm = algorithm;
  problem.seed = 0;
  return problem;
}

Trial Completed(int64_t id, ParameterDict parameters) {
  Trial t;
  t.id = id;
  double f = 0;
  for (const auto& [name, value] : parameters) f += std::get<double>(value) * std::get<double>(value);
  t.parameters = std::move(parameters);
  t.status = TrialStatus::kSucceeded;
  t.final_measurement.metrics["f"] = f;
  return t;
}

// `completed` trials at uniformly random points of the space.
std::vector<Trial> RandomHistory(int64_t completed, int dims = kDims) {
  std::vector<Trial> history;
  internal::SplitMix64 rng(1);
  for (int64_t id = 1; id <= completed; ++id) {
    ParameterDict p;
    for (int i = 0; i < dims; ++i) p[absl::StrCat("x", i)] = -5.0 + 10.0 * rng.NextUnit();
    history.push_back(Completed(id, std::move(p)));
  }
  return history;
}

void AskTell(benchmark::State& state, Algorithm algorithm, int dims) {
  const int64_t completed = state.range(0);
  std::unique_ptr<Designer> designer = *CreateDesigner(Problem(algorithm, dims));
  // History: uniform random points, fed in one Update as after a restart.
  designer->Update(RandomHistory(completed, dims), {});
  int64_t next = completed;
  std::vector<Trial> told;
  std::vector<double> micros;  // per ask+tell, for the tail
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    designer->Update(told, {});
    std::vector<ParameterDict> asked = *designer->Suggest(1, next);
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    told.assign(1, Completed(++next, std::move(asked[0])));
  }
  state.SetItemsProcessed(state.iterations());
  std::sort(micros.begin(), micros.end());
  auto quantile = [&](double q) { return micros[static_cast<size_t>(q * static_cast<double>(micros.size() - 1))]; };
  if (!micros.empty()) {
    state.counters["p50_us"] = quantile(0.5);
    state.counters["p99_us"] = quantile(0.99);
  }
}

void BM_AskTell(benchmark::State& state, Algorithm algorithm) { AskTell(state, algorithm, kDims); }
void BM_AskTell20(benchmark::State& state, Algorithm algorithm) { AskTell(state, algorithm, 20); }

void BM_RebuildFromHistory(benchmark::State& state, Algorithm algorithm) {
  const int64_t completed = state.range(0);
  const std::vector<Trial> history = RandomHistory(completed);
  for (auto _ : state) {
    std::unique_ptr<Designer> designer = *CreateDesigner(Problem(algorithm));
    designer->Update(history, {});
    benchmark::DoNotOptimize(designer->Suggest(1, completed));
  }
}

// Parameter importance (the dashboard's, GetParameterImportance) over `completed` trials.
void BM_ParameterImportance(benchmark::State& state) {
  const std::vector<Trial> history = RandomHistory(state.range(0));
  const ProblemStatement problem = Problem(Algorithm::kGenetic);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        MainEffectImportance(problem.space, history, problem.metrics.front().name));
  }
}

BENCHMARK_CAPTURE(BM_AskTell, genetic, Algorithm::kGenetic)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK_CAPTURE(BM_AskTell20, genetic, Algorithm::kGenetic)
    ->Arg(200)
    ->Arg(10000)
    ->Iterations(60)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AskTell, regularized_evolution, Algorithm::kRegularizedEvolution)
    ->Arg(10000);
BENCHMARK_CAPTURE(BM_AskTell, nsga2, Algorithm::kNsga2)->Arg(10000);
BENCHMARK_CAPTURE(BM_AskTell, random, Algorithm::kRandom)->Arg(10000);
BENCHMARK_CAPTURE(BM_RebuildFromHistory, genetic, Algorithm::kGenetic)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParameterImportance)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace evoscale::search

BENCHMARK_MAIN();
