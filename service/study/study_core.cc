#include "service/study/study_core.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "search/designers.h"
#include "search/early_stopping.h"
#include "search/importance.h"
#include "search/pareto.h"
#include "service/study/study_converter.h"

namespace evoscale::service {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using ::google::protobuf::util::TimeUtil;

struct StudyCore::StudyState {
  StudyState(int64_t id, std::string display_name)
      : id(id), display_name(std::move(display_name)) {}
  const int64_t id;
  const std::string display_name;  // a copy of study.display_name, which never changes
  absl::Mutex mu;
  bool deleted ABSL_GUARDED_BY(mu) = false;
  v1::Study study ABSL_GUARDED_BY(mu);  // spec and state; counters filled on read
  // Derived from study.spec at load or creation; constant afterwards.
  search::ProblemStatement problem;
  search::EarlyStoppingConfig early_stopping;
  absl::Duration heartbeat_timeout;
  int max_retries = kDefaultMaxTrialRetries;

  std::unique_ptr<search::Designer> designer ABSL_GUARDED_BY(mu);
  // trials[i] has id i + 1; completion_seq[i] is its order of completion (0 = not yet).
  std::vector<v1::Trial> trials ABSL_GUARDED_BY(mu);
  std::vector<int64_t> completion_seq ABSL_GUARDED_BY(mu);
  // Completed trial ids in completion order, and how many the designer has seen.
  std::vector<int64_t> completed_order ABSL_GUARDED_BY(mu);
  size_t fed_to_designer ABSL_GUARDED_BY(mu) = 0;
  std::set<int64_t> active ABSL_GUARDED_BY(mu);     // ACTIVE and STOPPING
  std::set<int64_t> requested ABSL_GUARDED_BY(mu);  // REQUESTED
  // Deleted trials stay in `trials` as tombstones (id and name only, STATE_UNSPECIFIED), so
  // ids stay dense and are never reused.
  int64_t deleted_trials ABSL_GUARDED_BY(mu) = 0;
  // Moves with every trial applied: what was derived from the trials at one version holds
  // until it moves.
  uint64_t version ABSL_GUARDED_BY(mu) = 0;
  // GetParameterImportance's answers by metric, at the version they were computed (the
  // dashboard asks every 2 s; at 10,000 trials one costs about 100 ms under the study's lock).
  std::map<std::string, std::pair<uint64_t, v1::GetParameterImportanceResponse>> importance
      ABSL_GUARDED_BY(mu);

  static bool IsTombstone(const v1::Trial& t) { return t.state() == v1::Trial::STATE_UNSPECIFIED; }
  // Trials that count: all but the deleted ones (max_trials counts these).
  int64_t live_trials() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return static_cast<int64_t>(trials.size()) - deleted_trials;
  }

  v1::Trial& trial(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return trials[id - 1]; }

  v1::Study StudyWithCounts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    v1::Study s = study;
    s.set_trial_count(live_trials());
    s.set_completed_trial_count(static_cast<int64_t>(completed_order.size()));
    return s;
  }

  // Applies a trial that has been written to the store to the cache and its indexes.
  void Apply(const v1::Trial& t, int64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++version;
    const int64_t id = t.id();
    if (id == static_cast<int64_t>(trials.size()) + 1) {
      trials.push_back(t);
      completion_seq.push_back(0);
      if (IsTombstone(t)) ++deleted_trials;
    } else {
      if (IsTombstone(t) && !IsTombstone(trials[id - 1])) ++deleted_trials;
      trials[id - 1] = t;
    }
    active.erase(id);
    requested.erase(id);
    if (IsTombstone(t)) {
      // A deleted trial leaves the designer's history: it is rebuilt without it.
      if (completion_seq[id - 1] != 0) {
        completion_seq[id - 1] = 0;
        std::erase(completed_order, id);
        RebuildDesigner().IgnoreError();  // the spec was valid when the study was made
      }
      return;
    }
    switch (t.state()) {
      case v1::Trial::ACTIVE:
      case v1::Trial::STOPPING:
        active.insert(id);
        break;
      case v1::Trial::REQUESTED:
        requested.insert(id);
        break;
      default:
        break;
    }
    if (seq != 0 && completion_seq[id - 1] == 0) {
      completion_seq[id - 1] = seq;
      completed_order.push_back(id);
    }
  }

  int64_t next_completion_seq() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return static_cast<int64_t>(completed_order.size()) + 1;
  }

  // Brings the designer up to date with the trials completed since its last update.
  void SyncDesigner() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<search::Trial> completed;
    for (; fed_to_designer < completed_order.size(); ++fed_to_designer) {
      completed.push_back(ToSearchTrial(trial(completed_order[fed_to_designer])));
    }
    std::vector<search::Trial> pending;
    for (int64_t id : active) pending.push_back(ToSearchTrial(trial(id)));
    for (int64_t id : requested) pending.push_back(ToSearchTrial(trial(id)));
    designer->Update(completed, pending);
  }

  // What one SuggestTrials hands out, built step by step and then written in one batch.
  struct Handout {
    std::vector<v1::Trial> trials;  // to hand to the client, as they will be stored
    std::vector<v1::Trial> failed;  // stale trials that ran out of retries
    bool designer_used = false;
    bool exhausted = false;  // the budget or the search space is spent
  };
  // SuggestTrials' steps, in the order it takes them (each stops at `count` trials).
  // 1. The client's own ACTIVE trials (an idempotent retry), then stale trials of dead clients
  //    (or FAILED, once out of retries).
  void HandBackActive(const std::string& client, int count, absl::Time now, Handout* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // 2. REQUESTED trials (created by clients, waiting for a worker).
  void HandOutRequested(const std::string& client, int count, absl::Time now, Handout* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // 3. New suggestions from the designer, within the budget.
  absl::Status SuggestNew(const std::string& client, int count, absl::Time now, Handout* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // 4. Writes the handout (and COMPLETED, when nothing is left) and applies it to the cache.
  absl::StatusOr<v1::SuggestTrialsResponse> CommitHandout(
      Handout out, absl::FunctionRef<absl::Status(WriteBatch)> commit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  absl::Status RebuildDesigner() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    absl::StatusOr<std::unique_ptr<search::Designer>> d = search::CreateDesigner(problem);
    if (!d.ok()) return d.status();
    designer = *std::move(d);
    fed_to_designer = 0;
    return absl::OkStatus();
  }
};

namespace {

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}
absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(t));
}

