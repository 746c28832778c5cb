#include "service/study/study_converter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "search/designers.h"
#include "search/importance.h"
#include "search/pareto.h"
#include "service/trial_template/trial_template.h"

namespace evoscale::service {
namespace {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using ::absl::StrFormat;


// A field path like `spec.parameters[2].double_spec`.
std::string Path(absl::string_view base, absl::string_view field, int index = -1) {
  return index < 0 ? StrCat(base, ".", field) : StrCat(base, ".", field, "[", index, "]");
}

absl::StatusOr<search::ScaleType> ToScale(v1::ParameterSpec::ScaleType s, absl::string_view path) {
  switch (s) {
    case v1::ParameterSpec::SCALE_TYPE_UNSPECIFIED:
    case v1::ParameterSpec::LINEAR:
      return search::ScaleType::kLinear;
    case v1::ParameterSpec::LOG:
      return search::ScaleType::kLog;
    case v1::ParameterSpec::REVERSE_LOG:
      return search::ScaleType::kReverseLog;
    default:
      return InvalidArgumentError(StrCat(path, ".scale: unknown scale type ", s));
  }
}

// Each kind's step checks its value spec at `f`, the path of that spec's field, and fills
// the kind's fields of `c`; `c->scale` is already set.
absl::Status DoubleRange(const v1::ParameterSpec::DoubleSpec& d, const std::string& f,
                         search::ParameterConfig* c) {
  c->type = search::ParameterType::kDouble;
  if (!std::isfinite(d.min()) || !std::isfinite(d.max())) {
    return InvalidArgumentError(StrCat(f, ": min and max must be finite"));
  }
  if (!(d.min() < d.max())) {
    return InvalidArgumentError(StrFormat("%s: min %g must be < max %g", f, d.min(), d.max()));
  }
  if (c->scale != search::ScaleType::kLinear && d.min() <= 0) {
    return InvalidArgumentError(StrFormat("%s: min %g must be > 0 for a log scale", f, d.min()));
  }
  c->min = d.min();
  c->max = d.max();
  return absl::OkStatus();
}

absl::Status IntegerRange(const v1::ParameterSpec::IntegerSpec& d, const std::string& f,
                          search::ParameterConfig* c) {
  c->type = search::ParameterType::kInteger;
  if (d.min() > d.max()) {
    return InvalidArgumentError(StrFormat("%s: min %d must be <= max %d", f, d.min(), d.max()));
  }
  constexpr int64_t kLimit = int64_t{1} << 53;  // exactly representable in a double
  if (d.min() < -kLimit || d.max() > kLimit) {
    return InvalidArgumentError(StrCat(f, ": bounds must lie within +-2^53"));
  }
  if (c->scale != search::ScaleType::kLinear && d.min() <= 0) {
    return InvalidArgumentError(StrFormat("%s: min %d must be > 0 for a log scale", f, d.min()));
  }
  c->min = static_cast<double>(d.min());
  c->max = static_cast<double>(d.max());
  return absl::OkStatus();
}

// The values' count, shared by the discrete and the categorical kinds.
template <typename Values>
absl::Status ValueCount(const Values& values, const std::string& f) {
  if (values.empty()) return InvalidArgumentError(StrCat(f, ": must not be empty"));
  if (values.size() > kMaxValuesPerParameter) {
    return InvalidArgumentError(StrCat(f, ": more than ", kMaxValuesPerParameter, " values"));
  }
  return absl::OkStatus();
}

absl::Status DiscreteValues(const v1::ParameterSpec::DiscreteSpec& d, const std::string& f,
                            search::ParameterConfig* c) {
  const auto& values = d.values();
  c->type = search::ParameterType::kDiscrete;
  if (absl::Status s = ValueCount(values, f); !s.ok()) return s;
  const bool log_scale = c->scale != search::ScaleType::kLinear;
  for (int i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return InvalidArgumentError(StrFormat("%s[%d]: must be finite", f, i));
    }
    if (log_scale && values[i] <= 0) {
      return InvalidArgumentError(
          StrFormat("%s[%d]: %g must be > 0 for a log scale", f, i, values[i]));
    }
  }
  // Ascending, as search::ParameterConfig keeps them; a duplicate then sits next to its twin.
  c->discrete_values.assign(values.begin(), values.end());
  std::sort(c->discrete_values.begin(), c->discrete_values.end());
  auto dup = std::adjacent_find(c->discrete_values.begin(), c->discrete_values.end());
  if (dup != c->discrete_values.end()) {
    return InvalidArgumentError(StrFormat("%s: duplicate value %g", f, *dup));
  }
  return absl::OkStatus();
}

// `path` is the parameter's own: a scale on a categorical parameter is the parameter's error.
absl::Status CategoricalValues(const v1::ParameterSpec::CategoricalSpec& d, const std::string& f,
                               const std::string& path, search::ParameterConfig* c) {
  const auto& values = d.values();
  c->type = search::ParameterType::kCategorical;
  if (absl::Status s = ValueCount(values, f); !s.ok()) return s;
  if (c->scale != search::ScaleType::kLinear) {
    return InvalidArgumentError(StrCat(path, ".scale: a categorical parameter takes no scale"));
  }
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < values.size(); ++i) {
    if (values[i].empty()) {
      return InvalidArgumentError(StrFormat("%s[%d]: must not be empty", f, i));
    }
    if (!seen.insert(values[i]).second) {
      return InvalidArgumentError(StrFormat("%s[%d]: duplicate value \"%s\"", f, i, values[i]));
    }
  }
  c->categories.assign(values.begin(), values.end());
  return absl::OkStatus();
}

