#include "service/study/trial_query.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace evoscale::service {
namespace {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;

constexpr absl::string_view kPageTokenPrefix = "o:";
constexpr absl::string_view kMetricPrefix = "metric:";
constexpr absl::string_view kParamPrefix = "param:";
// The sort keys that name no metric or parameter.
constexpr std::array<absl::string_view, 9> kFieldSortKeys = {
    "id",          "state",         "client",  "start_time", "end_time", "memory_requested",
    "memory_peak", "cpu_requested", "cpu_used"};
// Names listed in an error message before "and N more".
constexpr size_t kMaxNamesInMessage = 20;

// ---- The spec ------------------------------------------------------------------------------

const v1::ParameterSpec* FindIn(const v1::ParameterSpec& p, absl::string_view name) {
  if (p.name() == name) return &p;
  for (const auto& child : p.children()) {
    if (const v1::ParameterSpec* found = FindIn(child.parameter_spec(), name)) return found;
  }
  return nullptr;
}

// Parameter `name` at any depth of conditional parameters; nullptr when the study has none.
const v1::ParameterSpec* FindParameterSpec(const v1::StudySpec& spec, absl::string_view name) {
  for (const v1::ParameterSpec& p : spec.parameters()) {
    if (const v1::ParameterSpec* found = FindIn(p, name)) return found;
  }
  return nullptr;
}

void CollectNames(const v1::ParameterSpec& p, std::vector<std::string>* names) {
  names->push_back(p.name());
  for (const auto& child : p.children()) CollectNames(child.parameter_spec(), names);
}

// Every parameter name, parents before their children, for messages.
std::vector<std::string> ParameterNames(const v1::StudySpec& spec) {
  std::vector<std::string> names;
  for (const v1::ParameterSpec& p : spec.parameters()) CollectNames(p, &names);
  return names;
}

std::vector<std::string> MetricNames(const v1::StudySpec& spec) {
  std::vector<std::string> names;
  for (const v1::MetricSpec& m : spec.metrics()) names.push_back(m.name());
  return names;
}

bool IsCategorical(const v1::ParameterSpec& p) {
  return p.parameter_value_spec_case() == v1::ParameterSpec::kCategoricalSpec;
}

// `want one of "a", "b"` (the first kMaxNamesInMessage, then how many more), for messages.
std::string WantOneOf(const std::vector<std::string>& names) {
  if (names.empty()) return "it has none";
  const size_t shown = std::min(names.size(), kMaxNamesInMessage);
  std::string out =
      StrCat("want one of ",
             absl::StrJoin(
                 names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", ",
                 [](std::string* o, const std::string& n) { absl::StrAppend(o, "\"", n, "\""); }));
  if (shown < names.size()) absl::StrAppend(&out, " and ", names.size() - shown, " more");
  return out;
}

// ---- Parsing -------------------------------------------------------------------------------

absl::Status GivenOnce(absl::string_view field, bool* seen) {
  if (*seen) return InvalidArgumentError(StrCat(field, ": given more than once"));
  *seen = true;
  return absl::OkStatus();
}

absl::Status ParseOrderBy(const v1::StudySpec& spec, absl::string_view value, TrialQuery* q) {
  absl::string_view key = value;
  const bool descending = absl::ConsumePrefix(&key, "-");
  absl::string_view name = key;
  if (absl::ConsumePrefix(&name, kMetricPrefix)) {
    const std::vector<std::string> metrics = MetricNames(spec);
    if (std::find(metrics.begin(), metrics.end(), name) == metrics.end()) {
      return InvalidArgumentError(StrCat("order_by: \"", key, "\" is not a metric of the study (",
                                         WantOneOf(metrics), ")"));
    }
  } else if (absl::ConsumePrefix(&name, kParamPrefix)) {
    if (FindParameterSpec(spec, name) == nullptr) {
      return InvalidArgumentError(StrCat("order_by: \"", key,
                                         "\" is not a parameter of the study (",
                                         WantOneOf(ParameterNames(spec)), ")"));
    }
  } else if (std::find(kFieldSortKeys.begin(), kFieldSortKeys.end(), key) == kFieldSortKeys.end()) {
    return InvalidArgumentError(StrCat("order_by: unknown sort key \"", key, "\" (want ",
                                       absl::StrJoin(kFieldSortKeys, ", "),
                                       ", metric:NAME or param:NAME)"));
  }
  q->order_by = std::string(key);
  q->descending = descending;
  return absl::OkStatus();
}

absl::Status ParseStates(absl::string_view value, TrialQuery* q) {
  for (absl::string_view name : absl::StrSplit(value, ',')) {
    v1::Trial::State state;
    if (!v1::Trial::State_Parse(absl::AsciiStrToUpper(name), &state) ||
        state == v1::Trial::STATE_UNSPECIFIED) {
      return InvalidArgumentError(StrCat(
          "state: unknown trial state \"", name,
          "\" (want requested, active, stopping, succeeded, infeasible, failed or stopped)"));
    }
    if (std::find(q->states.begin(), q->states.end(), state) == q->states.end()) {
      q->states.push_back(state);
    }
  }
  return absl::OkStatus();
}

// One bound of a range: empty is none.
absl::StatusOr<std::optional<double>> ParseBound(absl::string_view param, absl::string_view which,
                                                 absl::string_view text) {
  if (text.empty()) return std::nullopt;
  double x;
  if (!absl::SimpleAtod(text, &x) || !std::isfinite(x)) {
    return InvalidArgumentError(
        StrCat("param: \"", param, "\" ", which, " \"", text, "\" is not a finite number"));
  }
  return x;
}

// NAME:MIN..MAX or NAME:A|B|... A name may hold ':', so NAME is the shortest prefix before a
// ':' that names a parameter of the study.
absl::StatusOr<TrialQuery::Range> ParseRange(const v1::StudySpec& spec, absl::string_view value) {
  const size_t first_colon = value.find(':');
  if (first_colon == absl::string_view::npos) {
    return InvalidArgumentError(
        StrCat("param: \"", value, "\" is not NAME:MIN..MAX or NAME:VALUE|VALUE..."));
  }
  const v1::ParameterSpec* p = nullptr;
  size_t colon = first_colon;
  for (; colon != absl::string_view::npos; colon = value.find(':', colon + 1)) {
    p = FindParameterSpec(spec, value.substr(0, colon));
    if (p != nullptr) break;
  }
  if (p == nullptr) {
    return InvalidArgumentError(StrCat("param: \"", value.substr(0, first_colon),
                                       "\" is not a parameter of the study (",
                                       WantOneOf(ParameterNames(spec)), ")"));
  }
  const std::string& name = p->name();
  const absl::string_view body = absl::StripAsciiWhitespace(value.substr(colon + 1));
  TrialQuery::Range range;
  range.param = name;
  if (IsCategorical(*p)) {
    const auto& values = p->categorical_spec().values();
    for (absl::string_view item : absl::StrSplit(body, '|')) {
      if (std::find(values.begin(), values.end(), item) != values.end()) {
        range.categories.emplace_back(item);
        continue;
      }
      if (absl::StrContains(body, "..")) {
        return InvalidArgumentError(StrCat(
            "param: \"", name, "\" is categorical: list its values (", name, ":A|B), not a range"));
      }
      return InvalidArgumentError(
          StrCat("param: \"", name, "\" has no value \"", item, "\" (",
                 WantOneOf(std::vector<std::string>(values.begin(), values.end())), ")"));
    }
    return range;
  }
  const size_t dots = body.find("..");
  if (dots == absl::string_view::npos) {
    return InvalidArgumentError(StrCat("param: \"", name, "\" is a number: give a range (", name,
                                       ":MIN..MAX), not a list of values"));
  }
  const absl::string_view min_text = absl::StripAsciiWhitespace(body.substr(0, dots));
  const absl::string_view max_text = absl::StripAsciiWhitespace(body.substr(dots + 2));
  absl::StatusOr<std::optional<double>> min = ParseBound(name, "min", min_text);
  if (!min.ok()) return min.status();
  absl::StatusOr<std::optional<double>> max = ParseBound(name, "max", max_text);
  if (!max.ok()) return max.status();
  if (min->has_value() && max->has_value() && **min > **max) {
    return InvalidArgumentError(
        StrCat("param: \"", name, "\" has min ", min_text, " > max ", max_text));
  }
  range.min = *min;
  range.max = *max;
  return range;
}

absl::StatusOr<int> ParsePageSize(absl::string_view value) {
  int size;
  if (!absl::SimpleAtoi(value, &size)) {
    return InvalidArgumentError(StrCat("page_size: \"", value, "\" is not an integer"));
  }
  if (size < 1 || size > kTrialQueryMaxPageSize) {
    return InvalidArgumentError(
        StrCat("page_size: ", size, " must be in [1, ", kTrialQueryMaxPageSize, "]"));
  }
  return size;
}

// "o:OFFSET" or "o:OFFSET:MAX_ID" into q.offset and q.max_id; empty is the first page.
absl::Status ParsePageToken(absl::string_view token, TrialQuery* q) {
  if (token.empty()) return absl::OkStatus();
  absl::string_view rest = token;
  // At most 18 digits: no overflow, and no sign or spaces, which SimpleAtoi would take.
  auto number = [](absl::string_view digits, int64_t* out) {
    return !digits.empty() && digits.size() <= 18 &&
           std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) &&
           absl::SimpleAtoi(digits, out);
  };
  int64_t offset = 0, max_id = 0;
  const bool prefixed = absl::ConsumePrefix(&rest, kPageTokenPrefix);
  const std::vector<absl::string_view> parts = absl::StrSplit(rest, ':');
  if (!prefixed || parts.size() > 2 || !number(parts[0], &offset) ||
      (parts.size() == 2 && (!number(parts[1], &max_id) || max_id == 0))) {
    return InvalidArgumentError(StrCat("page_token: malformed token \"", token, "\""));
  }
  q->offset = offset;
  q->max_id = max_id;
  return absl::OkStatus();
}