bool IsFinal(v1::Trial::State s) {
  return s == v1::Trial::SUCCEEDED || s == v1::Trial::INFEASIBLE || s == v1::Trial::FAILED ||
         s == v1::Trial::STOPPED;
}

inline constexpr int kMaxMetadataKeys = 1000;
inline constexpr size_t kMaxMetadataValueBytes = 64 * 1024;

absl::Status ValidateMetadataKey(absl::string_view key, absl::string_view path) {
  if (key.empty() || key.size() > kMaxNameLength) {
    return InvalidArgumentError(absl::StrFormat("%s: key \"%s\" must be 1 to %d bytes", path,
                                                absl::CEscape(key.substr(0, 64)),
                                                kMaxNameLength));
  }
  return absl::OkStatus();
}

// Study and trial metadata: keys of 1..256 bytes, values up to 64 KiB, at most 1000 keys.
absl::Status ValidateMetadata(const google::protobuf::Map<std::string, std::string>& m,
                              absl::string_view path) {
  if (m.size() > kMaxMetadataKeys) {
    return InvalidArgumentError(
        absl::StrFormat("%s: %d keys; at most %d", path, m.size(), kMaxMetadataKeys));
  }
  for (const auto& [key, value] : m) {
    if (absl::Status st = ValidateMetadataKey(key, path); !st.ok()) return st;
    if (value.size() > kMaxMetadataValueBytes) {
      return InvalidArgumentError(absl::StrFormat("%s[\"%s\"]: value of %d bytes; at most %d",
                                                  path, key, value.size(),
                                                  kMaxMetadataValueBytes));
    }
  }
  return absl::OkStatus();
}

// Where two specs first differ, e.g. "max_trials is modified" (for ALREADY_EXISTS). The
// differencer's lines read "modified: PATH: OLD -> NEW"; the values may be long, the path is
// what a user needs.
std::string FirstDifference(const v1::StudySpec& existing, const v1::StudySpec& wanted) {
  std::string report;
  {
    google::protobuf::util::MessageDifferencer d;
    d.ReportDifferencesToString(&report);
    d.Compare(existing, wanted);
  }
  absl::string_view line = report;
  line = line.substr(0, line.find('\n'));
  const size_t colon = line.find(": ");
  if (colon == absl::string_view::npos) return "the specs differ";
  absl::string_view kind = line.substr(0, colon);
  absl::string_view path = line.substr(colon + 2);
  path = path.substr(0, std::min(path.find(": "), path.find(" ")));
  if (path.size() > 200) path = path.substr(0, 200);
  return absl::StrCat(path, " is ", kind);
}

// Ids are canonical decimal: digits only, no sign, spaces or leading zeros, so one study has
// one name.
absl::StatusOr<int64_t> ParseId(absl::string_view s) {
  int64_t id;
  if (s.empty() || s.size() > 18 || s[0] == '0' ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(s, &id)) {
    return InvalidArgumentError("");
  }
  return id;
}

absl::StatusOr<int64_t> ParseStudyName(absl::string_view name, absl::string_view field) {
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "studies/")) {
    if (absl::StatusOr<int64_t> id = ParseId(rest); id.ok()) return *id;
  }
  return InvalidArgumentError(
      absl::StrFormat("%s: malformed study name \"%s\"; want studies/{id}", field, name));
}

absl::StatusOr<std::pair<int64_t, int64_t>> ParseTrialName(absl::string_view name,
                                                           absl::string_view field) {
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "studies/")) {
    size_t slash = rest.find('/');
    if (slash != absl::string_view::npos) {
      absl::StatusOr<int64_t> study = ParseId(rest.substr(0, slash));
      absl::string_view t = rest.substr(slash);
      if (study.ok() && absl::ConsumePrefix(&t, "/trials/")) {
        if (absl::StatusOr<int64_t> trial = ParseId(t); trial.ok()) {
          return std::make_pair(*study, *trial);
        }
      }
    }
  }
  return InvalidArgumentError(absl::StrFormat(
      "%s: malformed trial name \"%s\"; want studies/{id}/trials/{id}", field, name));
}

absl::StatusOr<int> PageSize(int32_t page_size) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return InvalidArgumentError(
        absl::StrFormat("page_size: %d must be in [0, %d]", page_size, kMaxPageSize));
  }
  return page_size == 0 ? kDefaultPageSize : page_size;
}

// Page tokens are the id of the last item returned; opaque to clients.
absl::StatusOr<int64_t> PageStart(absl::string_view token) {
  if (token.empty()) return 0;
  int64_t last;
  if (!absl::SimpleAtoi(token, &last) || last <= 0) {
    return InvalidArgumentError(absl::StrFormat("page_token: malformed token \"%s\"", token));
  }
  return last;
}

absl::Status NotFoundStudy(int64_t id) {
  return absl::NotFoundError(absl::StrFormat("study \"studies/%d\" not found", id));
}

// The objective early stopping watches: the first metric that is not a constraint.
const search::MetricConfig& PrimaryMetric(const search::ProblemStatement& p) {
  for (const auto& m : p.metrics) {
    if (!m.safety_threshold.has_value()) return m;
  }
  return p.metrics.front();
}

// A final measurement must carry every metric of the study.
absl::Status RequireMetrics(const search::ProblemStatement& problem, const v1::Measurement& m,
                            absl::string_view path) {
  for (const search::MetricConfig& metric : problem.metrics) {
    if (!m.metrics().contains(metric.name)) {
      return InvalidArgumentError(StrCat(path, ".metrics: missing metric \"", metric.name, "\""));
    }
  }
  return absl::OkStatus();
}

// An intermediate measurement names at least one of the study's metrics (others may ride
// along, as Vizier allows): a measurement of only unknown names is a typo, and would be kept
// where no chart, early stopping rule or final measurement could use it.
absl::Status RequireSomeMetric(const search::ProblemStatement& problem, const v1::Measurement& m,
                               absl::string_view path) {
  std::vector<std::string> names;
  for (const search::MetricConfig& metric : problem.metrics) {
    if (m.metrics().contains(metric.name)) return absl::OkStatus();
    names.push_back(StrCat("\"", metric.name, "\""));
  }
  std::vector<std::string> given;
  for (const auto& [name, value] : m.metrics()) given.push_back(StrCat("\"", name, "\""));
  std::sort(given.begin(), given.end());
  return InvalidArgumentError(StrCat(path, ".metrics: ", absl::StrJoin(given, ", "),
                                     given.size() == 1 ? " is not a metric" : " are not metrics",
                                     " of the study (", absl::StrJoin(names, ", "), ")"));
}

