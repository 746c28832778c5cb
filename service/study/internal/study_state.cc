#include "service/study/internal/study_state.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "search/designers.h"
#include "service/study/study_converter.h"
#include "service/study/study_limits.h"

namespace evoscale::service::internal {

absl::StatusOr<std::shared_ptr<StudyState>> StudyState::Replay(StoredStudy stored) {
  auto state = std::make_shared<StudyState>(stored.id, stored.study.display_name());
  absl::MutexLock lock(&state->mu);
  absl::StatusOr<search::ProblemStatement> problem = ToProblem(stored.study.spec());
  if (!problem.ok()) {
    return absl::DataLossError(absl::StrCat("stored study ", stored.study.name(),
                                            " is invalid: ", problem.status().message()));
  }
  state->Configure(stored.study.spec(), *std::move(problem));
  state->study = std::move(stored.study);
  std::vector<std::pair<int64_t, int64_t>> order;  // (seq, id) of the completed trials
  for (StoredTrial& t : stored.trials) {
    if (t.trial.id() != static_cast<int64_t>(state->trials.size()) + 1) {
      return absl::DataLossError(absl::StrCat("study ", state->study.name(), ": trial ",
                                              t.trial.id(), " out of sequence"));
    }
    state->last_completion_seq = std::max(state->last_completion_seq, t.completion_seq);
    // A trial promoted back to ACTIVE keeps its old number in the store until it ends again.
    const bool ended = !IsTombstone(t.trial) && !IsRunning(t.trial.state());
    if (t.completion_seq != 0 && ended) order.emplace_back(t.completion_seq, t.trial.id());
    state->Apply(t.trial, 0);
    state->completion_seq.back() = ended ? t.completion_seq : 0;
  }
  std::sort(order.begin(), order.end());
  for (const auto& [seq, id] : order) state->completed_order.push_back(id);
  if (absl::Status st = state->RebuildDesigner(); !st.ok()) return st;
  return state;
}

void StudyState::Configure(const v1::StudySpec& spec, search::ProblemStatement converted) {
  problem = std::move(converted);
  early_stopping = ToEarlyStopping(spec);
  heartbeat_timeout =
      absl::Seconds(spec.heartbeat_timeout_seconds() > 0 ? spec.heartbeat_timeout_seconds()
                                                         : kDefaultHeartbeatTimeoutSeconds);
  max_retries = spec.max_trial_retries() > 0 ? spec.max_trial_retries() : kDefaultMaxTrialRetries;
  budget_core_seconds = spec.budget_core_seconds();
  promotes = PromotesStoppedTrials(spec);
}

v1::Study StudyState::StudyWithCounts() {
  v1::Study s = study;
  s.set_trial_count(live_trials());
  s.set_completed_trial_count(static_cast<int64_t>(completed_order.size()));
  s.set_spent_core_seconds(spent_core_seconds);
  if (budget_core_seconds > 0) {
    s.set_remaining_core_seconds(std::max(0.0, budget_core_seconds - spent_core_seconds));
  }
  if (!study.spec().trial_template().command().empty()) *s.mutable_cost_model() = CostReport();
  return s;
}

void StudyState::Apply(const v1::Trial& t, int64_t seq) {
  ++version;
  const int64_t id = t.id();
  const double cost = IsTombstone(t) ? 0.0 : TrialCoreSeconds(t);
  double was = 0;  // what the cached trial had cost
  if (id == static_cast<int64_t>(trials.size()) + 1) {
    trials.push_back(t);
    completion_seq.push_back(0);
    if (IsTombstone(t)) ++deleted_trials;
  } else {
    if (IsTombstone(t) && !IsTombstone(trials[id - 1])) ++deleted_trials;
    was = trials[id - 1].core_seconds();
    trials[id - 1] = t;
  }
  spent_core_seconds += cost - was;
  trials[id - 1].set_core_seconds(cost);
  if (t.state() == v1::Trial::SUCCEEDED && cost > 0) {
    cheapest_full_run = cheapest_full_run > 0 ? std::min(cheapest_full_run, cost) : cost;
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
  if (IsRunning(t.state()) && completion_seq[id - 1] != 0) {
    // An ended trial promoted back (COST_AWARE): it leaves the designer's history until it
    // ends again, with a new number.
    completion_seq[id - 1] = 0;
    std::erase(completed_order, id);
    RebuildDesigner().IgnoreError();  // the spec was valid when the study was made
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
    last_completion_seq = std::max(last_completion_seq, seq);
  }
}

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

std::optional<double> MetadataNumber(const v1::Trial& t, const char* key) {
  const auto it = t.metadata().find(key);
  double value = 0;
  if (it == t.metadata().end() || !absl::SimpleAtod(it->second, &value)) return std::nullopt;
  return value;
}

}  // namespace

const v1::CostModelReport& StudyState::CostReport() {
  if (cost_report_version == version) return cost_report;
  std::vector<double> errors, slack;
  int predicted = 0, under = 0;
  for (const v1::Trial& t : trials) {
    if (IsTombstone(t) || IsRunning(t.state())) continue;
    const std::optional<double> c = MetadataNumber(t, kCostModelCoefficient);
    const std::optional<double> g = MetadataNumber(t, kCostModelExponent);
    const std::optional<double> memory = MetadataNumber(t, kCostModelMemory);
    bool counted = false;
    if (c && g && t.measurements_size() > 0) {
      // To the step it reached, against its own clock there: cores x elapsed.
      const v1::Measurement& last = *t.measurements().rbegin();
      const double actual = HeldCores(t) * last.elapsed_seconds();
      if (actual > 0 && last.step() > 0) {
        const double guess = *c * std::pow(static_cast<double>(last.step()), *g);
        errors.push_back(std::abs(guess - actual) / actual);
        counted = true;
      }
    }
    if (memory && t.usage().peak_memory_bytes() > 0) {
      const auto peak = static_cast<double>(t.usage().peak_memory_bytes());
      under += peak > *memory ? 1 : 0;
      // A stopped run's peak is only a lower bound of a whole run's: no slack from it.
      if (!t.usage().stopped()) slack.push_back((*memory - peak) / peak);
      counted = true;
    }
    predicted += counted ? 1 : 0;
  }
  cost_report.set_predicted_trials(predicted);
  cost_report.set_core_seconds_median_abs_pct_error(Median(std::move(errors)));
  cost_report.set_memory_under_predictions(under);
  cost_report.set_memory_median_slack(Median(std::move(slack)));
  cost_report_version = version;
  return cost_report;
}

bool StudyState::PolicyStops(const v1::Trial& t) {
  if (early_stopping.policy == search::EarlyStoppingPolicy::kNone) return false;
  std::vector<search::Trial> others;
  others.reserve(trials.size());
  for (const v1::Trial& o : trials) {
    if (o.id() != t.id() && o.measurements_size() > 0) others.push_back(ToSearchTrial(o));
  }
  const search::BudgetView budget{.budget_core_seconds = budget_core_seconds,
                                  .spent_core_seconds = spent_core_seconds};
  return search::ShouldStop(early_stopping, PrimaryMetric(problem), ToSearchTrial(t), others,
                            budget);
}

void StudyState::SyncDesigner() {
  std::vector<search::Trial> completed;
  for (; fed_to_designer < completed_order.size(); ++fed_to_designer) {
    completed.push_back(ToSearchTrial(trial(completed_order[fed_to_designer])));
  }
  std::vector<search::Trial> pending;
  for (int64_t id : active) pending.push_back(ToSearchTrial(trial(id)));
  for (int64_t id : requested) pending.push_back(ToSearchTrial(trial(id)));
  designer->Update(completed, pending);
}

absl::Status StudyState::RebuildDesigner() {
  absl::StatusOr<std::unique_ptr<search::Designer>> d = search::CreateDesigner(problem);
  if (!d.ok()) return d.status();
  designer = *std::move(d);
  fed_to_designer = 0;
  return absl::OkStatus();
}

}  // namespace evoscale::service::internal
