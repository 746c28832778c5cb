// What the dashboard asks of evoscaled on every refresh of a 10,000-trial study: the trial
// table's page (QueryTrials: filter, sort, page), the analysis document (StudyAnalysisJson:
// history, curves, points, resources, capacity) and the Pareto front (search::OptimalTrials),
// the front against the pairwise check it replaced.
//   build/bin/dashboard_benchmark [--benchmark_filter=Pareto]
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/text_format.h"
#include "search/pareto.h"
#include "search/types.h"
#include "service/analysis/study_analysis.h"
#include "service/study/trial_query.h"

namespace evoscale::service {
namespace {

constexpr char kSpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  metrics { name: "accuracy" goal: MAXIMIZE }
  parameters { name: "learning_rate" double_spec { min: 0.0001 max: 1 } scale: LOG }
  parameters { name: "layers" integer_spec { min: 1 max: 8 } }
  parameters { name: "batch" discrete_spec { values: 32 values: 64 values: 128 } }
  parameters { name: "weight_decay" double_spec { min: 0 max: 0.1 } }
  parameters {
    name: "optimizer"
    categorical_spec { values: "sgd" values: "adam" values: "rmsprop" }
    children {
      parent_categorical_values: "sgd"
      parameter_spec { name: "momentum" double_spec { min: 0 max: 1 } }
    }
  }
)pb";

v1::StudySpec Spec() {
  v1::StudySpec spec;
  google::protobuf::TextFormat::ParseFromString(kSpec, &spec);
  return spec;
}

std::vector<v1::Trial> Trials(int n) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  const char* optimizers[] = {"sgd", "adam", "rmsprop"};
  std::vector<v1::Trial> trials;
  for (int64_t id = 1; id <= n; ++id) {
    v1::Trial t;
    t.set_name("studies/1/trials/" + std::to_string(id));
    t.set_id(id);
    const double r = u(rng);
    t.set_state(r < 0.8 ? v1::Trial::SUCCEEDED : r < 0.9 ? v1::Trial::FAILED
                : r < 0.97 ? v1::Trial::STOPPED : r < 0.99 ? v1::Trial::ACTIVE
                           : v1::Trial::STATE_UNSPECIFIED);
    auto add = [&t](const std::string& name) { auto* p = t.add_parameters(); p->set_name(name); return p; };
    add("learning_rate")->set_double_value(std::pow(10, -4 + 4 * u(rng)));
    add("layers")->set_int_value(1 + static_cast<int64_t>(u(rng) * 8));
    add("batch")->set_double_value(32 << static_cast<int>(u(rng) * 3));
    add("weight_decay")->set_double_value(0.1 * u(rng));
    const char* opt = optimizers[static_cast<int>(u(rng) * 3)];
    add("optimizer")->set_string_value(opt);
    if (std::string(opt) == "sgd") add("momentum")->set_double_value(u(rng));
    for (int step = 0; step < 20; ++step) {
      auto* m = t.add_measurements();
      m->set_step(step);
      (*m->mutable_metrics())["loss"] = u(rng);
    }
    if (t.state() == v1::Trial::SUCCEEDED || t.state() == v1::Trial::STOPPED) {
      (*t.mutable_final_measurement()->mutable_metrics())["loss"] = u(rng);
      (*t.mutable_final_measurement()->mutable_metrics())["accuracy"] = u(rng);
    }
    t.set_client_id("worker-" + std::to_string(id % 17));
    t.mutable_usage()->set_peak_memory_bytes(static_cast<int64_t>(u(rng) * 1e9));
    t.mutable_usage()->set_mean_cpu_cores(u(rng) * 4);
    t.mutable_usage()->set_wall_seconds(100);
    trials.push_back(std::move(t));
  }
  return trials;
}