const char* TrialStateName(v1::Trial::State s) { return v1::Trial::State_Name(s).c_str(); }

// What CreateTrial's `trial` says of how the trial ended, checked: its state (unset: SUCCEEDED
// with a final measurement, else REQUESTED; or REQUESTED, SUCCEEDED, STOPPED, INFEASIBLE:
// a result from elsewhere, e.g. a run another tool stopped early), its intermediate
// measurements, its final measurement (STOPPED: the last intermediate one when not given) and
// infeasible_reason. The answer carries those four fields only.
absl::StatusOr<v1::Trial> EndedTrial(const search::ProblemStatement& problem,
                                     const v1::Trial& in) {
  v1::Trial out;
  v1::Measurement fm = in.final_measurement();
  const bool has_final = fm.metrics_size() > 0;
  switch (in.state()) {
    case v1::Trial::STATE_UNSPECIFIED:
      out.set_state(has_final ? v1::Trial::SUCCEEDED : v1::Trial::REQUESTED);
      break;
    case v1::Trial::REQUESTED:
    case v1::Trial::SUCCEEDED:
    case v1::Trial::STOPPED:
    case v1::Trial::INFEASIBLE:
      out.set_state(in.state());
      break;
    default:
      return InvalidArgumentError(absl::StrFormat(
          "trial.state: a trial is created REQUESTED, SUCCEEDED, STOPPED or INFEASIBLE, not %s",
          v1::Trial::State_IsValid(in.state()) ? TrialStateName(in.state())
                                                : absl::StrCat(in.state()).c_str()));
  }
  if (in.measurements_size() > kMaxMeasurementsPerTrial) {
    return InvalidArgumentError(absl::StrFormat("trial.measurements: %d; at most %d",
                                                in.measurements_size(), kMaxMeasurementsPerTrial));
  }
  for (int i = 0; i < in.measurements_size(); ++i) {
    const std::string path = StrCat("trial.measurements[", i, "]");
    if (absl::Status st = ValidateMeasurement(in.measurements(i), path); !st.ok()) return st;
    if (absl::Status st = RequireSomeMetric(problem, in.measurements(i), path); !st.ok()) return st;
  }
  *out.mutable_measurements() = in.measurements();
  if (!in.infeasible_reason().empty() && out.state() != v1::Trial::INFEASIBLE) {
    return InvalidArgumentError("trial.infeasible_reason: only an INFEASIBLE trial has one");
  }
  if (in.infeasible_reason().size() > 4096) {
    return InvalidArgumentError("trial.infeasible_reason: longer than 4096 bytes");
  }
  out.set_infeasible_reason(in.infeasible_reason());
  switch (out.state()) {
    case v1::Trial::REQUESTED:
      if (has_final) {
        return InvalidArgumentError(
            "trial.final_measurement: a REQUESTED trial has not run; it has none");
      }
      return out;
    case v1::Trial::STOPPED:
      if (!has_final && in.measurements_size() > 0) {
        fm = in.measurements(in.measurements_size() - 1);
      }
      break;
    case v1::Trial::INFEASIBLE:
      if (!has_final) return out;
      break;
    default:
      break;
  }
  if (fm.metrics_size() == 0) {
    return InvalidArgumentError(absl::StrCat("trial.final_measurement: a ",
                                             TrialStateName(out.state()),
                                             " trial needs one (or, STOPPED, a measurement)"));
  }
  if (absl::Status st = ValidateMeasurement(fm, "trial.final_measurement"); !st.ok()) return st;
  if (out.state() != v1::Trial::INFEASIBLE) {
    if (absl::Status st = RequireMetrics(problem, fm, "trial.final_measurement"); !st.ok()) {
      return st;
    }
  }
  *out.mutable_final_measurement() = std::move(fm);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StudyCore>> StudyCore::Create(Store* store, Clock* clock) {
  std::unique_ptr<StudyCore> core(new StudyCore(store, clock));
  if (absl::Status st = core->Load(); !st.ok()) return st;
  return core;
}

absl::Status StudyCore::Load() {
  absl::StatusOr<std::vector<StoredStudy>> stored = store_->LoadAll();
  if (!stored.ok()) return stored.status();
  absl::StatusOr<int64_t> next_id = store_->NextStudyId();
  if (!next_id.ok()) return next_id.status();
  absl::MutexLock lock(&mu_);
  next_study_id_ = *next_id;
  for (StoredStudy& s : *stored) {
    auto state = std::make_shared<StudyState>(s.id, s.study.display_name());
    absl::MutexLock study_lock(&state->mu);
    absl::StatusOr<search::ProblemStatement> problem = ToProblem(s.study.spec());
    if (!problem.ok()) {
      return absl::DataLossError(
          StrCat("stored study ", s.study.name(), " is invalid: ", problem.status().message()));
    }
    state->problem = *std::move(problem);
    state->early_stopping = ToEarlyStopping(s.study.spec().early_stopping());
    const v1::StudySpec& spec = s.study.spec();
    state->heartbeat_timeout =
        absl::Seconds(spec.heartbeat_timeout_seconds() > 0 ? spec.heartbeat_timeout_seconds()
                                                           : kDefaultHeartbeatTimeoutSeconds);
    if (spec.max_trial_retries() > 0) state->max_retries = spec.max_trial_retries();
    state->study = std::move(s.study);
    // Trials are dense 1..n; completed ones are replayed in completion order.
    std::vector<std::pair<int64_t, int64_t>> order;  // (seq, id)
    for (StoredTrial& t : s.trials) {
      if (t.trial.id() != static_cast<int64_t>(state->trials.size()) + 1) {
        return absl::DataLossError(
            StrCat("study ", state->study.name(), ": trial ", t.trial.id(), " out of sequence"));
      }
      if (t.completion_seq != 0) order.emplace_back(t.completion_seq, t.trial.id());
      state->Apply(t.trial, 0);
      state->completion_seq.back() = t.completion_seq;
    }
    std::sort(order.begin(), order.end());
    for (const auto& [seq, id] : order) state->completed_order.push_back(id);
    if (absl::Status st = state->RebuildDesigner(); !st.ok()) return st;
    next_study_id_ = std::max(next_study_id_, s.id + 1);
    studies_.emplace(s.id, std::move(state));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<StudyCore::StudyState>> StudyCore::FindStudy(
    absl::string_view name, absl::string_view field) {
  absl::StatusOr<int64_t> id = ParseStudyName(name, field);
  if (!id.ok()) return id.status();
  absl::MutexLock lock(&mu_);
  auto it = studies_.find(*id);
  if (it == studies_.end()) return NotFoundStudy(*id);
  return it->second;
}

absl::StatusOr<std::pair<std::shared_ptr<StudyCore::StudyState>, int64_t>> StudyCore::FindTrial(
    absl::string_view name, absl::string_view field) {
  absl::StatusOr<std::pair<int64_t, int64_t>> ids = ParseTrialName(name, field);
  if (!ids.ok()) return ids.status();
  absl::MutexLock lock(&mu_);
  auto it = studies_.find(ids->first);
  if (it == studies_.end()) return NotFoundStudy(ids->first);
  return std::make_pair(it->second, ids->second);
}

// Looks up the study and trial of `name` and locks the study: `state` and `trial_id` are
// bound, and `lock` holds the study's mutex. Returns from the enclosing function on error.
#define EVOSCALE_LOCK_TRIAL(name, field)                                         \
  auto found = FindTrial(name, field);                                           \
  if (!found.ok()) return found.status();                                        \
  auto& [state, trial_id] = *found;                                              \
  absl::MutexLock lock(&state->mu);                                              \
  if (state->deleted) return NotFoundStudy(state->id);                           \
  if (trial_id > static_cast<int64_t>(state->trials.size()) ||                  \
      StudyState::IsTombstone(state->trial(trial_id))) {                         \
    return absl::NotFoundError(absl::StrFormat("trial \"%s\" not found", name)); \
  }

absl::StatusOr<v1::Study> StudyCore::Apply(const v1::CreateStudyRequest& req) {
  const v1::Study& in = req.study();
  if (in.display_name().size() > kMaxNameLength) {
    return InvalidArgumentError(StrCat("study.display_name: longer than ", kMaxNameLength));
  }
  absl::StatusOr<search::ProblemStatement> problem = ToProblem(in.spec());
  if (!problem.ok()) {
    return absl::Status(problem.status().code(), StrCat("study.", problem.status().message()));
  }
  if (absl::Status st = ValidateMetadata(in.metadata(), "study.metadata"); !st.ok()) return st;
  absl::MutexLock lock(&mu_);
  // Get-or-create by display name (Vizier's semantics): creators hold mu_, so of many
  // concurrent creators of one name the first creates the study and the others find it.
  if (!in.display_name().empty()) {
    for (const auto& [id, other] : studies_) {
      if (other->display_name != in.display_name()) continue;
      absl::MutexLock other_lock(&other->mu);
      if (other->deleted) continue;
      if (google::protobuf::util::MessageDifferencer::Equals(other->study.spec(), in.spec())) {
        return other->StudyWithCounts();
      }
      return absl::AlreadyExistsError(absl::StrFormat(
          "study.display_name: \"%s\" is study \"%s\", whose spec differs (%s); use that "
          "spec, or another display_name",
          in.display_name(), other->study.name(), FirstDifference(other->study.spec(), in.spec())));
    }
  }
  auto state = std::make_shared<StudyState>(next_study_id_, in.display_name());
  absl::MutexLock study_lock(&state->mu);
  state->problem = *std::move(problem);
  if (absl::Status st = state->RebuildDesigner(); !st.ok()) {
    return absl::Status(st.code(), StrCat("study.spec.algorithm: ", st.message()));
  }
  state->early_stopping = ToEarlyStopping(in.spec().early_stopping());
  state->heartbeat_timeout = absl::Seconds(in.spec().heartbeat_timeout_seconds() > 0
                                               ? in.spec().heartbeat_timeout_seconds()
                                               : kDefaultHeartbeatTimeoutSeconds);
  if (in.spec().max_trial_retries() > 0) state->max_retries = in.spec().max_trial_retries();
  v1::Study& study = state->study;
  study.set_name(StrCat("studies/", state->id));
  study.set_display_name(in.display_name());
  *study.mutable_spec() = in.spec();
  *study.mutable_metadata() = in.metadata();
  study.set_state(v1::Study::ACTIVE);
  *study.mutable_create_time() = ToProto(clock_->Now());
  WriteBatch batch;
  batch.PutStudy(state->id, study);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  ++next_study_id_;
  studies_.emplace(state->id, state);
  return state->StudyWithCounts();
}

absl::StatusOr<v1::Study> StudyCore::Apply(const v1::GetStudyRequest& req) {
  auto state = FindStudy(req.name(), "name");
  if (!state.ok()) return state.status();
  absl::MutexLock lock(&(*state)->mu);
  if ((*state)->deleted) return NotFoundStudy((*state)->id);
  return (*state)->StudyWithCounts();
}

absl::StatusOr<std::string> StudyCore::Apply(const ReadStudyRequest& req) {
  auto state = FindStudy(req.name, "name");
  if (!state.ok()) return state.status();
  absl::MutexLock lock(&(*state)->mu);
  if ((*state)->deleted) return NotFoundStudy((*state)->id);
  return req.fn((*state)->StudyWithCounts(), (*state)->trials, (*state)->version);
}

absl::StatusOr<v1::ListStudiesResponse> StudyCore::Apply(const v1::ListStudiesRequest& req) {
  absl::StatusOr<int> page_size = PageSize(req.page_size());
  if (!page_size.ok()) return page_size.status();
  absl::StatusOr<int64_t> start = PageStart(req.page_token());
  if (!start.ok()) return start.status();
  std::vector<std::shared_ptr<StudyState>> page;
  bool more = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = studies_.upper_bound(*start); it != studies_.end(); ++it) {
      if (static_cast<int>(page.size()) == *page_size) {
        more = true;
        break;
      }
      if (!req.display_name().empty() && it->second->display_name != req.display_name()) {
        continue;
      }
      page.push_back(it->second);
    }
  }
  v1::ListStudiesResponse resp;
  for (const auto& s : page) {
    absl::MutexLock lock(&s->mu);
    if (!s->deleted) *resp.add_studies() = s->StudyWithCounts();
  }
  if (more && !page.empty()) resp.set_next_page_token(StrCat(page.back()->id));
  return resp;
}

absl::Status StudyCore::Apply(const v1::DeleteStudyRequest& req) {
  auto state = FindStudy(req.name(), "name");
  if (!state.ok()) return state.status();
  absl::MutexLock lock(&mu_);
  absl::MutexLock study_lock(&(*state)->mu);
  if ((*state)->deleted) return NotFoundStudy((*state)->id);
  WriteBatch batch;
  batch.DeleteStudy((*state)->id);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  (*state)->deleted = true;
  studies_.erase((*state)->id);
  return absl::OkStatus();
}

absl::StatusOr<v1::Study> StudyCore::Apply(const v1::SetStudyStateRequest& req) {
  if (req.state() != v1::Study::ACTIVE && req.state() != v1::Study::INACTIVE &&
      req.state() != v1::Study::COMPLETED) {
    return InvalidArgumentError(
        StrCat("state: must be ACTIVE, INACTIVE or COMPLETED, got ", req.state()));
  }
  auto state = FindStudy(req.name(), "name");
  if (!state.ok()) return state.status();
  StudyState& s = **state;
  absl::MutexLock lock(&s.mu);
  if (s.deleted) return NotFoundStudy(s.id);
  v1::Study next = s.study;
  next.set_state(req.state());
  WriteBatch batch;
  batch.PutStudy(s.id, next);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  s.study = std::move(next);
  return s.StudyWithCounts();
}

void StudyCore::StudyState::HandBackActive(const std::string& client, int count, absl::Time now,
                                           Handout* out) {
  const google::protobuf::Timestamp now_proto = ToProto(now);
  std::vector<v1::Trial> taken;  // stale trials this client may take over
  for (int64_t id : active) {
    const v1::Trial& t = trial(id);
    if (t.state() != v1::Trial::ACTIVE) continue;
    if (t.client_id() == client) {
      if (static_cast<int>(out->trials.size()) >= count) continue;
      v1::Trial n = t;
      *n.mutable_heartbeat_time() = now_proto;
      out->trials.push_back(std::move(n));
      continue;
    }
    if (FromProto(t.heartbeat_time()) + heartbeat_timeout > now) continue;  // alive
    v1::Trial n = t;
    if (t.retries() >= max_retries) {
      n.set_state(v1::Trial::FAILED);
      n.set_infeasible_reason(absl::StrFormat("no heartbeat within %s, %d times",
                                              absl::FormatDuration(heartbeat_timeout),
                                              t.retries() + 1));
      *n.mutable_end_time() = now_proto;
      out->failed.push_back(std::move(n));
    } else {
      n.set_client_id(client);
      n.set_retries(t.retries() + 1);
      *n.mutable_heartbeat_time() = now_proto;
      taken.push_back(std::move(n));
    }
  }
  for (v1::Trial& n : taken) {
    if (static_cast<int>(out->trials.size()) >= count) break;
    out->trials.push_back(std::move(n));
  }
}

void StudyCore::StudyState::HandOutRequested(const std::string& client, int count, absl::Time now,
                                             Handout* out) {
  const google::protobuf::Timestamp now_proto = ToProto(now);
  for (auto it = requested.begin();
       it != requested.end() && static_cast<int>(out->trials.size()) < count; ++it) {
    v1::Trial n = trial(*it);
    n.set_state(v1::Trial::ACTIVE);
    n.set_client_id(client);
    *n.mutable_start_time() = now_proto;
    *n.mutable_heartbeat_time() = now_proto;
    out->trials.push_back(std::move(n));
  }
}

absl::Status StudyCore::StudyState::SuggestNew(const std::string& client, int count, absl::Time now,
                                               Handout* out) {
  const int64_t max_trials = study.spec().max_trials();
  const int64_t stored = static_cast<int64_t>(trials.size());
  const int64_t live = live_trials();
  int64_t room = count - static_cast<int64_t>(out->trials.size());
  if (max_trials > 0) room = std::min(room, max_trials - live);
  out->exhausted = max_trials > 0 && live >= max_trials;
  if (room <= 0 || study.state() != v1::Study::ACTIVE) return absl::OkStatus();
  SyncDesigner();
  out->designer_used = true;
  absl::StatusOr<std::vector<search::ParameterDict>> suggestions =
      designer->Suggest(static_cast<int>(room), stored);
  if (!suggestions.ok()) return suggestions.status();
  if (static_cast<int64_t>(suggestions->size()) < room) out->exhausted = true;  // space spent
  const google::protobuf::Timestamp now_proto = ToProto(now);
  int64_t next_id = stored + 1;
  for (const search::ParameterDict& params : *suggestions) {
    v1::Trial n;
    n.set_id(next_id);
    n.set_name(StrCat(study.name(), "/trials/", next_id));
    ++next_id;
    n.set_state(v1::Trial::ACTIVE);
    n.set_client_id(client);
    SetParameters(params, &n);
    *n.mutable_resources() = study.spec().trial_template().resources();
    *n.mutable_start_time() = now_proto;
    *n.mutable_heartbeat_time() = now_proto;
    out->trials.push_back(std::move(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SuggestTrialsResponse> StudyCore::StudyState::CommitHandout(
    Handout out, absl::FunctionRef<absl::Status(WriteBatch)> commit) {
  // The budget is spent and nothing is left to hand out: the study is done.
  const bool completes_study =
      out.trials.empty() && out.exhausted && study.state() == v1::Study::ACTIVE;
  WriteBatch batch;
  int64_t seq = next_completion_seq();
  std::vector<int64_t> failed_seq;
  for (const v1::Trial& f : out.failed) {
    failed_seq.push_back(seq);
    batch.PutTrial(id, f, seq++);
  }
  for (const v1::Trial& t : out.trials) batch.PutTrial(id, t, 0);
  if (completes_study) {
    v1::Study completed = study;
    completed.set_state(v1::Study::COMPLETED);
    batch.PutStudy(id, completed);
  }
  if (absl::Status st = commit(std::move(batch)); !st.ok()) {
    if (out.designer_used) RebuildDesigner().IgnoreError();
    return st;
  }
  for (size_t i = 0; i < out.failed.size(); ++i) Apply(out.failed[i], failed_seq[i]);
  for (const v1::Trial& t : out.trials) Apply(t, 0);
  if (completes_study) study.set_state(v1::Study::COMPLETED);
  v1::SuggestTrialsResponse resp;
  resp.mutable_trials()->Reserve(static_cast<int>(out.trials.size()));
  for (v1::Trial& t : out.trials) *resp.add_trials() = std::move(t);
  resp.set_study_state(study.state());
  return resp;
}

absl::StatusOr<v1::SuggestTrialsResponse> StudyCore::Apply(const v1::SuggestTrialsRequest& req) {
  if (req.suggestion_count() < 1 || req.suggestion_count() > kMaxSuggestionCount) {
    return InvalidArgumentError(absl::StrFormat("suggestion_count: %d must be in [1, %d]",
                                                req.suggestion_count(), kMaxSuggestionCount));
  }
  if (req.client_id().empty()) return InvalidArgumentError("client_id: must not be empty");
  if (req.client_id().size() > kMaxNameLength) {
    return InvalidArgumentError(StrCat("client_id: longer than ", kMaxNameLength));
  }
  auto found = FindStudy(req.parent(), "parent");
  if (!found.ok()) return found.status();
  StudyState& s = **found;
  absl::MutexLock lock(&s.mu);
  if (s.deleted) return NotFoundStudy(s.id);
  if (s.study.state() == v1::Study::INACTIVE) {
    return absl::FailedPreconditionError(
        StrCat("study \"", s.study.name(), "\" is INACTIVE; set it ACTIVE to get suggestions"));
  }
  const int count = req.suggestion_count();
  const absl::Time now = clock_->Now();
  StudyState::Handout out;
  s.HandBackActive(req.client_id(), count, now, &out);
  s.HandOutRequested(req.client_id(), count, now, &out);
  if (absl::Status st = s.SuggestNew(req.client_id(), count, now, &out); !st.ok()) return st;
  return s.CommitHandout(std::move(out),
                         [this](WriteBatch batch) { return Commit(std::move(batch)); });
}

absl::StatusOr<v1::Trial> StudyCore::Apply(const v1::CreateTrialRequest& req) {
  auto found = FindStudy(req.parent(), "parent");
  if (!found.ok()) return found.status();
  StudyState& s = **found;
  absl::MutexLock lock(&s.mu);
  if (s.deleted) return NotFoundStudy(s.id);
  absl::StatusOr<search::ParameterDict> params =
      ToParameterDict(s.problem.space, req.trial().parameters(), "trial.parameters");
  if (!params.ok()) return params.status();
  const v1::Trial& in = req.trial();
  absl::StatusOr<v1::Trial> ended = EndedTrial(s.problem, in);
  if (!ended.ok()) return ended.status();
  const bool completed = ended->state() != v1::Trial::REQUESTED;
  const int64_t max_trials = s.study.spec().max_trials();
  if (absl::Status st = ValidateMetadata(req.trial().metadata(), "trial.metadata"); !st.ok()) {
    return st;
  }
  if (max_trials > 0 && s.live_trials() >= max_trials) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "study \"%s\" already holds max_trials=%d trials", s.study.name(), max_trials));
  }
  const google::protobuf::Timestamp now = ToProto(clock_->Now());
  v1::Trial t;
  t.set_id(static_cast<int64_t>(s.trials.size()) + 1);
  t.set_name(StrCat(s.study.name(), "/trials/", t.id()));
  SetParameters(*params, &t);
  t.set_client_id(req.trial().client_id());
  *t.mutable_metadata() = req.trial().metadata();
  *t.mutable_resources() = s.study.spec().trial_template().resources();
  t.set_state(ended->state());
  *t.mutable_measurements() = ended->measurements();
  int64_t seq = 0;
  if (completed) {
    if (ended->has_final_measurement()) *t.mutable_final_measurement() = ended->final_measurement();
    t.set_infeasible_reason(ended->infeasible_reason());
    *t.mutable_start_time() = now;
    *t.mutable_end_time() = now;
    seq = s.next_completion_seq();
  }
  WriteBatch batch;
  batch.PutTrial(s.id, t, seq);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  s.Apply(t, seq);
  return t;
}

absl::StatusOr<v1::Trial> StudyCore::Apply(const v1::GetTrialRequest& req) {
  EVOSCALE_LOCK_TRIAL(req.name(), "name");
  return state->trial(trial_id);
}

absl::StatusOr<v1::ListTrialsResponse> StudyCore::Apply(const v1::ListTrialsRequest& req) {
  absl::StatusOr<int> page_size = PageSize(req.page_size());
  if (!page_size.ok()) return page_size.status();
  absl::StatusOr<int64_t> start = PageStart(req.page_token());
  if (!start.ok()) return start.status();
  if (!v1::Trial::State_IsValid(req.state())) {
    return InvalidArgumentError(StrCat("state: unknown trial state ", req.state()));
  }
  auto found = FindStudy(req.parent(), "parent");
  if (!found.ok()) return found.status();
  StudyState& s = **found;
  absl::MutexLock lock(&s.mu);
  if (s.deleted) return NotFoundStudy(s.id);
  v1::ListTrialsResponse resp;
  const int64_t n = static_cast<int64_t>(s.trials.size());
  for (int64_t id = *start + 1; id <= n; ++id) {
    const v1::Trial& t = s.trial(id);
    if (StudyState::IsTombstone(t)) continue;
    if (req.state() != v1::Trial::STATE_UNSPECIFIED && t.state() != req.state()) continue;
    if (resp.trials_size() == *page_size) {
      resp.set_next_page_token(StrCat(resp.trials(resp.trials_size() - 1).id()));
      break;
    }
    *resp.add_trials() = t;
  }
  return resp;
}

absl::StatusOr<v1::Trial> StudyCore::Apply(const v1::AddTrialMeasurementRequest& req) {
  if (absl::Status st = ValidateMeasurement(req.measurement(), "measurement"); !st.ok()) {
    return st;
  }
  if (req.measurement().metrics().empty()) {
    return InvalidArgumentError("measurement.metrics: at least one metric is required");
  }
  EVOSCALE_LOCK_TRIAL(req.trial_name(), "trial_name");
  if (absl::Status st = RequireSomeMetric(state->problem, req.measurement(), "measurement");
      !st.ok()) {
    return st;
  }
  const v1::Trial& t = state->trial(trial_id);
  if (t.state() != v1::Trial::ACTIVE && t.state() != v1::Trial::STOPPING) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is %s; measurements need ACTIVE or STOPPING", t.name(),
                        TrialStateName(t.state())));
  }
  if (t.measurements_size() >= kMaxMeasurementsPerTrial) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "trial \"%s\" already holds %d measurements", t.name(), kMaxMeasurementsPerTrial));
  }
  v1::Trial n = t;
  *n.add_measurements() = req.measurement();
  *n.mutable_heartbeat_time() = ToProto(clock_->Now());
  WriteBatch batch;
  batch.PutTrial(state->id, n, 0);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  state->Apply(n, 0);
  return n;
}