// Fills `c`'s type and values from whichever value spec `p` sets.
absl::Status ParameterValues(const v1::ParameterSpec& p, const std::string& path,
                             search::ParameterConfig* c) {
  switch (p.parameter_value_spec_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      return DoubleRange(p.double_spec(), Path(path, "double_spec"), c);
    case v1::ParameterSpec::kIntegerSpec:
      return IntegerRange(p.integer_spec(), Path(path, "integer_spec"), c);
    case v1::ParameterSpec::kDiscreteSpec:
      return DiscreteValues(p.discrete_spec(), Path(path, "discrete_spec.values"), c);
    case v1::ParameterSpec::kCategoricalSpec:
      return CategoricalValues(p.categorical_spec(), Path(path, "categorical_spec.values"), path,
                               c);
    case v1::ParameterSpec::PARAMETER_VALUE_SPEC_NOT_SET:
      break;
  }
  return InvalidArgumentError(StrCat(
      path, ": one of double_spec, integer_spec, discrete_spec, categorical_spec must be set"));
}

class SpecValidator {
 public:
  absl::StatusOr<search::ParameterConfig> Parameter(const v1::ParameterSpec& p,
                                                    const std::string& path, int depth) {
    if (depth > kMaxConditionDepth) {
      return InvalidArgumentError(
          StrCat(path, ": conditional parameters nest deeper than ", kMaxConditionDepth));
    }
    if (absl::Status s = NewName(p, path); !s.ok()) return s;
    search::ParameterConfig c;
    c.name = p.name();
    absl::StatusOr<search::ScaleType> scale = ToScale(p.scale(), path);
    if (!scale.ok()) return scale.status();
    c.scale = *scale;
    if (absl::Status s = ParameterValues(p, path, &c); !s.ok()) return s;
    for (int i = 0; i < p.children_size(); ++i) {
      const std::string cp = Path(path, "children", i);
      absl::StatusOr<search::ConditionalChild> child = Child(c, p.children(i), cp, depth);
      if (!child.ok()) return child.status();
      c.children.push_back(*std::move(child));
    }
    return c;
  }