// ---- Filtering -----------------------------------------------------------------------------

// Finds one parameter in trial after trial. Looking a name up is most of a query's cost (each
// Parameter is a heap object of its own), and trials list their parameters in the same order
// (the service writes them sorted by name), so it looks first where it found the name last.
class ParameterLookup {
 public:
  explicit ParameterLookup(absl::string_view name) : name_(name) {}

  // The trial's parameter of that name; nullptr when it has none.
  const v1::Parameter* Find(const v1::Trial& trial) {
    const auto& params = trial.parameters();
    if (hint_ < params.size() && params[hint_].name() == name_) return &params[hint_];
    for (int i = 0; i < params.size(); ++i) {
      if (params[i].name() == name_) {
        hint_ = i;
        return &params[i];
      }
    }
    return nullptr;
  }

 private:
  const absl::string_view name_;
  int hint_ = 0;  // where the last trial had it
};

bool InRange(const v1::Trial& trial, const TrialQuery::Range& range, ParameterLookup* lookup) {
  const v1::Parameter* p = lookup->Find(trial);
  if (p == nullptr) return false;
  double x;
  switch (p->value_case()) {
    case v1::Parameter::kStringValue:
      return std::find(range.categories.begin(), range.categories.end(), p->string_value()) !=
             range.categories.end();
    case v1::Parameter::kDoubleValue:
      x = p->double_value();
      break;
    case v1::Parameter::kIntValue:
      x = static_cast<double>(p->int_value());
      break;
    default:
      return false;
  }
  return (!range.min.has_value() || x >= *range.min) && (!range.max.has_value() || x <= *range.max);
}