absl::StatusOr<v1::Trial> StudyCore::Apply(const v1::CompleteTrialRequest& req) {
  if (absl::Status st = ValidateMeasurement(req.final_measurement(), "final_measurement");
      !st.ok()) {
    return st;
  }
  if (req.infeasible_reason().size() > 4096) {
    return InvalidArgumentError("infeasible_reason: longer than 4096 bytes");
  }
  if (absl::Status st = ValidateUsage(req.usage(), "usage"); !st.ok()) return st;
  EVOSCALE_LOCK_TRIAL(req.name(), "name");
  const v1::Trial& t = state->trial(trial_id);
  if (IsFinal(t.state())) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is already %s", t.name(), TrialStateName(t.state())));
  }
  v1::Trial n = t;
  const google::protobuf::Timestamp now = ToProto(clock_->Now());
  if (req.trial_infeasible()) {
    n.set_state(v1::Trial::INFEASIBLE);
    n.set_infeasible_reason(req.infeasible_reason());
    if (req.final_measurement().metrics_size() > 0) {
      *n.mutable_final_measurement() = req.final_measurement();
    }
  } else {
    v1::Measurement fm = req.final_measurement();
    // As Vizier: without a final measurement, the last intermediate one is final.
    if (fm.metrics().empty() && t.measurements_size() > 0) {
      fm = t.measurements(t.measurements_size() - 1);
    }
    if (fm.metrics().empty()) {
      return InvalidArgumentError(
          "final_measurement.metrics: empty, and the trial has no measurement to use instead");
    }
    if (absl::Status st = RequireMetrics(state->problem, fm, "final_measurement"); !st.ok()) {
      return st;
    }
    // A trial stopped early ends STOPPED: its final measurement is that of a shortened run.
    n.set_state(t.state() == v1::Trial::STOPPING ? v1::Trial::STOPPED : v1::Trial::SUCCEEDED);
    *n.mutable_final_measurement() = std::move(fm);
  }
  if (req.has_usage()) *n.mutable_usage() = req.usage();
  if (!n.has_start_time()) *n.mutable_start_time() = now;
  *n.mutable_end_time() = now;
  *n.mutable_heartbeat_time() = now;
  const int64_t seq = state->next_completion_seq();
  WriteBatch batch;
  batch.PutTrial(state->id, n, seq);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  state->Apply(n, seq);
  return n;
}