 private:
  // Checks `p`'s name and counts it: names are unique across the whole tree of parameters,
  // children included, and so is the limit on their number.
  absl::Status NewName(const v1::ParameterSpec& p, const std::string& path) {
    if (p.name().empty()) return InvalidArgumentError(StrCat(path, ".name: must not be empty"));
    if (p.name().size() > kMaxNameLength) {
      return InvalidArgumentError(StrCat(path, ".name: longer than ", kMaxNameLength));
    }
    if (!names_.insert(p.name()).second) {
      return InvalidArgumentError(
          StrCat(path, ".name: duplicate parameter name \"", p.name(), "\""));
    }
    if (++count_ > kMaxParameters) {
      return InvalidArgumentError(StrCat(path, ": more than ", kMaxParameters, " parameters"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<search::ConditionalChild> Child(const search::ParameterConfig& parent,
                                                 const v1::ParameterSpec::ConditionalParameterSpec& ch,
                                                 const std::string& path, int depth) {
    search::ConditionalChild out;
    switch (parent.type) {
      case search::ParameterType::kDouble:
        return InvalidArgumentError(
            StrCat(path, ": a DOUBLE parameter cannot have conditional children"));
      case search::ParameterType::kDiscrete: {
        if (ch.parent_discrete_values().empty()) {
          return InvalidArgumentError(
              StrCat(path, ".parent_discrete_values: must not be empty for a DISCRETE parent"));
        }
        for (int i = 0; i < ch.parent_discrete_values_size(); ++i) {
          double v = ch.parent_discrete_values(i);
          if (!std::binary_search(parent.discrete_values.begin(), parent.discrete_values.end(), v)) {
            return InvalidArgumentError(
                StrFormat("%s.parent_discrete_values[%d]: %g is not a value of \"%s\"", path, i,
                          v, parent.name));
          }
          out.parent_numbers.push_back(v);
        }
        break;
      }
      case search::ParameterType::kInteger: {
        if (ch.parent_int_values().empty()) {
          return InvalidArgumentError(
              StrCat(path, ".parent_int_values: must not be empty for an INTEGER parent"));
        }
        for (int i = 0; i < ch.parent_int_values_size(); ++i) {
          int64_t v = ch.parent_int_values(i);
          if (v < parent.min || v > parent.max) {
            return InvalidArgumentError(
                StrFormat("%s.parent_int_values[%d]: %d is outside [%g, %g] of \"%s\"", path, i,
                          v, parent.min, parent.max, parent.name));
          }
          out.parent_numbers.push_back(static_cast<double>(v));
        }
        break;
      }
      case search::ParameterType::kCategorical: {
        if (ch.parent_categorical_values().empty()) {
          return InvalidArgumentError(StrCat(
              path, ".parent_categorical_values: must not be empty for a CATEGORICAL parent"));
        }
        for (int i = 0; i < ch.parent_categorical_values_size(); ++i) {
          const std::string& v = ch.parent_categorical_values(i);
          if (std::find(parent.categories.begin(), parent.categories.end(), v) ==
              parent.categories.end()) {
            return InvalidArgumentError(
                StrFormat("%s.parent_categorical_values[%d]: \"%s\" is not a value of \"%s\"",
                          path, i, v, parent.name));
          }
          out.parent_categories.push_back(v);
        }
        break;
      }
    }
    if (!ch.has_parameter_spec()) {
      return InvalidArgumentError(StrCat(path, ".parameter_spec: must be set"));
    }
    absl::StatusOr<search::ParameterConfig> p =
        Parameter(ch.parameter_spec(), Path(path, "parameter_spec"), depth + 1);
    if (!p.ok()) return p.status();
    out.parameters.push_back(*std::move(p));
    return out;
  }

  absl::flat_hash_set<std::string> names_;
  int count_ = 0;
};

absl::StatusOr<search::Algorithm> ToAlgorithm(v1::AlgorithmSpec::Algorithm a) {
  switch (a) {
    case v1::AlgorithmSpec::ALGORITHM_UNSPECIFIED:
    case v1::AlgorithmSpec::GENETIC:
      return search::Algorithm::kGenetic;
    case v1::AlgorithmSpec::REGULARIZED_EVOLUTION:
      return search::Algorithm::kRegularizedEvolution;
    case v1::AlgorithmSpec::NSGA2:
      return search::Algorithm::kNsga2;
    case v1::AlgorithmSpec::RANDOM:
      return search::Algorithm::kRandom;
    case v1::AlgorithmSpec::QUASI_RANDOM:
      return search::Algorithm::kQuasiRandom;
    case v1::AlgorithmSpec::GRID:
      return search::Algorithm::kGrid;
    default:
      return InvalidArgumentError(StrCat("spec.algorithm.algorithm: unknown algorithm ", a));
  }
}

// Finds the config of an active parameter named `name` given the values chosen so far.
const search::ParameterConfig* FindParameter(const std::vector<search::ParameterConfig>& ps,
                                             absl::string_view name) {
  for (const auto& p : ps) {
    if (p.name == name) return &p;
    for (const auto& ch : p.children) {
      if (const auto* f = FindParameter(ch.parameters, name)) return f;
    }
  }
  return nullptr;
}

bool ChildActive(const search::ConditionalChild& ch, const search::ParameterValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    return std::find(ch.parent_categories.begin(), ch.parent_categories.end(), *s) !=
           ch.parent_categories.end();
  }
  double x = std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v))
                                                : std::get<double>(v);
  return std::find(ch.parent_numbers.begin(), ch.parent_numbers.end(), x) !=
         ch.parent_numbers.end();
}

// Appends the names of the parameters active under `values` to `active`.
void ActiveNames(const std::vector<search::ParameterConfig>& ps,
                 const search::ParameterDict& values, std::vector<const search::ParameterConfig*>* active) {
  for (const auto& p : ps) {
    active->push_back(&p);
    auto it = values.find(p.name);
    if (it == values.end()) continue;
    for (const auto& ch : p.children) {
      if (ChildActive(ch, it->second)) ActiveNames(ch.parameters, values, active);
    }
  }
}

}  // namespace

