#include "search/designers.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "search/internal/evolutionary_designers.h"
#include "search/internal/random_designers.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

constexpr int kDefaultGridPoints = 10;

// One accepted setting: its key, what it must be (for the error message), and the check.
struct SettingSpec {
  absl::string_view key;
  absl::string_view requirement;  // "must be ..." without the value
  bool (*accepts)(absl::string_view value);
};

bool IntegerIn(absl::string_view value, int64_t lo, int64_t hi) {
  int64_t parsed = 0;
  return absl::SimpleAtoi(value, &parsed) && parsed >= lo && parsed <= hi;
}

bool NumberIn(absl::string_view value, double lo, bool lo_open, double hi) {
  double parsed = 0;
  if (!absl::SimpleAtod(value, &parsed) || !std::isfinite(parsed)) return false;
  return (lo_open ? parsed > lo : parsed >= lo) && parsed <= hi;
}

constexpr SettingSpec kPopulationSize{"population_size", "must be an integer in [4, 10000]",
                                      [](absl::string_view v) { return IntegerIn(v, 4, 10000); }};
constexpr SettingSpec kTournamentSize{
    "tournament_size", "must be an integer >= 2",
    [](absl::string_view v) { return IntegerIn(v, 2, INT32_MAX); }};
constexpr SettingSpec kMutationRate{
    "mutation_rate", "must be a number in (0, 1]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/true, 1); }};
constexpr SettingSpec kCrossoverRate{
    "crossover_rate", "must be a number in [0, 1]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/false, 1); }};
constexpr SettingSpec kLocalSearchRate{
    "local_search_rate", "must be a number in [0, 1]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/false, 1); }};
constexpr SettingSpec kInitialStep{
    "initial_step", "must be a number in (0, 1]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/true, 1); }};
constexpr SettingSpec kCandidates{"candidates", "must be an integer in [1, 256]",
                                  [](absl::string_view v) { return IntegerIn(v, 1, 256); }};
constexpr SettingSpec kMinMoveShare{
    "min_move_share", "must be a number in [0, 0.2]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/false, 0.2); }};
constexpr SettingSpec kRewardDecay{
    "reward_decay", "must be a number in [0, 1]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/false, 1); }};
constexpr SettingSpec kModelShare{
    "model_share", "must be a number in [0, 1]",
    [](absl::string_view v) { return NumberIn(v, 0, /*lo_open=*/false, 1); }};
constexpr SettingSpec kModelCandidates{
    "model_candidates", "must be an integer in [8, 4096]",
    [](absl::string_view v) { return IntegerIn(v, 8, 4096); }};
constexpr SettingSpec kGridPoints{"grid_points", "must be an integer in [2, 1000]",
                                  [](absl::string_view v) { return IntegerIn(v, 2, 1000); }};

std::vector<SettingSpec> KnownSettings(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kGenetic:
      return {kPopulationSize, kMutationRate, kCrossoverRate, kTournamentSize,
              kLocalSearchRate, kInitialStep, kCandidates, kMinMoveShare,
              kRewardDecay,    kModelShare,  kModelCandidates};
    case Algorithm::kRegularizedEvolution:
      return {kPopulationSize, kTournamentSize, kMutationRate};
    case Algorithm::kNsga2:
      return {kPopulationSize, kMutationRate, kCrossoverRate};
    case Algorithm::kGrid:
      return {kGridPoints};
    case Algorithm::kRandom:
    case Algorithm::kQuasiRandom:
      return {};
  }
  return {};
}

absl::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kGenetic:
      return "GENETIC";
    case Algorithm::kRegularizedEvolution:
      return "REGULARIZED_EVOLUTION";
    case Algorithm::kNsga2:
      return "NSGA2";
    case Algorithm::kRandom:
      return "RANDOM";
    case Algorithm::kQuasiRandom:
      return "QUASI_RANDOM";
    case Algorithm::kGrid:
      return "GRID";
  }
  return "UNKNOWN";
}

}  // namespace

absl::Status ValidateAlgorithmSettings(Algorithm algorithm,
                                       const std::map<std::string, std::string>& settings) {
  const std::vector<SettingSpec> known = KnownSettings(algorithm);
  for (const auto& [key, value] : settings) {
    const SettingSpec* spec = nullptr;
    for (const SettingSpec& candidate : known) {
      if (candidate.key == key) spec = &candidate;
    }
    if (spec == nullptr) {
      std::string known_keys = absl::StrJoin(
          known, ", ", [](std::string* out, const SettingSpec& s) { absl::StrAppend(out, s.key); });
      if (known_keys.empty()) known_keys = "none";
      return absl::InvalidArgumentError(
          absl::StrCat("settings[\"", absl::CHexEscape(key), "\"]: unknown setting for ",
                       AlgorithmName(algorithm), "; known: ", known_keys));
    }
    if (!spec->accepts(value)) {
      return absl::InvalidArgumentError(absl::StrCat("settings[\"", key, "\"]: ", spec->requirement,
                                                     ", got \"", absl::CHexEscape(value), "\""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Designer>> CreateDesigner(const ProblemStatement& problem) {
  if (absl::Status status = ValidateAlgorithmSettings(problem.algorithm, problem.settings);
      !status.ok()) {
    return status;
  }
  switch (problem.algorithm) {
    case Algorithm::kRandom:
      return internal::NewRandomDesigner(problem.space, problem.seed);
    case Algorithm::kQuasiRandom:
      return internal::NewQuasiRandomDesigner(problem.space, problem.seed);
    case Algorithm::kGrid: {
      int grid_points = kDefaultGridPoints;
      if (auto it = problem.settings.find("grid_points"); it != problem.settings.end()) {
        (void)absl::SimpleAtoi(it->second, &grid_points);  // validated above
      }
      return internal::NewGridDesigner(problem.space, grid_points);
    }
    case Algorithm::kGenetic:
      return internal::NewGeneticDesigner(problem);
    case Algorithm::kRegularizedEvolution:
      return internal::NewRegularizedEvolutionDesigner(problem);
    case Algorithm::kNsga2:
      return internal::NewNsga2Designer(problem);
  }
  return absl::UnimplementedError(
      absl::StrCat("algorithm ", static_cast<int>(problem.algorithm), " has no designer"));
}

}  // namespace evoscale::search