absl::StatusOr<v1::Trial> StudyCore::Apply(const RerunTrialRequest& req) {
  if (absl::Status st = ValidateResources(req.resources, "resources"); !st.ok()) return st;
  if (req.oom_kills < 0) return InvalidArgumentError("oom_kills: must be >= 0");
  EVOSCALE_LOCK_TRIAL(req.name, "name");
  const v1::Trial& t = state->trial(trial_id);
  if (t.state() != v1::Trial::ACTIVE) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is %s; only an ACTIVE trial runs again", t.name(),
                        TrialStateName(t.state())));
  }
  v1::Trial n = t;
  *n.mutable_resources() = req.resources;
  if (!req.keep_measurements) n.clear_measurements();
  n.mutable_usage()->set_oom_kills(t.usage().oom_kills() + req.oom_kills);
  *n.mutable_heartbeat_time() = ToProto(clock_->Now());
  WriteBatch batch;
  batch.PutTrial(state->id, n, 0);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  state->Apply(n, 0);
  return n;
}

absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> StudyCore::Apply(
    const v1::CheckTrialEarlyStoppingStateRequest& req) {
  EVOSCALE_LOCK_TRIAL(req.trial_name(), "trial_name");
  const v1::Trial& t = state->trial(trial_id);
  v1::CheckTrialEarlyStoppingStateResponse resp;
  if (t.state() == v1::Trial::STOPPING) {
    resp.set_should_stop(true);
    return resp;
  }
  if (t.state() != v1::Trial::ACTIVE ||
      state->early_stopping.policy == search::EarlyStoppingPolicy::kNone) {
    return resp;
  }
  std::vector<search::Trial> others;
  others.reserve(state->trials.size());
  for (const v1::Trial& o : state->trials) {
    if (o.id() != t.id() && o.measurements_size() > 0) others.push_back(ToSearchTrial(o));
  }
  resp.set_should_stop(search::ShouldStop(state->early_stopping, PrimaryMetric(state->problem),
                                          ToSearchTrial(t), others));
  if (resp.should_stop()) {
    // As Vizier: the decision is kept (the trial is STOPPING), so the client's CompleteTrial
    // ends it STOPPED and later checks answer the same.
    if (absl::StatusOr<v1::Trial> n = MarkStopping(*state, t); !n.ok()) return n.status();
  }
  return resp;
}