// The indices into `trials` of the live trials that pass q's filters, in their order.
std::vector<size_t> Matching(absl::Span<const v1::Trial> trials, const TrialQuery& q) {
  std::array<bool, v1::Trial::State_ARRAYSIZE> wanted{};
  for (v1::Trial::State s : q.states) {
    if (v1::Trial::State_IsValid(s)) wanted[s] = true;
  }
  std::vector<ParameterLookup> lookups;
  lookups.reserve(q.ranges.size());
  for (const TrialQuery::Range& r : q.ranges) lookups.emplace_back(r.param);
  std::vector<size_t> out;
  out.reserve(trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    if (t.state() == v1::Trial::STATE_UNSPECIFIED) continue;  // a deleted trial's tombstone
    if (q.max_id > 0 && t.id() > q.max_id) continue;          // created after the first page
    if (!q.states.empty() && !(v1::Trial::State_IsValid(t.state()) && wanted[t.state()])) continue;
    bool in = true;
    for (size_t r = 0; r < q.ranges.size() && in; ++r) in = InRange(t, q.ranges[r], &lookups[r]);
    if (in) out.push_back(i);
  }
  return out;
}

// ---- Sorting -------------------------------------------------------------------------------

template <typename Key>
struct Keyed {
  Key key;
  int64_t id;
  size_t index;  // into the trials
};

