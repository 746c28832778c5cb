#include "service/katib/katib_converter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "service/study/study_converter.h"

namespace evoscale::service {
namespace {

namespace katib = ::api::v1::beta1;
using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using ::absl::StrFormat;

// Katib runs the trials for as long as they take: none is ever handed to another client.
constexpr double kNeverHandOverSeconds = 100.0 * 365 * 24 * 3600;
// Katib labels a trial's pods with its name: a label value, at most 63 characters.
constexpr size_t kMaxTrialNameLength = 63;
// Katib's suggestion services (hyperopt, skopt, optuna) take their seed from this setting.
constexpr absl::string_view kSeedSetting = "random_state";

struct AlgorithmName {
  absl::string_view katib;
  v1::AlgorithmSpec::Algorithm algorithm;
};
constexpr AlgorithmName kAlgorithms[] = {
    {"evoscale-genetic", v1::AlgorithmSpec::GENETIC},
    {"evoscale-regularized-evolution", v1::AlgorithmSpec::REGULARIZED_EVOLUTION},
    {"evoscale-nsga2", v1::AlgorithmSpec::NSGA2},
    {"evoscale-random", v1::AlgorithmSpec::RANDOM},
};

std::string ParameterPath(int index) {
  return StrCat("experiment.spec.parameter_specs.parameters[", index, "]");
}

// The shortest text that reads back as exactly `x` ("0.001", "1e-05", "32").
std::string ShortestNumber(double x) {
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, r.ptr);
}

absl::StatusOr<double> ParseNumber(absl::string_view text, absl::string_view path) {
  double x = 0;
  if (!absl::SimpleAtod(text, &x) || !std::isfinite(x)) {
    return InvalidArgumentError(
        StrFormat("%s: \"%s\" is not a finite number", path, absl::CHexEscape(text)));
  }
  return x;
}

absl::StatusOr<int64_t> ParseInteger(absl::string_view text, absl::string_view path) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(text, &x)) {
    return InvalidArgumentError(
        StrFormat("%s: \"%s\" is not an integer", path, absl::CHexEscape(text)));
  }
  return x;
}

// min, min + step, ... up to max, each rounded to 12 significant digits (so that 0.1 + 2 * 0.1
// is the 0.3 a person wrote, not 0.30000000000000004).
absl::StatusOr<std::vector<double>> StepGrid(double min, double max, double step,
                                             const std::string& path) {
  if (!(step > 0)) {
    return InvalidArgumentError(StrFormat("%s.feasible_space.step: %g must be > 0", path, step));
  }
  if (min > max) {
    return InvalidArgumentError(
        StrFormat("%s.feasible_space: min %g must be <= max %g", path, min, max));
  }
  const double count = std::floor((max - min) / step + 1e-9) + 1;
  if (count > kMaxValuesPerParameter) {
    return InvalidArgumentError(
        StrFormat("%s.feasible_space.step: %g makes %.0f values from min to max; at most %d", path,
                  step, count, kMaxValuesPerParameter));
  }
  std::vector<double> grid;
  for (int k = 0; k < static_cast<int>(count); ++k) {
    double value = 0;
    (void)absl::SimpleAtod(StrFormat("%.12g", min + k * step), &value);
    if (grid.empty() || value > grid.back()) grid.push_back(value);
  }
  return grid;
}

// A study-spec error (ToProblem's paths start "spec.") in Katib's field names.
std::string KatibMessage(absl::string_view message) {
  absl::string_view rest = message;
  if (absl::ConsumePrefix(&rest, "spec.parameters[")) {
    const size_t close = rest.find(']');
    std::string field(rest.substr(close == absl::string_view::npos ? 0 : close + 1));
    for (const auto& [ours, theirs] :
         {std::pair{".double_spec", ".feasible_space"},
          std::pair{".integer_spec", ".feasible_space"},
          std::pair{".discrete_spec.values", ".feasible_space.list"},
          std::pair{".categorical_spec.values", ".feasible_space.list"},
          std::pair{".scale", ".feasible_space.distribution"}}) {
      if (absl::StartsWith(field, ours)) {
        field = StrCat(theirs, absl::string_view(field).substr(absl::string_view(ours).size()));
        break;
      }
    }
    return StrCat("experiment.spec.parameter_specs.parameters[",
                  rest.substr(0, close == absl::string_view::npos ? 0 : close + 1), field);
  }
  if (absl::ConsumePrefix(&rest, "spec.algorithm.settings")) {
    std::string out = StrCat("experiment.spec.algorithm.algorithm_settings", rest);
    if (absl::StrContains(rest, "unknown setting")) {
      absl::StrAppend(&out, ", ", kSeedSetting, " (the seed)");
    }
    return out;
  }
  if (absl::ConsumePrefix(&rest, "spec.metrics[0].name")) {
    return StrCat("experiment.spec.objective.objective_metric_name", rest);
  }
  return StrCat("experiment.spec, as an evoscale study: ", message);
}