absl::StatusOr<v1::Trial> StudyCore::Apply(const v1::StopTrialRequest& req) {
  EVOSCALE_LOCK_TRIAL(req.name(), "name");
  const v1::Trial& t = state->trial(trial_id);
  if (t.state() == v1::Trial::STOPPING) return t;
  if (t.state() != v1::Trial::ACTIVE) {
    return absl::FailedPreconditionError(
        absl::StrFormat("trial \"%s\" is %s; only ACTIVE trials can be stopped", t.name(),
                        TrialStateName(t.state())));
  }
  return MarkStopping(*state, t);
}

absl::StatusOr<v1::Trial> StudyCore::MarkStopping(StudyState& state, const v1::Trial& t) {
  v1::Trial n = t;
  n.set_state(v1::Trial::STOPPING);
  WriteBatch batch;
  batch.PutTrial(state.id, n, 0);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  state.Apply(n, 0);
  return n;
}

absl::Status StudyCore::Apply(const v1::DeleteTrialRequest& req) {
  EVOSCALE_LOCK_TRIAL(req.name(), "name");
  v1::Trial tombstone;
  tombstone.set_id(trial_id);
  tombstone.set_name(state->trial(trial_id).name());
  WriteBatch batch;
  batch.PutTrial(state->id, tombstone, 0);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  state->Apply(tombstone, 0);
  return absl::OkStatus();
}

