// The trial cost model (load_model/trial_resource_model.h) on real evoscale-trainer runs:
// trials drawn at random (embedding_dim 4..64, batch_size {256, 512, 1024}, learning rates that
// cost nothing), run one at a time; before each runs, the model fitted on the trials that ended
// before it predicts its core-seconds curve and memory request (CostModelAccuracy keeps the
// score); after it ends, its progress lines (step, elapsed_s) and peak RSS teach the model.
// A share of the trials is stopped early (--max-steps), as early stopping would.
//
//   trial_cost_bench [--trials 20] [--seed 1] [--rows 100000] [--stopped-share 0.25]
//                    [--trainer PATH] [--record FILE] [--replay FILE]
//
// Prints a line per trial and the three figures, over every trial that had a learned
// prediction and over those predicted from at least 3 trials that ran to their end (what
// evoscaled's scheduler uses: learn_after_trials = 3). --record writes each trial's telemetry
// as JSON lines; --replay reads them back instead of running the trainer.
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "load_model/trial_resource_model.h"
#include "nlohmann/json.hpp"

namespace lm = evoscale::load_model;
using nlohmann::json;

namespace {

struct BenchConfig {
  int trials = 20;
  uint32_t seed = 1;
  int64_t rows = 100000;
  double stopped_share = 0.25;
  int progress_every = 20;
  std::string trainer;
  std::string record;
  std::vector<std::string> replay;  // recorded files, read in turn
  int orders = 0;                   // with replay: studies in random orders of the pool
  bool explain = false;  // print each prediction's explanation
  lm::TrialResourceModelOptions model;
};

// One trial as run: its telemetry and the process's own wall seconds (start-up included).
struct TrainerRun {
  lm::TrialTelemetry telemetry;
  int64_t max_steps = 0;  // 0: the whole run
  double process_seconds = 0;
};

// The trial's hyperparameters and, for a stopped one, its --max-steps.
TrainerRun Draw(const BenchConfig& config, std::mt19937& rng) {
  std::uniform_int_distribution<int> dim(4, 64), batch_index(0, 2);
  std::uniform_real_distribution<double> log_lr_dense(std::log(3e-4), std::log(3e-2));
  std::uniform_real_distribution<double> log_lr_sparse(std::log(5e-3), std::log(0.5));
  std::uniform_real_distribution<double> unit(0, 1);
  TrainerRun run;
  const int batch = 256 << batch_index(rng);
  run.telemetry.params = {{"embedding_dim", double(dim(rng))},
                          {"batch_size", double(batch)},
                          {"lr_dense", std::exp(log_lr_dense(rng))},
                          {"lr_sparse", std::exp(log_lr_sparse(rng))}};
  if (unit(rng) < config.stopped_share) {
    // 20% to 70% of one epoch over the 90% of the rows that are not held out.
    const double full_steps = std::ceil(0.9 * double(config.rows) / batch);
    run.max_steps = std::max<int64_t>(config.progress_every,
                                      std::llround(full_steps * (0.2 + 0.5 * unit(rng))));
  }
  return run;
}

std::string Command(const BenchConfig& config, const TrainerRun& run) {
  const lm::TrialParams& p = run.telemetry.params;
  return absl::StrFormat(
      "'%s' --synthetic %d --threads 1 --hidden 32,16 --seed 7 --progress-every %d "
      "--embedding-dim %d --batch-size %d --lr-dense %.6g --lr-sparse %.6g --max-steps %d",
      config.trainer, config.rows, config.progress_every, std::lround(p.at("embedding_dim")),
      std::lround(p.at("batch_size")), p.at("lr_dense"), p.at("lr_sparse"), run.max_steps);
}

// Reads the trainer's JSON lines into `run`: each progress line a point of the curve, the
// final line's peak RSS.
absl::Status ParseOutput(FILE* out, TrainerRun* run) {
  char buffer[1 << 16];
  bool final_seen = false;
  while (std::fgets(buffer, sizeof(buffer), out) != nullptr) {
    const json line = json::parse(buffer, nullptr, /*allow_exceptions=*/false);
    if (!line.is_object() || !line.contains("event")) continue;
    if (line["event"] == "progress") {
      run->telemetry.curve.push_back(
          {line["step"].get<int64_t>(), line["elapsed_s"].get<double>()});
    } else if (line["event"] == "final") {
      run->telemetry.peak_memory_bytes = line["peak_rss_bytes"].get<double>();
      final_seen = true;
    }
  }
  if (!final_seen) return absl::InternalError("the trainer printed no final line");
  return absl::OkStatus();
}

double ChildCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

absl::Status RunTrainer(const BenchConfig& config, TrainerRun* run) {
  const std::string command = Command(config, *run);
  const double cpu_before = ChildCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return absl::InternalError(absl::StrCat("popen: ", command));
  absl::Status parsed = ParseOutput(out, run);
  const int rc = pclose(out);
  run->process_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rc != 0) {
    return absl::InternalError(absl::StrFormat("%s: exit status %d", command, WEXITSTATUS(rc)));
  }
  if (!parsed.ok()) return absl::InternalError(absl::StrCat(command, ": ", parsed.message()));
  run->telemetry.cores_held = 1;  // --threads 1
  run->telemetry.peak_cpu_cores = (ChildCpuSeconds() - cpu_before) / run->process_seconds;
  run->telemetry.stopped = run->max_steps > 0;
  return absl::OkStatus();
}