namespace {

absl::StatusOr<std::vector<search::MetricConfig>> ToMetrics(const v1::StudySpec& spec) {
  if (spec.metrics().empty()) return InvalidArgumentError("spec.metrics: at least one metric is required");
  if (spec.metrics_size() > kMaxMetrics) {
    return InvalidArgumentError(StrCat("spec.metrics: more than ", kMaxMetrics, " metrics"));
  }
  std::vector<search::MetricConfig> metrics;
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < spec.metrics_size(); ++i) {
    const auto& m = spec.metrics(i);
    const std::string path = StrCat("spec.metrics[", i, "]");
    if (m.name().empty()) return InvalidArgumentError(StrCat(path, ".name: must not be empty"));
    if (m.name().size() > kMaxNameLength) {
      return InvalidArgumentError(StrCat(path, ".name: longer than ", kMaxNameLength));
    }
    if (!names.insert(m.name()).second) {
      return InvalidArgumentError(StrCat(path, ".name: duplicate metric name \"", m.name(), "\""));
    }
    search::MetricConfig mc;
    mc.name = m.name();
    switch (m.goal()) {
      case v1::MetricSpec::MAXIMIZE:
        mc.goal = search::Goal::kMaximize;
        break;
      case v1::MetricSpec::MINIMIZE:
        mc.goal = search::Goal::kMinimize;
        break;
      default:
        return InvalidArgumentError(StrCat(path, ".goal: must be MAXIMIZE or MINIMIZE"));
    }
    if (m.has_safety_threshold()) {
      if (!std::isfinite(m.safety_threshold())) {
        return InvalidArgumentError(StrCat(path, ".safety_threshold: must be finite"));
      }
      mc.safety_threshold = m.safety_threshold();
    }
    metrics.push_back(std::move(mc));
  }
  return metrics;
}

absl::StatusOr<std::vector<search::ParameterConfig>> ToParameters(const v1::StudySpec& spec) {
  if (spec.parameters().empty()) {
    return InvalidArgumentError("spec.parameters: at least one parameter is required");
  }
  std::vector<search::ParameterConfig> parameters;
  SpecValidator validator;
  for (int i = 0; i < spec.parameters_size(); ++i) {
    absl::StatusOr<search::ParameterConfig> p =
        validator.Parameter(spec.parameters(i), StrCat("spec.parameters[", i, "]"), 0);
    if (!p.ok()) return p.status();
    parameters.push_back(*std::move(p));
  }
  return parameters;
}

// The algorithm, its settings and the seed, into `problem`.
absl::Status SetAlgorithm(const v1::AlgorithmSpec& spec, search::ProblemStatement* problem) {
  absl::StatusOr<search::Algorithm> algorithm = ToAlgorithm(spec.algorithm());
  if (!algorithm.ok()) return algorithm.status();
  problem->algorithm = *algorithm;
  if (spec.settings_size() > kMaxSettings) {
    return InvalidArgumentError(StrCat("spec.algorithm.settings: more than ", kMaxSettings));
  }
  problem->settings.insert(spec.settings().begin(), spec.settings().end());
  if (absl::Status st = search::ValidateAlgorithmSettings(problem->algorithm, problem->settings);
      !st.ok()) {
    return absl::Status(st.code(), StrCat("spec.algorithm.", st.message()));
  }
  problem->seed = spec.seed();
  return absl::OkStatus();
}

absl::Status ValidateEarlyStopping(const v1::EarlyStoppingSpec& es) {
  switch (es.policy()) {
    case v1::EarlyStoppingSpec::POLICY_UNSPECIFIED:
    case v1::EarlyStoppingSpec::NONE:
    case v1::EarlyStoppingSpec::MEDIAN:
    case v1::EarlyStoppingSpec::ASHA:
    case v1::EarlyStoppingSpec::COST_AWARE:
      break;
    default:
      return InvalidArgumentError(
          StrCat("spec.early_stopping.policy: unknown policy ", es.policy()));
  }
  if (es.max_step() < 0) {
    return InvalidArgumentError(StrCat("spec.early_stopping.max_step: ", es.max_step(),
                                       " must be >= 1 (the step of a full run; 0 = unknown)"));
  }
  if (es.policy() == v1::EarlyStoppingSpec::COST_AWARE && es.max_step() < 1) {
    return InvalidArgumentError(
        "spec.early_stopping.max_step: 0 must be >= 1: COST_AWARE needs the step of a full run");
  }
  if (es.min_steps() < 0) return InvalidArgumentError("spec.early_stopping.min_steps: must be >= 0");
  if (es.min_trials() < 0) return InvalidArgumentError("spec.early_stopping.min_trials: must be >= 0");
  if (es.min_resource() < 0) {
    return InvalidArgumentError("spec.early_stopping.min_resource: must be >= 0");
  }
  if (es.reduction_factor() != 0 &&
      !(es.reduction_factor() > 1 && std::isfinite(es.reduction_factor()))) {
    return InvalidArgumentError(StrFormat(
        "spec.early_stopping.reduction_factor: %g must be > 1 (or 0 for the default 3)",
        es.reduction_factor()));
  }
  return absl::OkStatus();
}