namespace {
// Applies an UpdateMetadataRequest's removals and then its settings to `m`.
absl::Status UpdateMap(const v1::UpdateMetadataRequest& req,
                       google::protobuf::Map<std::string, std::string>* m) {
  for (const std::string& key : req.remove()) {
    if (absl::Status st = ValidateMetadataKey(key, "remove"); !st.ok()) return st;
    m->erase(key);
  }
  for (const auto& [key, value] : req.set()) (*m)[key] = value;
  return ValidateMetadata(*m, "set");
}
}  // namespace

absl::StatusOr<v1::UpdateMetadataResponse> StudyCore::Apply(const v1::UpdateMetadataRequest& req) {
  v1::UpdateMetadataResponse resp;
  if (!absl::StrContains(req.name(), "/trials/")) {
    auto found = FindStudy(req.name(), "name");
    if (!found.ok()) return found.status();
    StudyState& s = **found;
    absl::MutexLock lock(&s.mu);
    if (s.deleted) return NotFoundStudy(s.id);
    v1::Study next = s.study;
    if (absl::Status st = UpdateMap(req, next.mutable_metadata()); !st.ok()) return st;
    WriteBatch batch;
    batch.PutStudy(s.id, next);
    if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
    s.study = std::move(next);
    *resp.mutable_metadata() = s.study.metadata();
    return resp;
  }
  EVOSCALE_LOCK_TRIAL(req.name(), "name");
  v1::Trial n = state->trial(trial_id);
  if (absl::Status st = UpdateMap(req, n.mutable_metadata()); !st.ok()) return st;
  WriteBatch batch;
  batch.PutTrial(state->id, n, state->completion_seq[trial_id - 1]);
  if (absl::Status st = Commit(std::move(batch)); !st.ok()) return st;
  state->Apply(n, 0);
  *resp.mutable_metadata() = n.metadata();
  return resp;
}