json ToJson(const TrainerRun& run) {
  json curve = json::array();
  for (const lm::StepElapsed& p : run.telemetry.curve) curve.push_back({p.step, p.elapsed_seconds});
  return {{"params", run.telemetry.params},
          {"curve", curve},
          {"peak_memory_bytes", run.telemetry.peak_memory_bytes},
          {"peak_cpu_cores", run.telemetry.peak_cpu_cores},
          {"cores_held", run.telemetry.cores_held},
          {"stopped", run.telemetry.stopped},
          {"max_steps", run.max_steps},
          {"process_seconds", run.process_seconds}};
}

TrainerRun FromJson(const json& j) {
  TrainerRun run;
  run.telemetry.params = j["params"].get<lm::TrialParams>();
  for (const json& p : j["curve"]) {
    run.telemetry.curve.push_back({p[0].get<int64_t>(), p[1].get<double>()});
  }
  run.telemetry.peak_memory_bytes = j["peak_memory_bytes"];
  run.telemetry.peak_cpu_cores = j["peak_cpu_cores"];
  run.telemetry.cores_held = j["cores_held"];
  run.telemetry.stopped = j["stopped"];
  run.max_steps = j["max_steps"];
  run.process_seconds = j["process_seconds"];
  return run;
}

std::vector<TrainerRun> Replayed(const std::string& path) {
  std::vector<TrainerRun> runs;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) runs.push_back(FromJson(json::parse(line)));
  }
  return runs;
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100 * fraction); }

void PrintTrial(int id, const TrainerRun& run, const lm::TrialResourceRequest& predicted) {
  const lm::TrialTelemetry& t = run.telemetry;
  const lm::StepElapsed last = t.curve.empty() ? lm::StepElapsed{} : t.curve.back();
  const double actual = t.cores_held * last.elapsed_seconds;
  const double forecast = predicted.core_seconds_to(last.step);
  std::printf("%3d %4.0f %5.0f %-7s %5ld %9s %8.3f %7s %8.1f %8.1f %7s %7.2f\n", id,
              t.params.at("embedding_dim"), t.params.at("batch_size"),
              t.stopped ? "stopped" : "full", long(last.step),
              predicted.core_seconds_learned ? absl::StrFormat("%.3f", forecast).c_str() : "-",
              actual,
              predicted.core_seconds_learned ? Percent(std::abs(forecast - actual) / actual).c_str()
                                             : "-",
              predicted.memory_bytes / 1048576.0, t.peak_memory_bytes / 1048576.0,
              predicted.learned
                  ? Percent((predicted.memory_bytes - t.peak_memory_bytes) / t.peak_memory_bytes)
                        .c_str()
                  : "-",
              run.process_seconds);
}