// The budget, liveness and the trial template.
absl::Status ValidateBudgetAndTemplate(const v1::StudySpec& spec) {
  if (spec.max_trials() < 0) {
    return InvalidArgumentError(
        StrCat("spec.max_trials: ", spec.max_trials(), " must be >= 0 (0 = unlimited)"));
  }
  if (!(spec.budget_core_seconds() >= 0) || !std::isfinite(spec.budget_core_seconds())) {
    return InvalidArgumentError(StrFormat(
        "spec.budget_core_seconds: %g must be a finite number >= 0 (0 = no budget)",
        spec.budget_core_seconds()));
  }
  if (!(spec.heartbeat_timeout_seconds() >= 0) || !std::isfinite(spec.heartbeat_timeout_seconds())) {
    return InvalidArgumentError(StrFormat(
        "spec.heartbeat_timeout_seconds: %g must be >= 0 (0 = default)",
        spec.heartbeat_timeout_seconds()));
  }
  if (spec.max_trial_retries() < 0) {
    return InvalidArgumentError("spec.max_trial_retries: must be >= 0 (0 = default)");
  }
  if (absl::Status st =
          ValidateResources(spec.trial_template().resources(), "spec.trial_template.resources");
      !st.ok()) {
    return st;
  }
  return ValidateTrialTemplate(spec);
}

}  // namespace

absl::StatusOr<search::ProblemStatement> ToProblem(const v1::StudySpec& spec) {
  search::ProblemStatement problem;
  absl::StatusOr<std::vector<search::MetricConfig>> metrics = ToMetrics(spec);
  if (!metrics.ok()) return metrics.status();
  problem.metrics = *std::move(metrics);
  absl::StatusOr<std::vector<search::ParameterConfig>> parameters = ToParameters(spec);
  if (!parameters.ok()) return parameters.status();
  problem.space.parameters = *std::move(parameters);
  if (absl::Status st = SetAlgorithm(spec.algorithm(), &problem); !st.ok()) return st;
  if (absl::Status st = ValidateEarlyStopping(spec.early_stopping()); !st.ok()) return st;
  if (ToEarlyStopping(spec).policy == search::EarlyStoppingPolicy::kCostAware) {
    int objectives = 0;
    for (const search::MetricConfig& m : problem.metrics) objectives += m.safety_threshold ? 0 : 1;
    if (objectives != 1) {
      return InvalidArgumentError(StrCat(
          "spec.early_stopping.policy: COST_AWARE needs exactly one objective metric (the study "
          "has ", objectives, ")"));
    }
  }
  if (absl::Status st = ValidateBudgetAndTemplate(spec); !st.ok()) return st;
  problem.budget_core_seconds = spec.budget_core_seconds();
  problem.max_step = spec.early_stopping().max_step();
  return problem;
}

const search::MetricConfig& PrimaryMetric(const search::ProblemStatement& problem) {
  for (const auto& m : problem.metrics) {
    if (!m.safety_threshold.has_value()) return m;
  }
  return problem.metrics.front();
}

double HeldCores(const v1::Trial& trial) {
  return trial.resources().cpu_cores() > 0 ? trial.resources().cpu_cores() : 1.0;
}

bool PromotesStoppedTrials(const v1::StudySpec& spec) {
  return ToEarlyStopping(spec).policy == search::EarlyStoppingPolicy::kCostAware &&
         !spec.trial_template().command().empty() &&
         ResumesFromCheckpoint(spec.trial_template());
}

double TrialCoreSeconds(const v1::Trial& trial) {
  const double cores = HeldCores(trial);
  double seconds = trial.usage().wall_seconds();
  for (const v1::Measurement& m : trial.measurements()) {
    seconds = std::max(seconds, m.elapsed_seconds());
  }
  seconds = std::max(seconds, trial.final_measurement().elapsed_seconds());
  return cores * seconds;
}