v1::ParameterSpec::ScaleType ScaleOf(katib::Distribution d) {
  return d == katib::LOG_UNIFORM ? v1::ParameterSpec::LOG
                                 : v1::ParameterSpec::SCALE_TYPE_UNSPECIFIED;
}

// A parameter's values as Katib writes them: (value, text), as KatibExperiment::Parameter keeps.
using ValueGrid = std::vector<std::pair<double, std::string>>;

// A DOUBLE's feasible space (of the parameter at `path`): min and max, or the grid their step
// makes (written in the shortest text that reads back exactly).
absl::Status ConvertDoubleSpace(const katib::FeasibleSpace& space, const std::string& path,
                                v1::ParameterSpec* out, ValueGrid* grid) {
  const std::string space_path = StrCat(path, ".feasible_space");
  absl::StatusOr<double> min = ParseNumber(space.min(), StrCat(space_path, ".min"));
  if (!min.ok()) return min.status();
  absl::StatusOr<double> max = ParseNumber(space.max(), StrCat(space_path, ".max"));
  if (!max.ok()) return max.status();
  if (space.step().empty()) {
    out->mutable_double_spec()->set_min(*min);
    out->mutable_double_spec()->set_max(*max);
    return absl::OkStatus();
  }
  absl::StatusOr<double> step = ParseNumber(space.step(), StrCat(space_path, ".step"));
  if (!step.ok()) return step.status();
  absl::StatusOr<std::vector<double>> values = StepGrid(*min, *max, *step, path);
  if (!values.ok()) return values.status();
  for (double v : *values) {
    out->mutable_discrete_spec()->add_values(v);
    grid->emplace_back(v, ShortestNumber(v));
  }
  return absl::OkStatus();
}