void PrintSummary(const lm::CostModelReport& all, const lm::CostModelReport& scheduled) {
  auto under = [](const lm::CostModelReport& r) {
    return absl::StrFormat("%d/%d (%s)", r.memory_under_predictions, r.memory_trials,
                           Percent(r.memory_trials > 0 ? double(r.memory_under_predictions) /
                                                             r.memory_trials
                                                       : 0));
  };
  std::printf("\n%-34s %16s %16s   %s\n", "", "all predicted", "from >= 3 ended", "bar");
  std::printf("%-34s %16d %16d\n", "trials scored (core-seconds)", all.core_seconds_trials,
              scheduled.core_seconds_trials);
  std::printf("%-34s %16s %16s   <= 25%%\n", "core-seconds median APE",
              Percent(all.core_seconds_median_abs_pct_error).c_str(),
              Percent(scheduled.core_seconds_median_abs_pct_error).c_str());
  std::printf("%-34s %16s %16s   <= 5%%\n", "memory under-predicted", under(all).c_str(),
              under(scheduled).c_str());
  std::printf("%-34s %16s %16s   <= 20%%\n", "median memory slack (ran to end)",
              Percent(all.memory_median_slack).c_str(),
              Percent(scheduled.memory_median_slack).c_str());
}

// One study's figures: over every trial with a learned prediction, and over those predicted
// from at least 3 trials that ran to their end.
struct StudyResult {
  lm::CostModelReport all, scheduled;
  std::string explanation;  // the final model's, for a mid-sized trial
  double step_exponent = 1;
  double startup_share = 0;  // median share of a process's wall time not in its curve
};

// Runs `runs` in order, each predicted before it runs (by the trainer when `live`, else
// replayed as recorded) and then taught to the model. Prints a line per trial when `print`.
absl::StatusOr<StudyResult> RunStudy(const BenchConfig& config, std::vector<TrainerRun> runs,
                                     bool live, bool print, std::ofstream* record) {
  lm::TrialResourceModel model(config.model);
  lm::CostModelAccuracy all, scheduled;
  std::vector<double> startup_share;
  if (print) {
    std::printf("%3s %4s %5s %-7s %5s %9s %8s %7s %8s %8s %7s %7s\n", "id", "dim", "batch",
                "run", "steps", "pred c-s", "c-s", "APE", "req MiB", "peak MiB", "slack",
                "wall s");
  }
  for (int id = 1; id <= int(runs.size()); ++id) {
    TrainerRun& run = runs[id - 1];
    const lm::TrialResourceRequest predicted = model.Predict(run.telemetry.params);
    all.RecordPrediction(id, predicted);
    if (model.num_usage_trials() >= 3) scheduled.RecordPrediction(id, predicted);
    if (live) {
      if (absl::Status st = RunTrainer(config, &run); !st.ok()) return st;
      if (record->is_open()) *record << ToJson(run).dump() << "\n";
    }
    for (lm::CostModelAccuracy* a : {&all, &scheduled}) {
      if (absl::Status st = a->RecordOutcome(id, run.telemetry); !st.ok()) return st;
    }
    if (absl::Status st = model.AddTrial(run.telemetry); !st.ok()) return st;
    if (print) PrintTrial(id, run, predicted);
    if (print && config.explain) {
      std::printf("      %s\n      %s\n", predicted.core_seconds_explanation.c_str(),
                  predicted.explanation.c_str());
    }
    if (!run.telemetry.curve.empty()) {
      startup_share.push_back(1 - run.telemetry.curve.back().elapsed_seconds / run.process_seconds);
    }
  }
  StudyResult result{all.Report(), scheduled.Report()};
  const lm::TrialResourceRequest example = model.Predict(
      {{"embedding_dim", 32}, {"batch_size", 512}, {"lr_dense", 3e-3}, {"lr_sparse", 5e-2}});
  result.explanation = example.core_seconds_explanation + "\n" + example.explanation;
  result.step_exponent = model.step_exponent();
  if (!startup_share.empty()) {
    std::nth_element(startup_share.begin(), startup_share.begin() + startup_share.size() / 2,
                     startup_share.end());
    result.startup_share = startup_share[startup_share.size() / 2];
  }
  return result;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(q * v.size()))];
}

// The three figures of one report, as fractions.
struct Figures {
  double ape = 0, under = 0, slack = 0;
  explicit Figures(const lm::CostModelReport& r)
      : ape(r.core_seconds_median_abs_pct_error),
        under(r.memory_trials > 0 ? double(r.memory_under_predictions) / r.memory_trials : 0),
        slack(r.memory_median_slack) {}
  bool MeetsBars() const { return ape <= 0.25 && under <= 0.05 && slack <= 0.20; }
};

