// search_bench: quality of evoscale's designers on the objectives of
// ../shared/bench/hpo/functions.py (median regret after a budget, over seeds), sequentially
// and with several suggestions at a time, and NSGA2 against random search on ZDT1/ZDT2
// (hypervolume). Runs on the library, or with --server on a running evoscaled over gRPC.
// Human-readable tables go to stdout; --json_out writes one JSON object per result line for
// run_search_bench.sh to set beside Optuna's.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/search/functions.h"
#include "bench/search/study_driver.h"
#include "search/types.h"

ABSL_FLAG(int, budget, 200, "trials per study");
ABSL_FLAG(int, seeds, 5, "seeds per (function, algorithm): 0 .. seeds-1");
ABSL_FLAG(std::string, algorithms, "GENETIC,REGULARIZED_EVOLUTION,NSGA2,QUASI_RANDOM,RANDOM",
          "designers of the sequential table");
ABSL_FLAG(std::string, functions, "", "comma-separated subset of the functions (default all)");
ABSL_FLAG(int, parallel, 8, "suggestions per request in the parallel table (0 skips it)");
ABSL_FLAG(std::string, parallel_algorithms, "GENETIC", "designers of the parallel table");
ABSL_FLAG(int, zdt_budget, 300, "evaluations per ZDT study (0 skips ZDT)");
ABSL_FLAG(int, zdt_seeds, 5, "seeds per ZDT problem");
ABSL_FLAG(std::string, server, "", "HOST:PORT of a running evoscaled; empty = the library");
ABSL_FLAG(std::string, settings, "",
          "AlgorithmSpec.settings for every study of the quality tables: key=value,key=value");
ABSL_FLAG(std::string, json_out, "", "also write JSON lines of every result to this file");