search::EarlyStoppingConfig ToEarlyStopping(const v1::StudySpec& study) {
  const v1::EarlyStoppingSpec& spec = study.early_stopping();
  search::EarlyStoppingConfig c;
  v1::EarlyStoppingSpec::Policy policy = spec.policy();
  // A budget makes COST_AWARE the default, once the study says what a full run is.
  if (policy == v1::EarlyStoppingSpec::POLICY_UNSPECIFIED && study.budget_core_seconds() > 0 &&
      spec.max_step() >= 1) {
    policy = v1::EarlyStoppingSpec::COST_AWARE;
  }
  switch (policy) {
    case v1::EarlyStoppingSpec::MEDIAN:
      c.policy = search::EarlyStoppingPolicy::kMedian;
      break;
    case v1::EarlyStoppingSpec::ASHA:
      c.policy = search::EarlyStoppingPolicy::kAsha;
      break;
    case v1::EarlyStoppingSpec::COST_AWARE:
      c.policy = search::EarlyStoppingPolicy::kCostAware;
      break;
    default:
      c.policy = search::EarlyStoppingPolicy::kNone;
      break;
  }
  c.min_steps = spec.min_steps();
  if (spec.min_trials() > 0) c.min_trials = spec.min_trials();
  if (spec.min_resource() > 0) c.min_resource = spec.min_resource();
  if (spec.reduction_factor() > 1) c.reduction_factor = spec.reduction_factor();
  c.max_step = spec.max_step();
  return c;
}