// `matching` ordered by the key `extract` gives each trial (std::nullopt: the trial lacks it),
// ascending or descending, then by id; those that lack the key last, by id. The keys are
// computed once, so the sort moves small structs and never touches a trial.
template <typename Key, typename Extract>
std::vector<size_t> SortBy(absl::Span<const v1::Trial> trials, const std::vector<size_t>& matching,
                           bool descending, Extract extract) {
  std::vector<Keyed<Key>> keyed;
  std::vector<Keyed<Key>> lacking;
  keyed.reserve(matching.size());
  for (size_t i : matching) {
    std::optional<Key> key = extract(trials[i]);
    if (key.has_value()) {
      keyed.push_back({*std::move(key), trials[i].id(), i});
    } else {
      lacking.push_back({Key{}, trials[i].id(), i});
    }
  }
  // The index breaks ties between equal ids (none in a study), so the order is total.
  auto by_id = [](const Keyed<Key>& a, const Keyed<Key>& b) {
    return std::tie(a.id, a.index) < std::tie(b.id, b.index);
  };
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed<Key>& a, const Keyed<Key>& b) {
    if (a.key < b.key) return !descending;
    if (b.key < a.key) return descending;
    return by_id(a, b);
  });
  std::sort(lacking.begin(), lacking.end(), by_id);
  std::vector<size_t> out;
  out.reserve(matching.size());
  for (const Keyed<Key>& k : keyed) out.push_back(k.index);
  for (const Keyed<Key>& k : lacking) out.push_back(k.index);
  return out;
}

// A number as a key: NaN (never stored, but not ours to trust) has no order, so it lacks one.
std::optional<double> Number(double x) {
  if (std::isnan(x)) return std::nullopt;
  return x;
}

std::optional<std::pair<int64_t, int32_t>> Time(bool has, const google::protobuf::Timestamp& t) {
  if (!has) return std::nullopt;
  return std::make_pair(t.seconds(), t.nanos());
}

std::vector<size_t> SortByParameter(const v1::StudySpec& spec, absl::Span<const v1::Trial> trials,
                                    const std::vector<size_t>& matching, bool descending,
                                    absl::string_view name) {
  const v1::ParameterSpec* p = FindParameterSpec(spec, name);
  if (p == nullptr) {
    return SortBy<int64_t>(trials, matching, false,
                           [](const v1::Trial& t) -> std::optional<int64_t> { return t.id(); });
  }
  // Categories by their text; numbers by value (a value of the other kind lacks the key).
  if (IsCategorical(*p)) {
    // Each value's place in the text order: the sort compares ints, not strings spread over
    // the heap (a study has few values and many ties).
    std::vector<absl::string_view> values(p->categorical_spec().values().begin(),
                                          p->categorical_spec().values().end());
    std::sort(values.begin(), values.end());
    absl::flat_hash_map<absl::string_view, int> rank;
    for (size_t i = 0; i < values.size(); ++i) rank.emplace(values[i], static_cast<int>(i));
    return SortBy<int>(
        trials, matching, descending,
        [lookup = ParameterLookup(name), &rank](const v1::Trial& t) mutable -> std::optional<int> {
          const v1::Parameter* v = lookup.Find(t);
          if (v == nullptr || v->value_case() != v1::Parameter::kStringValue) {
            return std::nullopt;
          }
          auto it = rank.find(v->string_value());
          if (it == rank.end()) return std::nullopt;  // not a value of the spec
          return it->second;
        });
  }
  return SortBy<double>(
      trials, matching, descending,
      [lookup = ParameterLookup(name)](const v1::Trial& t) mutable -> std::optional<double> {
        const v1::Parameter* v = lookup.Find(t);
        if (v == nullptr) return std::nullopt;
        if (v->value_case() == v1::Parameter::kDoubleValue) {
          return Number(v->double_value());
        }
        if (v->value_case() == v1::Parameter::kIntValue) {
          return static_cast<double>(v->int_value());
        }
        return std::nullopt;
      });
}

