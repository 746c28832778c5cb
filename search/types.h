// Plain C++ types of the search engine: search spaces, trials as the designers see them,
// metrics and algorithms. No protobuf here; service/ converts at the edge.
#ifndef EVOSCALE_SEARCH_TYPES_H_
#define EVOSCALE_SEARCH_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace evoscale::search {

enum class ScaleType { kLinear, kLog, kReverseLog };
enum class ParameterType { kDouble, kInteger, kDiscrete, kCategorical };

struct ParameterConfig;

// A child parameter, active only when its parent takes one of `parent_values`. For a
// DISCRETE or INTEGER parent the values are numbers; for a CATEGORICAL parent, strings.
struct ConditionalChild {
  std::vector<double> parent_numbers;
  std::vector<std::string> parent_categories;
  std::vector<ParameterConfig> parameters;  // exactly one element, kept in a vector so
                                            // ParameterConfig can stay an aggregate
};

struct ParameterConfig {
  std::string name;
  ParameterType type = ParameterType::kDouble;
  ScaleType scale = ScaleType::kLinear;
  double min = 0;  // kDouble, kInteger (integral value)
  double max = 0;
  std::vector<double> discrete_values;  // kDiscrete, sorted ascending, unique
  std::vector<std::string> categories;  // kCategorical, unique
  std::vector<ConditionalChild> children;
};

// Validated by the caller (service/ checks every field before building one).
struct SearchSpace {
  std::vector<ParameterConfig> parameters;  // top-level parameters
};

// A parameter value: kDouble and kDiscrete parameters take double, kInteger takes int64_t,
// kCategorical takes std::string.
using ParameterValue = std::variant<double, int64_t, std::string>;
// Only active parameters appear (inactive conditional children are absent).
using ParameterDict = std::map<std::string, ParameterValue>;

enum class Goal { kMaximize, kMinimize };
struct MetricConfig {
  std::string name;
  Goal goal = Goal::kMaximize;
  std::optional<double> safety_threshold;  // a constraint, not an objective to optimise
};

enum class Algorithm { kGenetic, kRegularizedEvolution, kNsga2, kRandom, kQuasiRandom, kGrid };

struct Measurement {
  int64_t step = 0;
  double elapsed_seconds = 0;
  std::map<std::string, double> metrics;
};

// kStopped: stopped early (a shortened run); its final measurement is its last intermediate one.
enum class TrialStatus { kPending, kSucceeded, kInfeasible, kFailed, kStopped };

// A trial as the designers see it.
struct Trial {
  int64_t id = 0;
  ParameterDict parameters;
  TrialStatus status = TrialStatus::kPending;
  std::vector<Measurement> measurements;  // intermediate, in order of arrival
  Measurement final_measurement;          // meaningful when status == kSucceeded
  double cpu_cores = 1;                   // the cores it holds (what a core-second costs it)
};

struct ProblemStatement {
  SearchSpace space;
  std::vector<MetricConfig> metrics;
  Algorithm algorithm = Algorithm::kGenetic;
  std::map<std::string, std::string> settings;
  uint64_t seed = 0;
  // Cost-aware search: the study's budget in core-seconds (0 = none) and the step of a full
  // run (0 = unknown). Designers that weigh cost read them; others ignore them.
  double budget_core_seconds = 0;
  int64_t max_step = 0;
};

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_TYPES_H_