void PrintSpread(const char* name, const std::vector<Figures>& figures) {
  std::vector<double> ape, under, slack;
  int meets = 0;
  for (const Figures& f : figures) {
    ape.push_back(f.ape);
    under.push_back(f.under);
    slack.push_back(f.slack);
    meets += f.MeetsBars() ? 1 : 0;
  }
  auto spread = [](const std::vector<double>& v) {
    return absl::StrFormat("%6s / %6s", Percent(Quantile(v, 0.5)), Percent(Quantile(v, 0.9)));
  };
  std::printf("%-18s %17s %17s %17s %8d/%zu\n", name, spread(ape).c_str(), spread(under).c_str(),
              spread(slack).c_str(), meets, figures.size());
}

// --orders K: K studies of --trials trials each, drawn without replacement from the recorded
// pool in random orders; prints the spread of the three figures and how many orders meet bars.
int RunOrders(const BenchConfig& config, const std::vector<TrainerRun>& pool) {
  std::mt19937 rng(config.seed);
  std::vector<Figures> all, scheduled;
  for (int k = 0; k < config.orders; ++k) {
    std::vector<TrainerRun> order = pool;
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(std::min<size_t>(order.size(), config.trials));
    absl::StatusOr<StudyResult> r = RunStudy(config, order, false, false, nullptr);
    if (!r.ok()) {
      std::fprintf(stderr, "order %d: %s\n", k, r.status().ToString().c_str());
      return 1;
    }
    all.emplace_back(r->all);
    scheduled.emplace_back(r->scheduled);
  }
  std::printf("%d orders of %d trials from %zu recorded; median / p90 over orders\n",
              config.orders, config.trials, pool.size());
  std::printf("%-18s %17s %17s %17s %10s\n", "", "c-s median APE", "mem under-pred",
              "mem median slack", "meet bars");
  PrintSpread("all predicted", all);
  PrintSpread("from >= 3 ended", scheduled);
  return 0;
}

int Run(const BenchConfig& config) {
  std::vector<TrainerRun> runs;
  for (const std::string& path : config.replay) {
    for (TrainerRun& run : Replayed(path)) runs.push_back(std::move(run));
  }
  if (config.orders > 0) return RunOrders(config, runs);
  const bool live = config.replay.empty();
  if (live) {
    std::mt19937 rng(config.seed);
    for (int i = 0; i < config.trials; ++i) runs.push_back(Draw(config, rng));
  }
  std::ofstream record;
  if (!config.record.empty()) record.open(config.record);
  absl::StatusOr<StudyResult> r = RunStudy(config, std::move(runs), live, true, &record);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  PrintSummary(r->all, r->scheduled);
  std::printf("\nstep exponent %.3f; %s\n", r->step_exponent, r->explanation.c_str());
  std::printf("median share of a trial's process wall time not in its curve (start-up, data, "
              "evaluation): %s\n", Percent(r->startup_share).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BenchConfig config;
  const std::string self = argv[0];
  config.trainer = self.substr(0, self.find_last_of('/') + 1) + "evoscale-trainer";
  CLI::App app("trial_cost_bench: the trial cost model on real evoscale-trainer runs",
               "trial_cost_bench");
  app.add_option("--trials", config.trials, "trials to run (default 20)");
  app.add_option("--seed", config.seed, "seed of the trials' draws (default 1)");
  app.add_option("--rows", config.rows, "synthetic rows per trial (default 100000)");
  app.add_option("--stopped-share", config.stopped_share,
                 "share of trials stopped early (default 0.25)");
  app.add_option("--progress-every", config.progress_every, "steps between progress lines");
  app.add_option("--trainer", config.trainer, "evoscale-trainer (default: beside this binary)");
  app.add_option("--record", config.record, "write each trial's telemetry as JSON lines");
  app.add_option("--replay", config.replay,
                 "read trials from --record files instead of running them (repeatable)");
  app.add_option("--orders", config.orders,
                 "with --replay: K studies of --trials trials drawn from the files' pool");
  app.add_option("--min-feature-t", config.model.min_feature_t,
                 "the model's min_feature_t (default 3)");
  app.add_option("--min-margin", config.model.min_margin, "the model's min_margin (default 0.05)");
  app.add_flag("--explain", config.explain, "print each prediction's explanation");
  CLI11_PARSE(app, argc, argv);
  return Run(config);
}