// An INT's feasible space: min and max when the step is 1 (or not given), else the grid the
// step makes (written as integers).
absl::Status ConvertIntSpace(const katib::FeasibleSpace& space, const std::string& path,
                             v1::ParameterSpec* out, ValueGrid* grid) {
  const std::string space_path = StrCat(path, ".feasible_space");
  absl::StatusOr<int64_t> min = ParseInteger(space.min(), StrCat(space_path, ".min"));
  if (!min.ok()) return min.status();
  absl::StatusOr<int64_t> max = ParseInteger(space.max(), StrCat(space_path, ".max"));
  if (!max.ok()) return max.status();
  int64_t step = 1;
  if (!space.step().empty()) {
    absl::StatusOr<int64_t> parsed = ParseInteger(space.step(), StrCat(space_path, ".step"));
    if (!parsed.ok()) return parsed.status();
    step = *parsed;
  }
  if (step == 1) {
    out->mutable_integer_spec()->set_min(*min);
    out->mutable_integer_spec()->set_max(*max);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> values = StepGrid(
      static_cast<double>(*min), static_cast<double>(*max), static_cast<double>(step), path);
  if (!values.ok()) return values.status();
  for (double v : *values) {
    out->mutable_discrete_spec()->add_values(v);
    grid->emplace_back(v, StrCat(static_cast<int64_t>(v)));
  }
  return absl::OkStatus();
}

// A DISCRETE's list of numbers, each written as Katib gave it; the grid sorted by value.
absl::Status ConvertDiscreteSpace(const katib::FeasibleSpace& space, const std::string& path,
                                  v1::ParameterSpec* out, ValueGrid* grid) {
  const std::string space_path = StrCat(path, ".feasible_space");
  if (space.list().empty()) {
    return InvalidArgumentError(StrCat(space_path, ".list: must not be empty"));
  }
  for (int i = 0; i < space.list_size(); ++i) {
    absl::StatusOr<double> v = ParseNumber(space.list(i), StrCat(space_path, ".list[", i, "]"));
    if (!v.ok()) return v.status();
    out->mutable_discrete_spec()->add_values(*v);
    grid->emplace_back(*v, space.list(i));
  }
  std::sort(grid->begin(), grid->end());  // duplicates: ToProblem names them
  return absl::OkStatus();
}

// A CATEGORICAL's list, as is (its values are written as they are: no grid).
absl::Status ConvertCategoricalSpace(const katib::FeasibleSpace& space, const std::string& path,
                                     v1::ParameterSpec* out) {
  if (space.list().empty()) {
    return InvalidArgumentError(StrCat(path, ".feasible_space.list: must not be empty"));
  }
  for (const std::string& value : space.list()) out->mutable_categorical_spec()->add_values(value);
  return absl::OkStatus();
}

// Katib's objective as the study's one metric, and the names of the additional metrics
// (without repeats or the objective's).
absl::Status ConvertObjective(const katib::ObjectiveSpec& objective, v1::MetricSpec* metric,
                              std::vector<std::string>* additional) {
  switch (objective.type()) {
    case katib::MINIMIZE:
      metric->set_goal(v1::MetricSpec::MINIMIZE);
      break;
    case katib::MAXIMIZE:
      metric->set_goal(v1::MetricSpec::MAXIMIZE);
      break;
    default:
      return InvalidArgumentError("experiment.spec.objective.type: must be MINIMIZE or MAXIMIZE");
  }
  if (objective.objective_metric_name().empty()) {
    return InvalidArgumentError(
        "experiment.spec.objective.objective_metric_name: must not be empty");
  }
  metric->set_name(objective.objective_metric_name());
  std::set<std::string> seen = {objective.objective_metric_name()};
  for (const std::string& name : objective.additional_metric_names()) {
    if (!name.empty() && seen.insert(name).second) additional->push_back(name);
  }
  return absl::OkStatus();
}

// Katib's algorithm name and settings as the study's algorithm; random_state is the seed.
absl::Status ConvertAlgorithm(const katib::AlgorithmSpec& algorithm, v1::AlgorithmSpec* out) {
  const AlgorithmName* known = nullptr;
  for (const AlgorithmName& a : kAlgorithms) {
    if (a.katib == algorithm.algorithm_name()) known = &a;
  }
  if (known == nullptr) {
    return InvalidArgumentError(
        StrFormat("experiment.spec.algorithm.algorithm_name: \"%s\" is not an evoscale algorithm; "
                  "evoscaled serves %s",
                  absl::CHexEscape(algorithm.algorithm_name()),
                  absl::StrJoin(kAlgorithms, ", ", [](std::string* text, const AlgorithmName& a) {
                    absl::StrAppend(text, a.katib);
                  })));
  }
  out->set_algorithm(known->algorithm);
  bool seeded = false;
  for (const katib::AlgorithmSetting& setting : algorithm.algorithm_settings()) {
    const std::string path = StrFormat("experiment.spec.algorithm.algorithm_settings[\"%s\"]",
                                       absl::CHexEscape(setting.name()));
    const bool seed = setting.name() == kSeedSetting;
    if ((seed && seeded) || (!seed && out->settings().contains(setting.name()))) {
      return InvalidArgumentError(StrCat(path, ": given twice"));
    }
    if (!seed) {
      (*out->mutable_settings())[setting.name()] = setting.value();
      continue;
    }
    uint64_t value = 0;
    if (!absl::SimpleAtoi(setting.value(), &value)) {
      return InvalidArgumentError(StrFormat("%s: must be an integer >= 0, got \"%s\"", path,
                                            absl::CHexEscape(setting.value())));
    }
    out->set_seed(value);
    seeded = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KatibExperiment> KatibExperiment::FromProto(const katib::Experiment& experiment) {
  KatibExperiment x;
  if (experiment.name().empty()) return InvalidArgumentError("experiment.name: must not be empty");
  const size_t max_name = kMaxNameLength - kKatibStudyPrefix.size();
  if (experiment.name().size() > max_name) {
    return InvalidArgumentError(StrCat("experiment.name: longer than ", max_name));
  }
  x.name_ = experiment.name();
  x.study_.set_display_name(StrCat(kKatibStudyPrefix, experiment.name()));
  v1::StudySpec* spec = x.study_.mutable_spec();
  const katib::ExperimentSpec& in = experiment.spec();
  if (absl::Status st =
          ConvertObjective(in.objective(), spec->add_metrics(), &x.additional_metrics_);
      !st.ok()) {
    return st;
  }
  x.objective_metric_ = in.objective().objective_metric_name();
  for (int i = 0; i < in.parameter_specs().parameters_size(); ++i) {
    Parameter p;
    if (absl::Status st = ConvertParameter(in.parameter_specs().parameters(i), ParameterPath(i),
                                           spec->add_parameters(), &p);
        !st.ok()) {
      return st;
    }
    x.parameters_.push_back(std::move(p));
  }
  if (absl::Status st = ConvertAlgorithm(in.algorithm(), spec->mutable_algorithm()); !st.ok()) {
    return st;
  }
  spec->set_heartbeat_timeout_seconds(kNeverHandOverSeconds);

  auto& metadata = *x.study_.mutable_metadata();
  metadata[std::string(kKatibExperimentKey)] = experiment.name();
  if (in.objective().goal() != 0) {
    metadata["katib.objective_goal"] = ShortestNumber(in.objective().goal());
  }
  if (!x.additional_metrics_.empty()) {
    metadata["katib.additional_metric_names"] = absl::StrJoin(x.additional_metrics_, ",");
  }

  // The study API's own rules, last: a spec they refuse, CreateStudy would.
  if (auto problem = ToProblem(*spec); !problem.ok()) {
    return InvalidArgumentError(KatibMessage(problem.status().message()));
  }
  return x;
}

absl::Status KatibExperiment::ConvertParameter(const katib::ParameterSpec& in,
                                               const std::string& path, v1::ParameterSpec* out,
                                               Parameter* p) {
  const katib::FeasibleSpace& space = in.feasible_space();
  p->name = in.name();
  p->type = in.parameter_type();
  out->set_name(in.name());
  const std::string space_path = StrCat(path, ".feasible_space");
  if (in.parameter_type() != katib::CATEGORICAL &&
      (space.distribution() == katib::NORMAL || space.distribution() == katib::LOG_NORMAL)) {
    return InvalidArgumentError(StrFormat(
        "%s.distribution: %s is not supported by evoscale (UNIFORM or LOG_UNIFORM; evoscale "
        "samples within min and max)",
        space_path, katib::Distribution_Name(space.distribution())));
  }
  if (in.parameter_type() != katib::CATEGORICAL) out->set_scale(ScaleOf(space.distribution()));
  switch (in.parameter_type()) {
    case katib::DOUBLE:
      return ConvertDoubleSpace(space, path, out, &p->grid);
    case katib::INT:
      return ConvertIntSpace(space, path, out, &p->grid);
    case katib::DISCRETE:
      return ConvertDiscreteSpace(space, path, out, &p->grid);
    case katib::CATEGORICAL:
      return ConvertCategoricalSpace(space, path, out);
    default:
      return InvalidArgumentError(
          StrCat(path, ".parameter_type: must be DOUBLE, INT, DISCRETE or CATEGORICAL"));
  }
}

absl::StatusOr<std::vector<katib::ParameterAssignment>> KatibExperiment::ToAssignments(
    const v1::Trial& trial) const {
  std::vector<katib::ParameterAssignment> assignments;
  for (const Parameter& p : parameters_) {
    const auto value = std::find_if(trial.parameters().begin(), trial.parameters().end(),
                                    [&](const v1::Parameter& v) { return v.name() == p.name; });
    if (value == trial.parameters().end()) {
      return absl::FailedPreconditionError(
          StrFormat("trial \"%s\" has no parameter \"%s\" of experiment \"%s\"", trial.name(),
                    p.name, name_));
    }
    katib::ParameterAssignment& a = assignments.emplace_back();
    a.set_name(p.name);
    switch (value->value_case()) {
      case v1::Parameter::kStringValue:
        a.set_value(value->string_value());
        break;
      case v1::Parameter::kIntValue:
        a.set_value(StrCat(value->int_value()));
        break;
      case v1::Parameter::kDoubleValue: {
        const double x = value->double_value();
        const auto on_grid = std::lower_bound(
            p.grid.begin(), p.grid.end(), x,
            [](const std::pair<double, std::string>& g, double v) { return g.first < v; });
        a.set_value(on_grid != p.grid.end() && on_grid->first == x ? on_grid->second
                                                                   : ShortestNumber(x));
        break;
      }
      case v1::Parameter::VALUE_NOT_SET:
        return absl::FailedPreconditionError(
            StrFormat("trial \"%s\": parameter \"%s\" has no value", trial.name(), p.name));
    }
  }
  return assignments;
}

absl::StatusOr<google::protobuf::RepeatedPtrField<v1::Parameter>> KatibExperiment::ToParameters(
    const google::protobuf::RepeatedPtrField<katib::ParameterAssignment>& assignments,
    absl::string_view path) const {
  google::protobuf::RepeatedPtrField<v1::Parameter> out;
  for (int i = 0; i < assignments.size(); ++i) {
    const katib::ParameterAssignment& a = assignments[i];
    const std::string value_path = StrCat(path, "[", i, "].value");
    const auto p = std::find_if(parameters_.begin(), parameters_.end(),
                                [&](const Parameter& q) { return q.name == a.name(); });
    if (p == parameters_.end()) {
      return InvalidArgumentError(StrFormat("%s[%d].name: \"%s\" is not a parameter of \"%s\"",
                                            path, i, absl::CHexEscape(a.name()), name_));
    }
    v1::Parameter* v = out.Add();
    v->set_name(a.name());
    if (p->type == katib::CATEGORICAL) {
      v->set_string_value(a.value());
    } else if (!p->grid.empty()) {
      const auto written = std::find_if(p->grid.begin(), p->grid.end(),
                                        [&](const auto& g) { return g.second == a.value(); });
      if (written != p->grid.end()) {
        v->set_double_value(written->first);
      } else {
        absl::StatusOr<double> x = ParseNumber(a.value(), value_path);
        if (!x.ok()) return x.status();
        v->set_double_value(*x);
      }
    } else if (p->type == katib::INT) {
      absl::StatusOr<int64_t> x = ParseInteger(a.value(), value_path);
      if (!x.ok()) return x.status();
      v->set_int_value(*x);
    } else {
      absl::StatusOr<double> x = ParseNumber(a.value(), value_path);
      if (!x.ok()) return x.status();
      v->set_double_value(*x);
    }
  }
  return out;
}

absl::StatusOr<v1::Measurement> KatibExperiment::ToMeasurement(
    const katib::TrialStatus& status) const {
  const auto& metrics = status.observation().metrics();
  auto find = [&](const std::string& name) -> const katib::Metric* {
    for (const katib::Metric& m : metrics) {
      if (m.name() == name) return &m;
    }
    return nullptr;
  };
  const katib::Metric* objective = find(objective_metric_);
  if (objective == nullptr) {
    return InvalidArgumentError(
        StrFormat("Katib's observation has no objective metric \"%s\"", objective_metric_));
  }
  v1::Measurement m;
  double value = 0;
  if (!absl::SimpleAtod(objective->value(), &value) || !std::isfinite(value)) {
    return InvalidArgumentError(StrFormat("objective metric \"%s\" is \"%s\", not a number",
                                          objective_metric_, absl::CHexEscape(objective->value())));
  }
  (*m.mutable_metrics())[objective_metric_] = value;
  for (const std::string& name : additional_metrics_) {
    const katib::Metric* extra = find(name);
    if (extra != nullptr && absl::SimpleAtod(extra->value(), &value) && std::isfinite(value)) {
      (*m.mutable_metrics())[name] = value;
    }
  }
  absl::Time start, end;
  std::string ignored;
  if (absl::ParseTime(absl::RFC3339_full, status.start_time(), &start, &ignored) &&
      absl::ParseTime(absl::RFC3339_full, status.completion_time(), &end, &ignored) &&
      end >= start) {
    m.set_elapsed_seconds(absl::ToDoubleSeconds(end - start));
  }
  return m;
}

std::string KatibExperiment::TrialName(const v1::Study& study, int64_t trial_id) const {
  constexpr absl::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  uint64_t stamp = static_cast<uint64_t>(study.create_time().seconds()) * 1000000000u +
                   static_cast<uint64_t>(study.create_time().nanos());
  std::string tag;
  for (int i = 0; i < 5; ++i, stamp /= 36) tag += kDigits[stamp % 36];
  const std::string suffix = StrCat("-", tag, "-", trial_id);
  std::string base =
      name_.substr(0, kMaxTrialNameLength - std::min(suffix.size(), kMaxTrialNameLength));
  while (!base.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(base.back()))) {
    base.pop_back();
  }
  if (base.empty()) base = "trial";
  return StrCat(base, suffix);
}

}  // namespace evoscale::service