namespace evoscale::bench {
namespace {

absl::StatusOr<std::unique_ptr<StudyDriver>> NewStudy(const StudySetup& setup) {
  const std::string server = absl::GetFlag(FLAGS_server);
  return server.empty() ? NewLibraryStudy(setup) : NewGrpcStudy(server, setup);
}

// Best value found in `budget` evaluations, asking `batch` suggestions at a time and telling
// all of them before asking again (batch parallel workers).
absl::StatusOr<double> Optimise(const Function& fn, search::Algorithm algorithm, uint64_t seed,
                                int budget, int batch) {
  StudySetup setup{.dims = fn.dims, .lower = fn.lower, .upper = fn.upper, .metrics = {"f"},
                   .algorithm = algorithm, .seed = seed, .max_trials = budget,
                   .settings = ParseSettings(absl::GetFlag(FLAGS_settings))};
  absl::StatusOr<std::unique_ptr<StudyDriver>> study = NewStudy(setup);
  if (!study.ok()) return study.status();
  double best = std::numeric_limits<double>::infinity();
  for (int done = 0; done < budget;) {
    absl::StatusOr<std::vector<Suggestion>> asked = (*study)->Suggest(std::min(batch, budget - done));
    if (!asked.ok()) return asked.status();
    if (asked->empty()) break;
    for (const Suggestion& s : *asked) {
      const double value = fn.f(s.x);
      best = std::min(best, value);
      if (absl::Status st = (*study)->Complete(s.id, {{"f", value}}); !st.ok()) return st;
      ++done;
    }
  }
  return best - fn.optimum;
}

struct Row {
  std::string fn, algorithm;
  int batch;
  std::vector<double> regrets;
};

void WriteJson(std::ofstream* out, const Row& row, int budget) {
  if (out == nullptr) return;
  const nlohmann::ordered_json line = {{"fn", row.fn},
                                       {"algorithm", row.algorithm},
                                       {"batch", row.batch},
                                       {"budget", budget},
                                       {"median_regret", Median(row.regrets)},
                                       {"regrets", row.regrets}};
  *out << line.dump() << "\n";
}

absl::Status QualityTable(const std::vector<Function>& functions,
                          const std::vector<search::Algorithm>& algorithms, int batch,
                          std::ofstream* json) {
  const int budget = absl::GetFlag(FLAGS_budget);
  const int seeds = absl::GetFlag(FLAGS_seeds);
  std::printf("\n## median regret, budget %d, %d seeds, %d suggestion(s) per request%s\n\n",
              budget, seeds, batch,
              absl::GetFlag(FLAGS_server).empty()
                  ? ""
                  : absl::StrCat(", via evoscaled at ", absl::GetFlag(FLAGS_server)).c_str());
  std::printf("| fn |");
  for (search::Algorithm a : algorithms) std::printf(" %s |", AlgorithmName(a).c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < algorithms.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Function& fn : functions) {
    std::printf("| %s |", fn.name.c_str());
    for (search::Algorithm a : algorithms) {
      Row row{fn.name, AlgorithmName(a), batch, {}};
      for (int seed = 0; seed < seeds; ++seed) {
        absl::StatusOr<double> regret = Optimise(fn, a, static_cast<uint64_t>(seed), budget, batch);
        if (!regret.ok()) return regret.status();
        row.regrets.push_back(*regret);
      }
      std::printf(" %.4g |", Median(row.regrets));
      std::fflush(stdout);
      WriteJson(json, row, budget);
    }
    std::printf("\n");
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ZdtHypervolume(int which, search::Algorithm algorithm, uint64_t seed,
                                      int budget) {
  constexpr int kDims = 10;
  StudySetup setup{.dims = kDims, .lower = 0, .upper = 1, .metrics = {"f1", "f2"},
                   .algorithm = algorithm, .seed = seed, .max_trials = budget};
  absl::StatusOr<std::unique_ptr<StudyDriver>> study = NewStudy(setup);
  if (!study.ok()) return study.status();
  std::vector<std::array<double, 2>> points;
  for (int done = 0; done < budget; ++done) {
    absl::StatusOr<std::vector<Suggestion>> asked = (*study)->Suggest(1);
    if (!asked.ok()) return asked.status();
    if (asked->empty()) break;
    const std::array<double, 2> f = Zdt(which, (*asked)[0].x);
    points.push_back(f);
    if (absl::Status st = (*study)->Complete((*asked)[0].id, {{"f1", f[0]}, {"f2", f[1]}});
        !st.ok()) {
      return st;
    }
  }
  // The reference point commonly used for ZDT (e.g. BoTorch's test problems).
  return Hypervolume2D(points, {11.0, 11.0});
}

absl::Status ZdtTable(std::ofstream* json) {
  const int budget = absl::GetFlag(FLAGS_zdt_budget);
  const int seeds = absl::GetFlag(FLAGS_zdt_seeds);
  std::printf("\n## ZDT hypervolume (reference point (11, 11); optimum 120.67 for ZDT1, "
              "120.33 for ZDT2), %d evaluations, 10-D\n\n",
              budget);
  std::printf("| problem | seed | NSGA2 | RANDOM | NSGA2 better |\n|---|---|---|---|---|\n");
  for (int which : {1, 2}) {
    int wins = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      absl::StatusOr<double> nsga =
          ZdtHypervolume(which, search::Algorithm::kNsga2, static_cast<uint64_t>(seed), budget);
      if (!nsga.ok()) return nsga.status();
      absl::StatusOr<double> random =
          ZdtHypervolume(which, search::Algorithm::kRandom, static_cast<uint64_t>(seed), budget);
      if (!random.ok()) return random.status();
      wins += *nsga > *random;
      std::printf("| ZDT%d | %d | %.3f | %.3f | %s |\n", which, seed, *nsga, *random,
                  *nsga > *random ? "yes" : "NO");
      if (json != nullptr) {
        const nlohmann::ordered_json line = {{"zdt", which},
                                             {"seed", seed},
                                             {"budget", budget},
                                             {"nsga2_hv", *nsga},
                                             {"random_hv", *random}};
        *json << line.dump() << "\n";
      }
    }
    std::printf("ZDT%d: NSGA2 beats RANDOM on %d of %d seeds\n", which, wins, seeds);
  }
  return absl::OkStatus();
}

int Main() {
  std::vector<Function> functions;
  const std::string wanted = absl::GetFlag(FLAGS_functions);
  for (const Function& fn : Functions()) {
    if (wanted.empty() || absl::StrContains(absl::StrCat(",", wanted, ","),
                                            absl::StrCat(",", fn.name, ","))) {
      functions.push_back(fn);
    }
  }
  absl::StatusOr<std::vector<search::Algorithm>> algorithms =
      ParseAlgorithms(absl::GetFlag(FLAGS_algorithms));
  absl::StatusOr<std::vector<search::Algorithm>> parallel_algorithms =
      ParseAlgorithms(absl::GetFlag(FLAGS_parallel_algorithms));
  if (!algorithms.ok() || !parallel_algorithms.ok()) {
    std::fprintf(stderr, "search_bench: %s\n",
                 (algorithms.ok() ? parallel_algorithms.status() : algorithms.status())
                     .ToString()
                     .c_str());
    return 2;
  }
  std::unique_ptr<std::ofstream> json;
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    json = std::make_unique<std::ofstream>(absl::GetFlag(FLAGS_json_out));
  }
  absl::Status st;
  if (!algorithms->empty() && !functions.empty()) {
    st = QualityTable(functions, *algorithms, 1, json.get());
  }
  const int parallel = absl::GetFlag(FLAGS_parallel);
  if (st.ok() && parallel > 1 && !parallel_algorithms->empty() && !functions.empty()) {
    st = QualityTable(functions, *parallel_algorithms, parallel, json.get());
  }
  if (st.ok() && absl::GetFlag(FLAGS_zdt_budget) > 0) st = ZdtTable(json.get());
  if (!st.ok()) {
    std::fprintf(stderr, "search_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace evoscale::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "search_bench [--server HOST:PORT] [--budget 200] [--seeds 5] [--parallel 8] "
      "[--json_out FILE]");
  absl::ParseCommandLine(argc, argv);
  return evoscale::bench::Main();
}