std::vector<size_t> Sorted(const v1::StudySpec& spec, absl::Span<const v1::Trial> trials,
                           const std::vector<size_t>& matching, const TrialQuery& q) {
  const bool desc = q.descending;
  absl::string_view name = q.order_by;
  if (absl::ConsumePrefix(&name, kMetricPrefix)) {
    const std::string metric(name);
    return SortBy<double>(trials, matching, desc,
                          [&metric](const v1::Trial& t) -> std::optional<double> {
                            const auto& values = t.final_measurement().metrics();
                            auto it = values.find(metric);
                            if (it == values.end()) return std::nullopt;
                            return Number(it->second);
                          });
  }
  if (absl::ConsumePrefix(&name, kParamPrefix)) {
    return SortByParameter(spec, trials, matching, desc, name);
  }
  const std::string& key = q.order_by;
  if (key == "state") {
    return SortBy<int>(trials, matching, desc,
                       [](const v1::Trial& t) -> std::optional<int> { return t.state(); });
  }
  if (key == "client") {
    return SortBy<absl::string_view>(trials, matching, desc,
                                     [](const v1::Trial& t) -> std::optional<absl::string_view> {
                                       if (t.client_id().empty()) return std::nullopt;
                                       return t.client_id();
                                     });
  }
  if (key == "start_time" || key == "end_time") {
    const bool start = key == "start_time";
    return SortBy<std::pair<int64_t, int32_t>>(trials, matching, desc, [start](const v1::Trial& t) {
      return start ? Time(t.has_start_time(), t.start_time())
                   : Time(t.has_end_time(), t.end_time());
    });
  }
  if (key == "memory_requested" || key == "memory_peak") {
    const bool requested = key == "memory_requested";
    return SortBy<int64_t>(
        trials, matching, desc, [requested](const v1::Trial& t) -> std::optional<int64_t> {
          const int64_t bytes =
              requested ? t.resources().memory_bytes() : t.usage().peak_memory_bytes();
          if (bytes == 0) return std::nullopt;
          return bytes;
        });
  }
  if (key == "cpu_requested") {
    return SortBy<double>(trials, matching, desc, [](const v1::Trial& t) -> std::optional<double> {
      if (t.resources().cpu_cores() == 0) return std::nullopt;
      return Number(t.resources().cpu_cores());
    });
  }
  if (key == "cpu_used") {
    return SortBy<double>(trials, matching, desc, [](const v1::Trial& t) -> std::optional<double> {
      const v1::TrialUsage& u = t.usage();
      if (u.mean_cpu_cores() == 0 && u.cpu_seconds() == 0 && u.wall_seconds() == 0) {
        return std::nullopt;
      }
      return Number(u.mean_cpu_cores());
    });
  }
  // "id", and any key ParseTrialQuery would have rejected (by id ascending).
  return SortBy<int64_t>(trials, matching, key == "id" && desc,
                         [](const v1::Trial& t) -> std::optional<int64_t> { return t.id(); });
}

}  // namespace

absl::StatusOr<TrialQuery> ParseTrialQuery(
    const v1::StudySpec& spec, const std::vector<std::pair<std::string, std::string>>& query) {
  TrialQuery q;
  bool seen_order_by = false;
  bool seen_page_size = false;
  bool seen_page_token = false;
  for (const auto& [key, value] : query) {
    if (key == "order_by") {
      if (absl::Status st = GivenOnce(key, &seen_order_by); !st.ok()) return st;
      if (absl::Status st = ParseOrderBy(spec, value, &q); !st.ok()) return st;
    } else if (key == "state") {
      if (absl::Status st = ParseStates(value, &q); !st.ok()) return st;
    } else if (key == "param") {
      absl::StatusOr<TrialQuery::Range> range = ParseRange(spec, value);
      if (!range.ok()) return range.status();
      q.ranges.push_back(*std::move(range));
    } else if (key == "page_size") {
      if (absl::Status st = GivenOnce(key, &seen_page_size); !st.ok()) return st;
      absl::StatusOr<int> size = ParsePageSize(value);
      if (!size.ok()) return size.status();
      q.page_size = *size;
    } else if (key == "page_token") {
      if (absl::Status st = GivenOnce(key, &seen_page_token); !st.ok()) return st;
      if (absl::Status st = ParsePageToken(value, &q); !st.ok()) return st;
    }
  }
  return q;
}

TrialPage QueryTrials(const v1::StudySpec& spec, absl::Span<const v1::Trial> trials,
                      const TrialQuery& q) {
  const std::vector<size_t> order = Sorted(spec, trials, Matching(trials, q), q);
  TrialPage page;
  page.total_matching = static_cast<int64_t>(order.size());
  const int64_t page_size = std::clamp(q.page_size, 1, kTrialQueryMaxPageSize);
  const int64_t begin = std::clamp<int64_t>(q.offset, 0, page.total_matching);
  const int64_t end = std::min(page.total_matching, begin + page_size);
  page.trials.reserve(static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) {
    page.trials.push_back(&trials[order[static_cast<size_t>(i)]]);
  }
  if (end < page.total_matching) {
    // Later pages keep to the trials of this one's time: ids only grow.
    int64_t max_id = q.max_id;
    if (max_id <= 0) {
      for (const v1::Trial& t : trials) max_id = std::max(max_id, t.id());
    }
    page.next_page_token = StrCat(kPageTokenPrefix, end, ":", max_id);
  }
  return page;
}

}  // namespace evoscale::service
