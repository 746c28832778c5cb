#include "service/analysis/study_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "evoscale/v1/study.pb.h"
#include "nlohmann/json.hpp"
#include "search/pareto.h"
#include "search/types.h"
#include "service/study/study_converter.h"

namespace evoscale::service {
namespace {

using nlohmann::json;

bool IsLive(const v1::Trial& t) {
  return t.state() == v1::Trial::REQUESTED || t.state() == v1::Trial::ACTIVE ||
         t.state() == v1::Trial::STOPPING;
}

double Seconds(const google::protobuf::Timestamp& ts) {
  return static_cast<double>(ts.seconds()) + ts.nanos() * 1e-9;
}

std::optional<double> FinalValue(const v1::Trial& t, const std::string& metric) {
  const auto& m = t.final_measurement().metrics();
  auto it = m.find(metric);
  if (it == m.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

// `n` indices spread evenly over [0, size), first and last included (all when size <= n).
std::vector<size_t> Spread(size_t size, size_t n) {
  std::vector<size_t> out;
  if (size <= n) {
    for (size_t i = 0; i < size; ++i) out.push_back(i);
    return out;
  }
  if (n == 0) return out;
  if (n == 1) return {size - 1};
  for (size_t k = 0; k < n; ++k) out.push_back(k * (size - 1) / (n - 1));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Which of n items to draw within `budget`: those already `taken`, then the `best` best by
// `value` among the rest, then an even spread of what is left; indices in order.
std::vector<size_t> FillBudget(std::vector<bool> taken, const std::vector<double>& value,
                               bool minimize, size_t best, size_t budget) {
  size_t count = 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (taken[i]) {
      ++count;
    } else {
      order.push_back(i);
    }
  }
  best = std::min({best, order.size(), budget - std::min(count, budget)});
  std::partial_sort(order.begin(), order.begin() + best, order.end(), [&](size_t a, size_t b) {
    return minimize ? value[a] < value[b] : value[a] > value[b];
  });
  for (size_t k = 0; k < best; ++k) taken[order[k]] = true, ++count;
  std::vector<size_t> rest;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (!taken[i]) rest.push_back(i);
  }
  for (size_t k : Spread(rest.size(), budget - std::min(count, budget))) taken[rest[k]] = true;
  std::vector<size_t> chosen;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (taken[i]) chosen.push_back(i);
  }
  return chosen;
}

// A parameter of the spec, children included, as the charts need it.
struct ParamInfo {
  std::string name;
  std::string type;  // double, integer, discrete, categorical
  bool log = false;
  double min = 0, max = 0;
  std::vector<std::string> categories;
  std::vector<double> values;  // discrete
};

void Flatten(const v1::ParameterSpec& p, std::vector<ParamInfo>& out) {
  if (std::any_of(out.begin(), out.end(), [&](const ParamInfo& q) { return q.name == p.name(); })) {
    // The same name under several parents: one axis.
  } else {
    ParamInfo info{.name = p.name()};
    info.log = p.scale() == v1::ParameterSpec::LOG;
    switch (p.parameter_value_spec_case()) {
      case v1::ParameterSpec::kDoubleSpec:
        info.type = "double";
        info.min = p.double_spec().min();
        info.max = p.double_spec().max();
        break;
      case v1::ParameterSpec::kIntegerSpec:
        info.type = "integer";
        info.min = static_cast<double>(p.integer_spec().min());
        info.max = static_cast<double>(p.integer_spec().max());
        break;
      case v1::ParameterSpec::kDiscreteSpec:
        info.type = "discrete";
        info.values.assign(p.discrete_spec().values().begin(), p.discrete_spec().values().end());
        if (!info.values.empty()) {
          info.min = *std::min_element(info.values.begin(), info.values.end());
          info.max = *std::max_element(info.values.begin(), info.values.end());
        }
        break;
      case v1::ParameterSpec::kCategoricalSpec:
        info.type = "categorical";
        info.categories.assign(p.categorical_spec().values().begin(),
                               p.categorical_spec().values().end());
        info.max = info.categories.empty() ? 0 : static_cast<double>(info.categories.size() - 1);
        break;
      default:
        info.type = "unknown";
    }
    out.push_back(std::move(info));
  }
  for (const auto& child : p.children()) Flatten(child.parameter_spec(), out);
}

// A parameter's value as a number on its axis (a category by its index); null when the trial
// has no such parameter (a conditional one whose parent took another value).
json AxisValue(const v1::Trial& t, const ParamInfo& info) {
  for (const v1::Parameter& p : t.parameters()) {
    if (p.name() != info.name) continue;
    switch (p.value_case()) {
      case v1::Parameter::kDoubleValue:
        return p.double_value();
      case v1::Parameter::kIntValue:
        return p.int_value();
      case v1::Parameter::kStringValue: {
        auto it = std::find(info.categories.begin(), info.categories.end(), p.string_value());
        if (it == info.categories.end()) return nullptr;
        return static_cast<int64_t>(it - info.categories.begin());
      }
      default:
        return nullptr;
    }
  }
  return nullptr;
}

// Optimisation history: each succeeded trial's value and the best so far, by trial id.
// Downsampled by keeping every improvement of the best (evenly thinned when there are more
// than half the budget) and, per bucket of consecutive trials, its lowest and highest value.
json History(absl::Span<const v1::Trial* const> done, const std::string& metric, bool minimize,
             size_t max_points) {
  const size_t n = done.size();
  std::vector<double> value(n), best(n);
  std::vector<size_t> improvements;
  for (size_t i = 0; i < n; ++i) {
    value[i] = *FinalValue(*done[i], metric);
    const bool better = i == 0 || (minimize ? value[i] < best[i - 1] : value[i] > best[i - 1]);
    best[i] = better ? value[i] : best[i - 1];
    if (better) improvements.push_back(i);
  }
  std::vector<size_t> keep;
  if (n <= max_points) {
    keep = Spread(n, n);
  } else {
    for (size_t k : Spread(improvements.size(), max_points / 2)) keep.push_back(improvements[k]);
    const size_t buckets = std::max<size_t>(1, (max_points - keep.size()) / 2);
    for (size_t b = 0; b < buckets; ++b) {
      const size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
      if (lo >= hi) continue;
      size_t mn = lo, mx = lo;
      for (size_t i = lo; i < hi; ++i) {
        if (value[i] < value[mn]) mn = i;
        if (value[i] > value[mx]) mx = i;
      }
      keep.push_back(mn);
      keep.push_back(mx);
    }
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  }
  json ids = json::array(), values = json::array(), bests = json::array();
  for (size_t i : keep) {
    ids.push_back(done[i]->id());
    values.push_back(value[i]);
    bests.push_back(best[i]);
  }
  return {{"total", n}, {"trial_ids", ids}, {"values", values}, {"best", bests}};
}

// Learning curves: the intermediate values of `metric`, one line per trial that reported any.
// Over the budget: the live trials (newest first, up to a quarter), then the best by their last
// value (up to half), then trials spread evenly over the rest by id.
json Curves(absl::Span<const v1::Trial> trials, const std::string& metric, bool minimize,
            size_t max_curves, size_t max_curve_points) {
  std::vector<const v1::Trial*> with;
  for (const v1::Trial& t : trials) {
    for (const v1::Measurement& m : t.measurements()) {
      if (m.metrics().contains(metric)) {
        with.push_back(&t);
        break;
      }
    }
  }
  auto last_value = [&](const v1::Trial* t) {
    for (int i = t->measurements_size() - 1; i >= 0; --i) {
      auto it = t->measurements(i).metrics().find(metric);
      if (it != t->measurements(i).metrics().end() && std::isfinite(it->second)) return it->second;
    }
    return minimize ? HUGE_VAL : -HUGE_VAL;
  };
  std::vector<const v1::Trial*> chosen;
  if (with.size() <= max_curves) {
    chosen = with;
  } else {
    std::vector<bool> taken(with.size(), false);
    size_t count = 0;
    for (size_t i = with.size(); i-- > 0 && count < max_curves / 4;) {
      if (IsLive(*with[i])) taken[i] = true, ++count;
    }
    std::vector<double> last(with.size());
    for (size_t i = 0; i < with.size(); ++i) last[i] = last_value(with[i]);
    const size_t best = max_curves / 2 - std::min(count, max_curves / 2);
    for (size_t i : FillBudget(std::move(taken), last, minimize, best, max_curves)) {
      chosen.push_back(with[i]);
    }
  }
  json lines = json::array();
  for (const v1::Trial* t : chosen) {
    std::vector<std::pair<int64_t, double>> pts;
    for (const v1::Measurement& m : t->measurements()) {
      auto it = m.metrics().find(metric);
      if (it != m.metrics().end()) pts.emplace_back(m.step(), it->second);
    }
    json steps = json::array(), values = json::array();
    for (size_t k : Spread(pts.size(), max_curve_points)) {
      steps.push_back(pts[k].first);
      values.push_back(pts[k].second);
    }
    lines.push_back({{"id", t->id()},
                     {"state", v1::Trial::State_Name(t->state())},
                     {"steps", steps},
                     {"values", values}});
  }
  return {{"total", with.size()}, {"lines", lines}};
}

// Resources asked for and used, per trial that has either.
json Resources(absl::Span<const v1::Trial> trials, size_t max_points) {
  std::vector<const v1::Trial*> with;
  for (const v1::Trial& t : trials) {
    const v1::ResourceRequest& r = t.resources();
    if (r.cpu_cores() > 0 || r.memory_bytes() > 0 || r.gpus() > 0 || t.has_usage()) {
      with.push_back(&t);
    }
  }
  json ids = json::array(), states = json::array(), mem_req = json::array(),
       mem_peak = json::array(), cpu_req = json::array(), cpu_used = json::array(),
       ooms = json::array(), wall = json::array();
  for (size_t k : Spread(with.size(), max_points)) {
    const v1::Trial& t = *with[k];
    auto or_null = [](bool has, double v) { return has ? json(v) : json(nullptr); };
    ids.push_back(t.id());
    states.push_back(v1::Trial::State_Name(t.state()));
    mem_req.push_back(or_null(t.resources().memory_bytes() > 0,
                              static_cast<double>(t.resources().memory_bytes())));
    cpu_req.push_back(or_null(t.resources().cpu_cores() > 0, t.resources().cpu_cores()));
    mem_peak.push_back(or_null(t.has_usage() && t.usage().peak_memory_bytes() > 0,
                               static_cast<double>(t.usage().peak_memory_bytes())));
    cpu_used.push_back(or_null(t.has_usage() && t.usage().wall_seconds() > 0,
                               t.usage().mean_cpu_cores()));
    wall.push_back(or_null(t.has_usage(), t.usage().wall_seconds()));
    ooms.push_back(t.usage().oom_kills());
  }
  return {{"total", with.size()},     {"trial_ids", ids},         {"states", states},
          {"memory_requested", mem_req}, {"memory_peak", mem_peak}, {"cpu_requested", cpu_req},
          {"cpu_used", cpu_used},     {"wall_seconds", wall},     {"oom_kills", ooms}};
}

// What the study's trials held over time: the requests of the trials between their start and
// end (now for those still running, which sets *ends_now), summed, as a step function. Over
// the budget, each time bucket keeps its highest level.
json CapacityUse(absl::Span<const v1::Trial> trials, size_t max_points, const CapacityLimit& limit,
                 absl::Time now, bool* ends_now) {
  struct Event {
    double time;
    double cpu, memory;
    int running;
  };
  std::vector<Event> events;
  const double now_s = absl::ToDoubleSeconds(now - absl::UnixEpoch());
  for (const v1::Trial& t : trials) {
    const v1::ResourceRequest& r = t.resources();
    if (!t.has_start_time() || (r.cpu_cores() <= 0 && r.memory_bytes() <= 0)) continue;
    if (t.state() == v1::Trial::REQUESTED) continue;
    const double start = Seconds(t.start_time());
    const bool running = !t.has_end_time() && IsLive(t);
    *ends_now = *ends_now || running;
    const double end = t.has_end_time() ? Seconds(t.end_time()) : (running ? now_s : start);
    const double mem = static_cast<double>(r.memory_bytes());
    events.push_back({start, r.cpu_cores(), mem, 1});
    events.push_back({std::max(start, end), -r.cpu_cores(), -mem, -1});
  }
  // Ends before starts at the same time: a trial that ends as the next starts never counts
  // twice.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time != b.time ? a.time < b.time : a.running < b.running;
  });
  std::vector<Event> levels;  // the level from each time on
  Event level{0, 0, 0, 0};
  for (size_t i = 0; i < events.size(); ++i) {
    level.cpu += events[i].cpu;
    level.memory += events[i].memory;
    level.running += events[i].running;
    if (i + 1 < events.size() && events[i + 1].time == events[i].time) continue;
    level.time = events[i].time;
    // Sums of doubles drift: a level that should be zero is shown as zero.
    if (level.running == 0) level.cpu = level.memory = 0;
    levels.push_back(level);
  }
  if (levels.size() > max_points) {
    const double t0 = levels.front().time, t1 = levels.back().time;
    const size_t buckets = max_points - 1;
    std::vector<Event> merged;
    size_t i = 0;
    for (size_t b = 0; b < buckets && i + 1 < levels.size(); ++b) {
      const double hi = t0 + (t1 - t0) * static_cast<double>(b + 1) / static_cast<double>(buckets);
      Event m = levels[i];
      while (i + 1 < levels.size() && levels[i].time < hi) {
        m.cpu = std::max(m.cpu, levels[i].cpu);
        m.memory = std::max(m.memory, levels[i].memory);
        m.running = std::max(m.running, levels[i].running);
        ++i;
      }
      merged.push_back(m);
    }
    merged.push_back(levels.back());
    levels = std::move(merged);
  }
  json times = json::array(), cpu = json::array(), memory = json::array(), running = json::array();
  for (const Event& e : levels) {
    times.push_back(e.time);
    cpu.push_back(e.cpu);
    memory.push_back(e.memory);
    running.push_back(e.running);
  }
  return {{"times", times},
          {"cpu_cores", cpu},
          {"memory_bytes", memory},
          {"running", running},
          {"capacity_cpu_cores", limit.cpu_cores},
          {"capacity_memory_bytes", limit.memory_bytes}};
}

}  // namespace