absl::StatusOr<v1::GetParameterImportanceResponse> StudyCore::Apply(
    const v1::GetParameterImportanceRequest& req) {
  auto found = FindStudy(req.parent(), "parent");
  if (!found.ok()) return found.status();
  StudyState& s = **found;
  absl::MutexLock lock(&s.mu);
  if (s.deleted) return NotFoundStudy(s.id);
  std::string metric = req.metric();
  if (metric.empty()) {
    metric = PrimaryMetric(s.problem).name;
  } else if (std::none_of(s.problem.metrics.begin(), s.problem.metrics.end(),
                          [&](const search::MetricConfig& m) { return m.name == metric; })) {
    std::vector<std::string> names;
    for (const search::MetricConfig& m : s.problem.metrics) names.push_back(StrCat("\"", m.name, "\""));
    return InvalidArgumentError(StrCat("metric: \"", metric, "\" is not a metric of the study (",
                                       absl::StrJoin(names, ", "), ")"));
  }
  if (auto cached = s.importance.find(metric);
      cached != s.importance.end() && cached->second.first == s.version) {
    return cached->second.second;
  }
  std::vector<search::Trial> succeeded;
  for (const v1::Trial& t : s.trials) {
    if (t.state() != v1::Trial::SUCCEEDED || !t.final_measurement().metrics().contains(metric)) {
      continue;
    }
    succeeded.push_back(ToSearchTrial(t));
  }
  auto& [version, resp] = s.importance[metric];
  version = s.version;
  resp.Clear();
  resp.set_metric(metric);
  resp.set_trial_count(static_cast<int32_t>(succeeded.size()));
  for (const search::ParameterImportance& p :
       search::MainEffectImportance(s.problem.space, succeeded, metric)) {
    v1::ParameterImportance* out = resp.add_parameters();
    out->set_name(p.name);
    out->set_importance(p.importance);
    out->set_explained_variance(p.explained_variance);
    out->set_trial_count(p.trials);
  }
  return resp;
}

absl::StatusOr<v1::ListOptimalTrialsResponse> StudyCore::Apply(
    const v1::ListOptimalTrialsRequest& req) {
  auto found = FindStudy(req.parent(), "parent");
  if (!found.ok()) return found.status();
  StudyState& s = **found;
  absl::MutexLock lock(&s.mu);
  if (s.deleted) return NotFoundStudy(s.id);
  v1::ListOptimalTrialsResponse resp;
  for (int64_t id : OptimalTrialIds(s.problem.metrics, s.trials)) {
    *resp.add_optimal_trials() = s.trial(id);
  }
  return resp;
}

// ---- Durability ------------------------------------------------------------------------
// With a store that defers syncs (kPowerLoss), a mutation is applied to the cache and queued
// under the study's lock, and the call waits for its fsync after the lock is released, so
// concurrent writers of one study share fsyncs (group commit). Reads wait for the last queued
// write, so no answer ever shows a write that is not yet durable. With kProcessCrash, Commit
// writes synchronously and Call/CallAsync add nothing.

namespace {
// The ticket of the write queued by the current call on this thread (0 = none).
thread_local uint64_t pending_ticket = 0;
}  // namespace

absl::Status StudyCore::Commit(WriteBatch batch) {
  if (!store_->defers_sync()) return store_->Write(std::move(batch));
  absl::StatusOr<uint64_t> ticket = store_->Enqueue(std::move(batch));
  if (!ticket.ok()) return ticket.status();
  pending_ticket = *ticket;
  return absl::OkStatus();
}

void StudyCore::WhenDurable(std::function<void(absl::Status)> then) {
  if (!store_->defers_sync()) {
    then(absl::OkStatus());
    return;
  }
  uint64_t ticket = std::exchange(pending_ticket, 0);
  if (ticket == 0) ticket = store_->last_ticket();
  store_->OnDurable(ticket, std::move(then));
}

TrialCounts StudyCore::Counts() {
  std::vector<std::shared_ptr<StudyState>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : studies_) all.push_back(s);
  }
  TrialCounts c;
  for (const auto& s : all) {
    absl::MutexLock lock(&s->mu);
    if (s->deleted) continue;
    ++c.studies_by_state[s->study.state()];
    for (const v1::Trial& t : s->trials) {
      if (!StudyState::IsTombstone(t)) ++c.by_state[t.state()];
    }
  }
  c.store_writes = static_cast<int64_t>(store_->last_ticket());
  c.store_commits = store_->commits();
  c.store_checkpoint_failures = store_->checkpoint_failures();
  return c;
}

}  // namespace evoscale::service