void Run(benchmark::State& state, std::vector<std::pair<std::string, std::string>> query) {
  const v1::StudySpec spec = Spec();
  const std::vector<v1::Trial> trials = Trials(static_cast<int>(state.range(0)));
  int64_t matching = 0;
  for (auto _ : state) {
    // As the HTTP layer does it: parse, then query.
    absl::StatusOr<TrialQuery> q = ParseTrialQuery(spec, query);
    if (!q.ok()) { state.SkipWithError(std::string(q.status().message()).c_str()); return; }
    TrialPage page = QueryTrials(spec, trials, *q);
    matching = page.total_matching;
    benchmark::DoNotOptimize(page);
  }
  state.counters["matching"] = static_cast<double>(matching);
}

void BM_QueryTrials(benchmark::State& state) {
  Run(state, {{"state", "succeeded,stopped"}, {"param", "learning_rate:0.001..0.1"},
              {"order_by", "-param:learning_rate"}, {"page_size", "50"}, {"page_token", "o:1000"}});
}
void BM_QueryTrials_ById(benchmark::State& state) { Run(state, {}); }
void BM_QueryTrials_ByMetricCategorical(benchmark::State& state) {
  Run(state, {{"param", "optimizer:sgd|adam"}, {"param", "momentum:0.5.."},
              {"order_by", "metric:loss"}, {"page_size", "100"}});
}
void BM_QueryTrials_ByCategory(benchmark::State& state) {
  Run(state, {{"order_by", "-param:optimizer"}});
}

// The whole analysis document, as GET /api/v1/studies/1/analysis builds it (JSON text).
void BM_StudyAnalysis(benchmark::State& state) {
  v1::Study study;
  study.set_name("studies/1");
  *study.mutable_spec() = Spec();
  const std::vector<v1::Trial> trials = Trials(static_cast<int>(state.range(0)));
  AnalysisOptions options;
  options.metric = "loss";
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string json = StudyAnalysisJson(study, trials, options, {}, absl::Now());
    bytes = json.size();
    benchmark::DoNotOptimize(json);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

std::vector<search::Trial> TwoObjectiveTrials(int n) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<search::Trial> trials(n);
  for (int i = 0; i < n; ++i) {
    const double x = u(rng), y = u(rng);
    trials[i].id = i + 1;
    trials[i].status = search::TrialStatus::kSucceeded;
    trials[i].final_measurement.metrics = {{"auc", std::sqrt(x)}, {"latency", x + y}};
  }
  return trials;
}

const std::vector<search::MetricConfig> kObjectives = {
    {.name = "auc", .goal = search::Goal::kMaximize},
    {.name = "latency", .goal = search::Goal::kMinimize}};

void BM_ParetoFront(benchmark::State& state) {
  const std::vector<search::Trial> trials = TwoObjectiveTrials(static_cast<int>(state.range(0)));
  size_t front = 0;
  for (auto _ : state) {
    const std::vector<size_t> f = search::OptimalTrials(kObjectives, trials);
    front = f.size();
    benchmark::DoNotOptimize(f);
  }
  state.counters["front"] = static_cast<double>(front);
}

// The check OptimalTrials made before: every candidate against every other.
void BM_ParetoFront_Pairwise(benchmark::State& state) {
  const std::vector<search::Trial> trials = TwoObjectiveTrials(static_cast<int>(state.range(0)));
  std::vector<std::pair<double, double>> v;
  for (const search::Trial& t : trials) {
    v.emplace_back(t.final_measurement.metrics.at("auc"), -t.final_measurement.metrics.at("latency"));
  }
  size_t front = 0;
  for (auto _ : state) {
    std::vector<size_t> f;
    for (size_t c = 0; c < v.size(); ++c) {
      bool dominated = false;
      for (size_t o = 0; o < v.size() && !dominated; ++o) {
        dominated = o != c && v[o].first >= v[c].first && v[o].second >= v[c].second &&
                    (v[o].first > v[c].first || v[o].second > v[c].second);
      }
      if (!dominated) f.push_back(c);
    }
    front = f.size();
    benchmark::DoNotOptimize(f);
  }
  state.counters["front"] = static_cast<double>(front);
}

BENCHMARK(BM_StudyAnalysis)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParetoFront)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParetoFront_Pairwise)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueryTrials)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueryTrials_ById)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueryTrials_ByMetricCategorical)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueryTrials_ByCategory)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace evoscale::service

BENCHMARK_MAIN();