absl::StatusOr<int> IntQueryParam(absl::string_view field, absl::string_view text, int lo,
                                  int hi) {
  int n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < lo || n > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", text, "\" is not an integer in [", lo, ", ", hi, "]"));
  }
  return n;
}

absl::StatusOr<AnalysisOptions> ParseAnalysisQuery(
    const v1::StudySpec& spec, const std::vector<std::pair<std::string, std::string>>& query) {
  AnalysisOptions o;
  for (const auto& [k, v] : query) {
    absl::StatusOr<int> n = 0;
    if (k == "metric") {
      o.metric = v;
    } else if (k == "max_points") {
      n = IntQueryParam(k, v, 10, 100000);
      if (n.ok()) o.max_points = *n;
    } else if (k == "max_curves") {
      n = IntQueryParam(k, v, 0, 1000);
      if (n.ok()) o.max_curves = *n;
    } else if (k == "max_curve_points") {
      n = IntQueryParam(k, v, 2, 10000);
      if (n.ok()) o.max_curve_points = *n;
    }
    if (!n.ok()) return n.status();
  }
  if (spec.metrics().empty()) {
    return absl::FailedPreconditionError("the study has no metrics to analyse");
  }
  if (o.metric.empty()) o.metric = spec.metrics(0).name();
  std::vector<std::string> names;
  for (const v1::MetricSpec& m : spec.metrics()) names.push_back(absl::StrCat("\"", m.name(), "\""));
  if (std::none_of(spec.metrics().begin(), spec.metrics().end(),
                   [&](const v1::MetricSpec& m) { return m.name() == o.metric; })) {
    return absl::InvalidArgumentError(absl::StrCat("metric: \"", o.metric,
                                                   "\" is not a metric of the study (want one of ",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  return o;
}

namespace {

json Metrics(const v1::StudySpec& spec) {
  json metrics = json::array();
  for (const v1::MetricSpec& m : spec.metrics()) {
    json one = {{"name", m.name()}, {"goal", v1::MetricSpec::Goal_Name(m.goal())}};
    if (m.has_safety_threshold()) one["safety_threshold"] = m.safety_threshold();
    metrics.push_back(std::move(one));
  }
  return metrics;
}

json Parameters(const std::vector<ParamInfo>& params) {
  json parameters = json::array();
  for (const ParamInfo& p : params) {
    json one = {{"name", p.name}, {"type", p.type}, {"log", p.log}, {"min", p.min}, {"max", p.max}};
    if (p.type == "categorical") one["categories"] = p.categories;
    if (p.type == "discrete") one["values"] = p.values;
    parameters.push_back(std::move(one));
  }
  return parameters;
}

// Which succeeded trials (`done`, by id) the points show: all within the budget; else the
// Pareto `front` (up to half), the best quarter, then trials spread evenly over the rest.
std::vector<const v1::Trial*> ChoosePoints(const std::vector<const v1::Trial*>& done,
                                           const std::vector<int64_t>& front,
                                           const std::string& metric, bool minimize,
                                           size_t max_points) {
  if (done.size() <= max_points) return done;
  std::vector<bool> taken(done.size(), false);
  size_t count = 0;
  for (size_t i = 0, f = 0; i < done.size() && f < front.size(); ++i) {
    while (f < front.size() && front[f] < done[i]->id()) ++f;
    if (f < front.size() && front[f] == done[i]->id() && count < max_points / 2) {
      taken[i] = true;
      ++count;
    }
  }
  std::vector<double> value(done.size());
  for (size_t i = 0; i < done.size(); ++i) value[i] = *FinalValue(*done[i], metric);
  std::vector<const v1::Trial*> chosen;
  for (size_t i : FillBudget(std::move(taken), value, minimize, max_points / 4, max_points)) {
    chosen.push_back(done[i]);
  }
  return chosen;
}

// Points (parallel coordinates, slices, the Pareto chart): every metric and parameter of the
// `chosen` trials, out of `total`.
json Points(const v1::StudySpec& spec, const std::vector<ParamInfo>& params,
            absl::Span<const v1::Trial* const> chosen, size_t total) {
  json point_ids = json::array();
  json point_values = json::object(), point_params = json::object();
  for (const v1::MetricSpec& m : spec.metrics()) point_values[m.name()] = json::array();
  for (const ParamInfo& p : params) point_params[p.name] = json::array();
  for (const v1::Trial* t : chosen) {
    point_ids.push_back(t->id());
    for (const v1::MetricSpec& m : spec.metrics()) {
      std::optional<double> v = FinalValue(*t, m.name());
      point_values[m.name()].push_back(v ? json(*v) : json(nullptr));
    }
    for (const ParamInfo& p : params) point_params[p.name].push_back(AxisValue(*t, p));
  }
  return {{"total", total},
          {"trial_ids", point_ids},
          {"values", point_values},
          {"params", point_params}};
}

// ---- Cost: the best value against core-hours spent, and the cost-quality front -----------

// The one objective of a single-objective study, ranked as ListOptimalTrials ranks it.
struct CostObjective {
  std::string metric;
  bool minimize = false;
  std::vector<search::MetricConfig> metrics;  // every metric of the spec: the safety thresholds

  bool Better(double a, double b) const { return minimize ? a < b : a > b; }

  // The value a trial is ranked by: a SUCCEEDED trial's, when it is feasible (every metric
  // reported, each safety threshold met) and its value finite; else none.
  std::optional<double> RankedValue(const v1::Trial& t) const {
    if (t.state() != v1::Trial::SUCCEEDED) return std::nullopt;
    search::Trial ranked;  // what IsFeasible reads: the final values
    ranked.final_measurement.metrics.insert(t.final_measurement().metrics().begin(),
                                            t.final_measurement().metrics().end());
    if (!search::IsFeasible(metrics, ranked)) return std::nullopt;
    return FinalValue(t, metric);
  }
};

// The objective of `spec` when it has exactly one (a metric without a safety threshold).
std::optional<CostObjective> SoleObjective(const v1::StudySpec& spec) {
  std::vector<const v1::MetricSpec*> objectives;
  for (const v1::MetricSpec& m : spec.metrics()) {
    if (!m.has_safety_threshold()) objectives.push_back(&m);
  }
  if (objectives.size() != 1) return std::nullopt;
  // A stored study's spec passed the same validation: its metrics convert.
  absl::StatusOr<std::vector<search::MetricConfig>> metrics = MetricConfigs(spec);
  if (!metrics.ok()) return std::nullopt;
  return CostObjective{.metric = objectives[0]->name(),
                       .minimize = objectives[0]->goal() == v1::MetricSpec::MINIMIZE,
                       .metrics = *std::move(metrics)};
}

// The study's budget and what its trials have spent (every trial, running ones included) and
// have left; zeros without a budget.
json Budget(const v1::Study& study) {
  return {{"budget_core_seconds", study.spec().budget_core_seconds()},
          {"spent_core_seconds", study.spent_core_seconds()},
          {"remaining_core_seconds", study.remaining_core_seconds()}};
}

// The best so far against core-hours spent: the ended trials by end time (then id), each with
// the core-hours that every trial ended by then had cost (stopped, failed and infeasible ones
// too) and the best ranked value so far (null before the first). Over max_points: every
// improvement of the best (evenly thinned past half the budget), the last trial, and an even
// spread of the rest.
json CostCurve(absl::Span<const v1::Trial> trials, const CostObjective& objective,
               size_t max_points) {
  std::vector<const v1::Trial*> ended;
  for (const v1::Trial& t : trials) {
    if (t.state() != v1::Trial::STATE_UNSPECIFIED && !IsLive(t)) ended.push_back(&t);
  }
  std::sort(ended.begin(), ended.end(), [](const v1::Trial* a, const v1::Trial* b) {
    const double ea = Seconds(a->end_time()), eb = Seconds(b->end_time());
    return ea != eb ? ea < eb : a->id() < b->id();
  });
  const size_t n = ended.size();
  std::vector<double> hours(n);
  std::vector<std::optional<double>> best(n);
  std::vector<size_t> improvements;
  double spent = 0;
  for (size_t i = 0; i < n; ++i) {
    spent += ended[i]->core_seconds();
    hours[i] = spent / 3600;
    if (i > 0) best[i] = best[i - 1];
    const std::optional<double> v = objective.RankedValue(*ended[i]);
    if (v && (!best[i] || objective.Better(*v, *best[i]))) {
      best[i] = v;
      improvements.push_back(i);
    }
  }
  std::vector<size_t> keep = Spread(n, n);
  if (n > max_points) {
    std::vector<bool> taken(n, false);
    for (size_t k : Spread(improvements.size(), max_points / 2)) taken[improvements[k]] = true;
    taken[n - 1] = true;
    keep = FillBudget(std::move(taken), hours, objective.minimize, 0, max_points);
  }
  json ids = json::array(), xs = json::array(), bests = json::array();
  for (size_t i : keep) {
    ids.push_back(ended[i]->id());
    xs.push_back(hours[i]);
    bests.push_back(best[i] ? json(*best[i]) : json(nullptr));
  }
  return {{"total", n}, {"trial_ids", ids}, {"core_hours", xs}, {"best", bests}};
}

// The cost-quality front: the ranked trials (RankedValue) that no other ranked trial beats on
// both cost and value (costs as little or less and is as good or better, one of the two
// strictly), by core-seconds. Equal trials are both on it.
std::vector<const v1::Trial*> CostFront(absl::Span<const v1::Trial> trials,
                                        const CostObjective& objective) {
  struct Ranked {
    const v1::Trial* trial;
    double value;
  };
  std::vector<Ranked> ranked;
  for (const v1::Trial& t : trials) {
    if (std::optional<double> v = objective.RankedValue(t)) ranked.push_back({&t, *v});
  }
  // Cheapest first, and among equal costs the best first: a trial is beaten by one before it.
  std::sort(ranked.begin(), ranked.end(), [&](const Ranked& a, const Ranked& b) {
    if (a.trial->core_seconds() != b.trial->core_seconds()) {
      return a.trial->core_seconds() < b.trial->core_seconds();
    }
    if (a.value != b.value) return objective.Better(a.value, b.value);
    return a.trial->id() < b.trial->id();
  });
  std::vector<const v1::Trial*> front;
  const Ranked* cheapest_best = nullptr;  // the cheapest of the best value so far
  for (const Ranked& r : ranked) {
    const bool better = !cheapest_best || objective.Better(r.value, cheapest_best->value);
    const bool tie = cheapest_best && r.value == cheapest_best->value &&
                     r.trial->core_seconds() == cheapest_best->trial->core_seconds();
    if (better) cheapest_best = &r;
    if (better || tie) front.push_back(r.trial);
  }
  return front;
}

// Cost against value: every SUCCEEDED or STOPPED trial with a value of the objective (a
// stopped one's is its last), by id. Over max_points: the front (up to half), the best
// quarter, then an even spread of the rest.
json CostPoints(absl::Span<const v1::Trial> trials, const CostObjective& objective,
                const std::vector<const v1::Trial*>& front, size_t max_points) {
  std::vector<const v1::Trial*> with;
  std::vector<double> value;
  for (const v1::Trial& t : trials) {
    if (t.state() != v1::Trial::SUCCEEDED && t.state() != v1::Trial::STOPPED) continue;
    if (std::optional<double> v = FinalValue(t, objective.metric)) {
      with.push_back(&t);
      value.push_back(*v);
    }
  }
  std::vector<bool> taken(with.size(), false);
  std::vector<int64_t> front_ids;
  for (const v1::Trial* t : front) front_ids.push_back(t->id());
  std::sort(front_ids.begin(), front_ids.end());
  size_t count = 0;
  for (size_t i = 0; i < with.size() && with.size() > max_points; ++i) {
    if (count < max_points / 2 &&
        std::binary_search(front_ids.begin(), front_ids.end(), with[i]->id())) {
      taken[i] = true;
      ++count;
    }
  }
  json ids = json::array(), costs = json::array(), values = json::array(),
       states = json::array();
  for (size_t i : FillBudget(std::move(taken), value, objective.minimize, max_points / 4,
                             max_points)) {
    ids.push_back(with[i]->id());
    costs.push_back(with[i]->core_seconds());
    values.push_back(value[i]);
    states.push_back(v1::Trial::State_Name(with[i]->state()));
  }
  return {{"total", with.size()},
          {"trial_ids", ids},
          {"core_seconds", costs},
          {"values", values},
          {"states", states}};
}

// The cost section of a single-objective study: its objective, the best-so-far curve against
// core-hours, cost against value per trial and the cost-quality front (all of it within
// max_points, evenly spread beyond).
json Cost(absl::Span<const v1::Trial> trials, const CostObjective& objective,
          size_t max_points) {
  const std::vector<const v1::Trial*> front = CostFront(trials, objective);
  json ids = json::array(), costs = json::array(), values = json::array();
  for (size_t k : Spread(front.size(), max_points)) {
    ids.push_back(front[k]->id());
    costs.push_back(front[k]->core_seconds());
    values.push_back(*FinalValue(*front[k], objective.metric));
  }
  return {{"metric", objective.metric},
          {"goal", objective.minimize ? "MINIMIZE" : "MAXIMIZE"},
          {"curve", CostCurve(trials, objective, max_points)},
          {"points", CostPoints(trials, objective, front, max_points)},
          {"front",
           {{"total", front.size()}, {"trial_ids", ids}, {"core_seconds", costs},
            {"values", values}}}};
}

// StudyAnalysisJson, and whether the document shows running trials' intervals ending at `now`
// (it then holds for `now` only).
std::string AnalysisJson(const v1::Study& study, absl::Span<const v1::Trial> trials,
                         const AnalysisOptions& options, const CapacityLimit& capacity,
                         absl::Time now, bool* ends_now) {
  const v1::StudySpec& spec = study.spec();
  const std::string& metric = options.metric;
  bool minimize = false;
  for (const v1::MetricSpec& m : spec.metrics()) {
    if (m.name() == metric) minimize = m.goal() == v1::MetricSpec::MINIMIZE;
  }
  std::vector<ParamInfo> params;
  for (const v1::ParameterSpec& p : spec.parameters()) Flatten(p, params);

  std::map<std::string, int64_t> states;
  std::vector<const v1::Trial*> done;  // succeeded, with a finite value of `metric`, by id
  for (const v1::Trial& t : trials) {
    if (t.state() == v1::Trial::STATE_UNSPECIFIED) continue;  // deleted
    ++states[v1::Trial::State_Name(t.state())];
    if (t.state() == v1::Trial::SUCCEEDED && FinalValue(t, metric)) done.push_back(&t);
  }
  const size_t max_points = static_cast<size_t>(options.max_points);

  // The Pareto front over every objective, when there are several (as ListOptimalTrials).
  const auto objectives =
      std::count_if(spec.metrics().begin(), spec.metrics().end(),
                    [](const v1::MetricSpec& m) { return !m.has_safety_threshold(); });
  std::vector<int64_t> front;
  if (objectives >= 2) {
    // A stored study's spec passed the same validation: its metrics convert.
    absl::StatusOr<std::vector<search::MetricConfig>> configs = MetricConfigs(spec);
    if (configs.ok()) front = OptimalTrialIds(*configs, trials);
  }
  json doc = {
      {"study", study.name()},
      {"state", v1::Study::State_Name(study.state())},
      {"metric", metric},
      {"goal", minimize ? "MINIMIZE" : "MAXIMIZE"},
      {"metrics", Metrics(spec)},
      {"parameters", Parameters(params)},
      {"trial_count", study.trial_count()},
      {"states", states},
      {"history", History(done, metric, minimize, max_points)},
      {"curves", Curves(trials, metric, minimize, static_cast<size_t>(options.max_curves),
                        static_cast<size_t>(options.max_curve_points))},
      {"points",
       Points(spec, params, ChoosePoints(done, front, metric, minimize, max_points), done.size())},
      {"resources", Resources(trials, max_points)},
      {"capacity", CapacityUse(trials, max_points, capacity, now, ends_now)},
      {"budget", Budget(study)},
  };
  if (objectives >= 2) doc["pareto"] = {{"trial_ids", front}};
  if (std::optional<CostObjective> objective = SoleObjective(spec)) {
    doc["cost"] = Cost(trials, *objective, max_points);
  }
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string StudyAnalysisJson(const v1::Study& study, absl::Span<const v1::Trial> trials,
                              const AnalysisOptions& options, const CapacityLimit& capacity,
                              absl::Time now) {
  bool ends_now = false;
  return AnalysisJson(study, trials, options, capacity, now, &ends_now);
}

std::string AnalysisCache::Document(const v1::Study& study, absl::Span<const v1::Trial> trials,
                                    uint64_t trials_version, const AnalysisOptions& options,
                                    const CapacityLimit& capacity, absl::Time now) {
  const std::string key = absl::StrCat(study.name(), "|", options.metric, "|", options.max_points,
                                       "|", options.max_curves, "|", options.max_curve_points, "|",
                                       capacity.cpu_cores, "|", capacity.memory_bytes);
  const int64_t second = absl::ToUnixSeconds(now);
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.trials_version == trials_version &&
        it->second.state == study.state() && it->second.second.value_or(second) == second) {
      return it->second.json;
    }
  }
  Entry entry{.trials_version = trials_version, .state = study.state()};
  bool ends_now = false;
  entry.json = AnalysisJson(study, trials, options, capacity, now, &ends_now);
  if (ends_now) entry.second = second;
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= 256) entries_.clear();
  return (entries_[key] = std::move(entry)).json;
}

}  // namespace evoscale::service