namespace {

// Each kind's step reads the value of `p`, the parameter at `f` whose config is `c`, and
// checks it against that config.
absl::StatusOr<search::ParameterValue> NumberValue(const search::ParameterConfig& c,
                                                   const v1::Parameter& p, const std::string& f) {
  double x;
  if (p.value_case() == v1::Parameter::kDoubleValue) {
    x = p.double_value();
  } else if (p.value_case() == v1::Parameter::kIntValue) {
    x = static_cast<double>(p.int_value());
  } else {
    return InvalidArgumentError(
        StrCat(f, ": parameter \"", p.name(), "\" takes a number (double_value)"));
  }
  if (!std::isfinite(x)) return InvalidArgumentError(StrCat(f, ".double_value: must be finite"));
  if (c.type == search::ParameterType::kDouble && (x < c.min || x > c.max)) {
    return InvalidArgumentError(StrFormat("%s.double_value: %g is outside [%g, %g] of \"%s\"", f, x,
                                          c.min, c.max, p.name()));
  }
  if (c.type == search::ParameterType::kDiscrete &&
      !std::binary_search(c.discrete_values.begin(), c.discrete_values.end(), x)) {
    return InvalidArgumentError(
        StrFormat("%s.double_value: %g is not a value of \"%s\"", f, x, p.name()));
  }
  return x;
}

// An integer may come as a double_value too, while it is a whole number that a double holds
// exactly.
absl::StatusOr<search::ParameterValue> IntegerValue(const search::ParameterConfig& c,
                                                    const v1::Parameter& p, const std::string& f) {
  int64_t x;
  if (p.value_case() == v1::Parameter::kIntValue) {
    x = p.int_value();
  } else if (p.value_case() == v1::Parameter::kDoubleValue &&
             std::trunc(p.double_value()) == p.double_value() &&
             std::fabs(p.double_value()) < 9e15) {
    x = static_cast<int64_t>(p.double_value());
  } else {
    return InvalidArgumentError(
        StrCat(f, ": parameter \"", p.name(), "\" takes an integer (int_value)"));
  }
  if (x < c.min || x > c.max) {
    return InvalidArgumentError(
        StrFormat("%s.int_value: %d is outside [%g, %g] of \"%s\"", f, x, c.min, c.max, p.name()));
  }
  return x;
}

absl::StatusOr<search::ParameterValue> CategoricalValue(const search::ParameterConfig& c,
                                                        const v1::Parameter& p,
                                                        const std::string& f) {
  if (p.value_case() != v1::Parameter::kStringValue) {
    return InvalidArgumentError(
        StrCat(f, ": parameter \"", p.name(), "\" takes a string (string_value)"));
  }
  if (std::find(c.categories.begin(), c.categories.end(), p.string_value()) == c.categories.end()) {
    return InvalidArgumentError(StrCat(f, ".string_value: \"", p.string_value(),
                                       "\" is not a value of \"", p.name(), "\""));
  }
  return p.string_value();
}

absl::StatusOr<search::ParameterValue> ToParameterValue(const search::ParameterConfig& c,
                                                        const v1::Parameter& p,
                                                        const std::string& f) {
  switch (c.type) {
    case search::ParameterType::kDouble:
    case search::ParameterType::kDiscrete:
      return NumberValue(c, p, f);
    case search::ParameterType::kInteger:
      return IntegerValue(c, p, f);
    case search::ParameterType::kCategorical:
      return CategoricalValue(c, p, f);
  }
  return search::ParameterValue();  // unreachable: every type is a case
}

// Exactly the active parameters must be present: each active one given, and no other (a
// child whose parent's value does not select it).
absl::Status CheckActive(const search::SearchSpace& space, const search::ParameterDict& dict,
                         absl::string_view path) {
  std::vector<const search::ParameterConfig*> active;
  ActiveNames(space.parameters, dict, &active);
  for (const auto* c : active) {
    if (!dict.contains(c->name)) {
      return InvalidArgumentError(StrCat(path, ": missing parameter \"", c->name, "\""));
    }
  }
  if (active.size() != dict.size()) {
    for (const auto& entry : dict) {
      const std::string& name = entry.first;
      if (std::none_of(active.begin(), active.end(),
                       [&](const search::ParameterConfig* c) { return c->name == name; })) {
        return InvalidArgumentError(
            StrCat(path, ": parameter \"", name, "\" is inactive under its parent's value"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<search::ParameterDict> ToParameterDict(
    const search::SearchSpace& space,
    const google::protobuf::RepeatedPtrField<v1::Parameter>& params, absl::string_view path) {
  search::ParameterDict dict;
  for (int i = 0; i < params.size(); ++i) {
    const v1::Parameter& p = params[i];
    const std::string f = StrCat(path, "[", i, "]");
    const search::ParameterConfig* c = FindParameter(space.parameters, p.name());
    if (c == nullptr) {
      return InvalidArgumentError(StrCat(f, ".name: unknown parameter \"", p.name(), "\""));
    }
    if (dict.contains(p.name())) {
      return InvalidArgumentError(StrCat(f, ".name: parameter \"", p.name(), "\" given twice"));
    }
    absl::StatusOr<search::ParameterValue> v = ToParameterValue(*c, p, f);
    if (!v.ok()) return v.status();
    dict.emplace(p.name(), *std::move(v));
  }
  if (absl::Status s = CheckActive(space, dict, path); !s.ok()) return s;
  return dict;
}

absl::Status ValidateMeasurement(const v1::Measurement& m, absl::string_view path) {
  if (m.step() < 0) return InvalidArgumentError(StrCat(path, ".step: must be >= 0"));
  if (!std::isfinite(m.elapsed_seconds()) || m.elapsed_seconds() < 0) {
    return InvalidArgumentError(StrCat(path, ".elapsed_seconds: must be finite and >= 0"));
  }
  if (m.metrics_size() > kMaxMetrics) {
    return InvalidArgumentError(StrCat(path, ".metrics: more than ", kMaxMetrics, " metrics"));
  }
  // Sorted so the error names the same metric every time.
  std::vector<std::pair<std::string, double>> metrics(m.metrics().begin(), m.metrics().end());
  std::sort(metrics.begin(), metrics.end());
  for (const auto& [name, value] : metrics) {
    if (name.empty()) return InvalidArgumentError(StrCat(path, ".metrics: empty metric name"));
    if (!std::isfinite(value)) {
      return InvalidArgumentError(
          StrFormat("%s.metrics[\"%s\"]: %g is not a finite number", path, name, value));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateResources(const v1::ResourceRequest& r, absl::string_view path) {
  if (!(r.cpu_cores() >= 0) || !std::isfinite(r.cpu_cores()) || r.memory_bytes() < 0 ||
      r.gpus() < 0) {
    return InvalidArgumentError(StrCat(path, ": must be finite and >= 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateUsage(const v1::TrialUsage& u, absl::string_view path) {
  const struct {
    const char* name;
    double value;
  } fields[] = {{"peak_memory_bytes", static_cast<double>(u.peak_memory_bytes())},
                {"cpu_seconds", u.cpu_seconds()},
                {"mean_cpu_cores", u.mean_cpu_cores()},
                {"wall_seconds", u.wall_seconds()},
                {"oom_kills", static_cast<double>(u.oom_kills())}};
  for (const auto& f : fields) {
    if (!std::isfinite(f.value) || f.value < 0) {
      return InvalidArgumentError(
          StrFormat("%s.%s: %g must be finite and >= 0", path, f.name, f.value));
    }
  }
  if (u.enforcement().size() > kMaxNameLength) {
    return InvalidArgumentError(StrCat(path, ".enforcement: longer than ", kMaxNameLength));
  }
  return absl::OkStatus();
}

void SetParameters(const search::ParameterDict& params, v1::Trial* trial) {
  trial->clear_parameters();
  for (const auto& [name, value] : params) {
    v1::Parameter* p = trial->add_parameters();
    p->set_name(name);
    if (const auto* d = std::get_if<double>(&value)) {
      p->set_double_value(*d);
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      p->set_int_value(*i);
    } else {
      p->set_string_value(std::get<std::string>(value));
    }
  }
}

namespace {
search::Measurement ToSearchMeasurement(const v1::Measurement& m) {
  search::Measurement out;
  out.step = m.step();
  out.elapsed_seconds = m.elapsed_seconds();
  out.metrics.insert(m.metrics().begin(), m.metrics().end());
  return out;
}
}  // namespace

absl::StatusOr<std::vector<search::MetricConfig>> MetricConfigs(const v1::StudySpec& spec) {
  return ToMetrics(spec);
}

std::vector<int64_t> OptimalTrialIds(absl::Span<const search::MetricConfig> metrics,
                                     absl::Span<const v1::Trial> trials) {
  // Only what OptimalTrials reads: the id, the status and the final values.
  std::vector<search::Trial> succeeded;
  for (const v1::Trial& t : trials) {
    if (t.state() != v1::Trial::SUCCEEDED) continue;
    search::Trial st;
    st.id = t.id();
    st.status = search::TrialStatus::kSucceeded;
    st.final_measurement.metrics.insert(t.final_measurement().metrics().begin(),
                                        t.final_measurement().metrics().end());
    succeeded.push_back(std::move(st));
  }
  std::vector<int64_t> ids;
  for (size_t i : search::OptimalTrials(metrics, succeeded)) ids.push_back(succeeded[i].id);
  return ids;
}

search::Trial ToSearchTrial(const v1::Trial& trial) {
  search::Trial t;
  t.id = trial.id();
  for (const auto& p : trial.parameters()) {
    switch (p.value_case()) {
      case v1::Parameter::kDoubleValue:
        t.parameters.emplace(p.name(), p.double_value());
        break;
      case v1::Parameter::kIntValue:
        t.parameters.emplace(p.name(), p.int_value());
        break;
      case v1::Parameter::kStringValue:
        t.parameters.emplace(p.name(), p.string_value());
        break;
      case v1::Parameter::VALUE_NOT_SET:
        break;
    }
  }
  switch (trial.state()) {
    case v1::Trial::SUCCEEDED:
      t.status = search::TrialStatus::kSucceeded;
      break;
    case v1::Trial::INFEASIBLE:
      t.status = search::TrialStatus::kInfeasible;
      break;
    case v1::Trial::FAILED:
      t.status = search::TrialStatus::kFailed;
      break;
    case v1::Trial::STOPPED:  // a shortened run: never the best, ranked below every full one
      t.status = search::TrialStatus::kStopped;
      break;
    default:
      t.status = search::TrialStatus::kPending;
      break;
  }
  t.measurements.reserve(trial.measurements_size());
  for (const auto& m : trial.measurements()) t.measurements.push_back(ToSearchMeasurement(m));
  t.final_measurement = ToSearchMeasurement(trial.final_measurement());
  t.cpu_cores = HeldCores(trial);
  return t;
}

absl::StatusOr<v1::GetParameterImportanceResponse> ParameterImportanceOf(
    const search::ProblemStatement& problem, absl::Span<const v1::Trial> trials,
    const std::string& requested) {
  std::string metric = requested;
  if (metric.empty()) {
    metric = PrimaryMetric(problem).name;
  } else if (std::none_of(problem.metrics.begin(), problem.metrics.end(),
                          [&](const search::MetricConfig& m) { return m.name == metric; })) {
    std::vector<std::string> names;
    for (const search::MetricConfig& m : problem.metrics) {
      names.push_back(absl::StrCat("\"", m.name, "\""));
    }
    return absl::InvalidArgumentError(absl::StrCat("metric: \"", metric,
                                                   "\" is not a metric of the study (",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  std::vector<search::Trial> succeeded;
  for (const v1::Trial& t : trials) {
    if (t.state() != v1::Trial::SUCCEEDED || !t.final_measurement().metrics().contains(metric)) {
      continue;
    }
    succeeded.push_back(ToSearchTrial(t));
  }
  v1::GetParameterImportanceResponse resp;
  resp.set_metric(metric);
  resp.set_trial_count(static_cast<int32_t>(succeeded.size()));
  for (const search::ParameterImportance& p :
       search::MainEffectImportance(problem.space, succeeded, metric)) {
    v1::ParameterImportance* out = resp.add_parameters();
    out->set_name(p.name);
    out->set_importance(p.importance);
    out->set_explained_variance(p.explained_variance);
    out->set_trial_count(p.trials);
  }
  return resp;
}

}  // namespace evoscale::service
