#include "service/scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "service/study/study_converter.h"

namespace evoscale::service {

namespace ta = ::evoscale::trainer_adapter;

struct Scheduler::Slot {
  std::string client_id;
  std::string trial_name;
  std::vector<int> gpu_ids;
  std::thread driver;
  std::atomic<bool> done{false};
  std::atomic<bool> shutdown{false};  // stopped because evoscaled stops: leave it ACTIVE
  absl::Time last_heartbeat = absl::Now();

  absl::Mutex mu;
  v1::ResourceRequest request ABSL_GUARDED_BY(mu);  // the trial's request in force
  ta::RunningTrial* run ABSL_GUARDED_BY(mu) = nullptr;
  bool stop_wanted ABSL_GUARDED_BY(mu) = false;
  absl::Duration stop_grace ABSL_GUARDED_BY(mu) = absl::InfiniteDuration();

  void RequestStop(absl::Duration grace) {
    absl::MutexLock lock(&mu);
    stop_wanted = true;
    stop_grace = std::min(stop_grace, grace);
    if (run != nullptr) run->Stop(stop_grace);
  }
};

namespace {

// Shortest text that reads back as the same double.
std::string DoubleText(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : absl::StrCat(v);
}

std::map<std::string, std::string> TemplateValues(const v1::Study& study, const v1::Trial& t) {
  std::map<std::string, std::string> values = {
      {"trial", t.name()}, {"trial_id", absl::StrCat(t.id())}, {"study", study.name()}};
  for (const v1::Parameter& p : t.parameters()) {
    switch (p.value_case()) {
      case v1::Parameter::kDoubleValue:
        values[p.name()] = DoubleText(p.double_value());
        break;
      case v1::Parameter::kIntValue:
        values[p.name()] = absl::StrCat(p.int_value());
        break;
      case v1::Parameter::kStringValue:
        values[p.name()] = p.string_value();
        break;
      default:
        break;
    }
  }
  return values;
}

void Log(const std::string& what, const std::string& trial, const std::string& detail) {
  // Structured and quiet: one line per trial that could not be reported. A trial's stderr may
  // hold bytes that are not UTF-8: they become U+FFFD rather than abort the line.
  const nlohmann::ordered_json line = {
      {"event", "scheduler"}, {"what", what}, {"trial", trial}, {"detail", detail}};
  std::fprintf(stderr, "%s\n",
               line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// Turns a trial's events into measurements and early-stopping checks.
class Reporter : public ta::TrialObserver {
 public:
  Reporter(StudyCore* core, std::string trial_name, absl::Duration grace,
           std::function<void(absl::Duration)> stop)
      : core_(core), trial_(std::move(trial_name)), grace_(grace), stop_(std::move(stop)),
        start_(absl::Now()) {}

  void OnEvent(const ta::TrialEvent& e) override {
    if (e.kind != ta::TrialEvent::Kind::kProgress || e.metrics.empty()) return;
    v1::AddTrialMeasurementRequest req;
    req.set_trial_name(trial_);
    v1::Measurement* m = req.mutable_measurement();
    m->set_step(e.step >= 0 ? e.step : next_step_);
    next_step_ = m->step() + 1;
    m->set_elapsed_seconds(e.elapsed_s >= 0 ? e.elapsed_s
                                            : absl::ToDoubleSeconds(absl::Now() - start_));
    for (const auto& [name, value] : e.metrics) (*m->mutable_metrics())[name] = value;
    absl::StatusOr<v1::Trial> added = core_->Call(req);
    if (!added.ok()) {
      if (!warned_) Log("measurement refused", trial_, std::string(added.status().message()));
      warned_ = true;
      return;
    }
    v1::CheckTrialEarlyStoppingStateRequest check;
    check.set_trial_name(trial_);
    absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> r =
        core_->Call(check);
    if (r.ok() && r->should_stop()) stop_(grace_);
  }

 private:
  StudyCore* const core_;
  const std::string trial_;
  const absl::Duration grace_;
  const std::function<void(absl::Duration)> stop_;
  const absl::Time start_;
  int64_t next_step_ = 1;
  bool warned_ = false;
};

// 80% of this machine's memory (MemTotal in /proc/meminfo).
int64_t DefaultMemoryCapacity() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024 / 10 * 8;
    in.ignore(1 << 10, '\n');
  }
  return int64_t{1} << 30;
}

}  // namespace

absl::Status ParseCapacity(absl::string_view text, SchedulerOptions* options) {
  SchedulerOptions parsed = *options;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const size_t eq = item.find('=');
    const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, eq));
    const absl::string_view value =
        eq == absl::string_view::npos ? "" : absl::StripAsciiWhitespace(item.substr(eq + 1));
    auto bad = [&](absl::string_view want) {
      return absl::InvalidArgumentError(
          absl::StrCat("--capacity ", key, ": \"", value, "\" is not ", want));
    };
    if (key == "cpu") {
      double cores = 0;
      if (!absl::SimpleAtod(value, &cores) || !(cores > 0) || !std::isfinite(cores)) {
        return bad("a number of cores > 0");
      }
      parsed.cpu_capacity = cores;
    } else if (key == "gpus") {
      int gpus = 0;
      if (!absl::SimpleAtoi(value, &gpus) || gpus < 0 || gpus > 1024) {
        return bad("a number of GPUs in [0, 1024]");
      }
      parsed.gpus = gpus;
    } else if (key == "memory") {
      static constexpr std::pair<absl::string_view, double> kUnits[] = {
          {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
          {"K", 1e3},     {"M", 1e6},        {"G", 1e9},           {"T", 1e12}};
      absl::string_view number = value;
      double unit = 1;
      for (const auto& [suffix, factor] : kUnits) {
        if (absl::ConsumeSuffix(&number, suffix)) {
          unit = factor;
          break;
        }
      }
      double amount = 0;
      if (!absl::SimpleAtod(number, &amount) || !(amount > 0) || amount * unit > 9e18) {
        return bad("a size > 0 such as 16Gi or 2000000000");
      }
      parsed.memory_capacity_bytes = static_cast<int64_t>(amount * unit);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--capacity: unknown key \"", key, "\" (want cpu=N, memory=SIZE, gpus=N)"));
    }
  }
  *options = parsed;
  return absl::OkStatus();
}

Scheduler::Scheduler(StudyCore* core, SchedulerOptions options)
    : core_(core),
      options_(std::move(options)),
      runner_(ta::NewLocalProcessRunner([&] {
        ta::LocalRunnerOptions o = options_.runner;
        o.die_with_starting_thread = true;  // each Drive thread outlives its trial
        return o;
      }())) {
  gpu_busy_.assign(static_cast<size_t>(std::max(options_.gpus, 0)), false);
  memory_capacity_ = options_.memory_capacity_bytes > 0 ? options_.memory_capacity_bytes
                                                         : DefaultMemoryCapacity();
  cpu_capacity_ = options_.cpu_capacity > 0
                      ? options_.cpu_capacity
                      : std::max(1.0, static_cast<double>(std::thread::hardware_concurrency()));
  // Quiet unless it matters: a word only when trials cannot be put in cgroups.
  if (options_.max_running_trials > 0 && !absl::StartsWith(runner_->enforcement(), "cgroup")) {
    Log("trials not in cgroups", "", runner_->enforcement());
  }
  loop_ = std::thread(&Scheduler::Loop, this);
}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [key, slot] : slots_) {
      slot->shutdown = true;
      slot->RequestStop(std::min(options_.stop_grace, absl::Seconds(2)));
    }
  }
  loop_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [key, slot] : slots_) {
    if (slot->driver.joinable()) slot->driver.join();
  }
}

int Scheduler::running() {
  absl::MutexLock lock(&mu_);
  return RunningLocked();
}

v1::ResourceRequest Scheduler::requested() {
  absl::MutexLock lock(&mu_);
  return RequestedLocked();
}

v1::ResourceRequest Scheduler::capacity() const {
  v1::ResourceRequest c;
  c.set_cpu_cores(cpu_capacity_);
  c.set_memory_bytes(memory_capacity_);
  c.set_gpus(options_.gpus);
  return c;
}

int Scheduler::waiting_studies() {
  absl::MutexLock lock(&mu_);
  return waiting_studies_;
}

v1::ResourceRequest Scheduler::RequestedLocked() {
  v1::ResourceRequest sum;
  for (const auto& [key, slot] : slots_) {
    if (slot->done) continue;
    absl::MutexLock lock(&slot->mu);
    sum.set_cpu_cores(sum.cpu_cores() + slot->request.cpu_cores());
    sum.set_memory_bytes(sum.memory_bytes() + slot->request.memory_bytes());
    sum.set_gpus(sum.gpus() + slot->request.gpus());
  }
  return sum;
}

bool Scheduler::FitsLocked(const v1::ResourceRequest& request) {
  const v1::ResourceRequest used = RequestedLocked();
  // A trial larger than the whole capacity still runs alone, rather than never.
  const bool alone = RunningLocked() == 0;
  return alone || (used.cpu_cores() + request.cpu_cores() <= cpu_capacity_ + 1e-9 &&
                   used.memory_bytes() + request.memory_bytes() <= memory_capacity_);
}

int Scheduler::RunningLocked() {
  int n = 0;
  for (const auto& [key, slot] : slots_) n += slot->done ? 0 : 1;
  return n;
}

std::vector<v1::Study> Scheduler::ManagedStudies() {
  std::vector<v1::Study> managed;
  v1::ListStudiesRequest list;
  list.set_page_size(kMaxPageSize);
  for (;;) {
    absl::StatusOr<v1::ListStudiesResponse> page = core_->Call(list);
    if (!page.ok()) break;
    for (const v1::Study& study : page->studies()) {
      if (!study.spec().trial_template().command().empty()) managed.push_back(study);
    }
    if (page->next_page_token().empty()) break;
    list.set_page_token(page->next_page_token());
  }
  return managed;
}

void Scheduler::FinishStoppingTrials() {
  for (const v1::Study& study : ManagedStudies()) {
    v1::ListTrialsRequest stopping;
    stopping.set_parent(study.name());
    stopping.set_state(v1::Trial::STOPPING);
    stopping.set_page_size(kMaxPageSize);
    for (;;) {
      absl::StatusOr<v1::ListTrialsResponse> trials = core_->Call(stopping);
      if (!trials.ok()) break;
      for (const v1::Trial& trial : trials->trials()) {
        v1::CompleteTrialRequest req;
        req.set_name(trial.name());
        CompleteStopped(std::move(req));
      }
      if (trials->next_page_token().empty()) break;
      stopping.set_page_token(trials->next_page_token());
    }
  }
}

void Scheduler::Loop() {
  FinishStoppingTrials();
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll_every);
      if (stopping_) return;
      // Reap finished slots.
      for (auto it = slots_.begin(); it != slots_.end();) {
        if (!it->second->done) {
          ++it;
          continue;
        }
        it->second->driver.join();
        for (int g : it->second->gpu_ids) gpu_busy_[static_cast<size_t>(g)] = false;
        it = slots_.erase(it);
      }
      // Running trials: a client's StopTrial (or early stopping) and heartbeats.
      const absl::Time now = absl::Now();
      for (auto& [key, slot] : slots_) {
        if (slot->done) continue;
        v1::CheckTrialEarlyStoppingStateRequest check;
        check.set_trial_name(slot->trial_name);
        absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> r =
            core_->Call(check);
        if (r.ok() && r->should_stop()) {
          slot->RequestStop(options_.stop_grace);
          continue;  // no heartbeat: a STOPPING trial is not handed back, a new one would be
        }
        if (now - slot->last_heartbeat >= options_.heartbeat_every) {
          // Asking again with the slot's client id hands back (and refreshes) its trial.
          v1::SuggestTrialsRequest beat;
          beat.set_parent(key.study);
          beat.set_suggestion_count(1);
          beat.set_client_id(slot->client_id);
          core_->Call(beat).IgnoreError();
          slot->last_heartbeat = now;
        }
      }
    }
    if (options_.max_running_trials <= 0) continue;
    // Active managed studies: those with room for another trial get one.
    std::vector<v1::Study> managed = ManagedStudies();
    std::erase_if(managed,
                  [](const v1::Study& s) { return s.state() != v1::Study::ACTIVE; });
    // Highest priority first, then the oldest study; the first study whose next trial does
    // not fit the capacity holds back every study after it (no backfill: a large trial of a
    // high-priority study is never starved by small ones).
    std::stable_sort(managed.begin(), managed.end(), [](const v1::Study& a, const v1::Study& b) {
      const int pa = a.spec().trial_template().priority();
      const int pb = b.spec().trial_template().priority();
      if (pa != pb) return pa > pb;
      return std::make_pair(a.create_time().seconds(), a.create_time().nanos()) <
             std::make_pair(b.create_time().seconds(), b.create_time().nanos());
    });
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    size_t filled = 0;
    while (filled < managed.size() && FillSlots(managed[filled])) ++filled;
    waiting_studies_ = static_cast<int>(managed.size() - filled);
  }
}

bool Scheduler::FillSlots(const v1::Study& study) {
  const v1::TrialTemplate& tt = study.spec().trial_template();
  const int parallel = std::max(1, tt.parallel_trials());
  const int gpus = tt.resources().gpus();
  if (gpus > options_.gpus) return true;  // never fits here (the study's page says why)
  for (int i = 0; i < parallel; ++i) {
    const Key key{study.name(), i};
    if (slots_.contains(key)) continue;
    if (RunningLocked() >= options_.max_running_trials) return false;
    if (!FitsLocked(tt.resources())) return false;
    std::vector<int> gpu_ids;
    for (size_t g = 0; g < gpu_busy_.size() && static_cast<int>(gpu_ids.size()) < gpus; ++g) {
      if (!gpu_busy_[g]) gpu_ids.push_back(static_cast<int>(g));
    }
    if (static_cast<int>(gpu_ids.size()) < gpus) return false;  // wait for GPUs
    auto slot = std::make_shared<Slot>();
    slot->client_id = absl::StrCat("evoscaled/slot-", i);
    v1::SuggestTrialsRequest req;
    req.set_parent(study.name());
    req.set_suggestion_count(1);
    req.set_client_id(slot->client_id);
    absl::StatusOr<v1::SuggestTrialsResponse> got = core_->Call(req);
    if (!got.ok() || got->trials().empty()) return true;  // budget spent, or not ACTIVE
    const v1::Trial& trial = got->trials(0);
    slot->trial_name = trial.name();
    {
      absl::MutexLock slot_lock(&slot->mu);
      slot->request = trial.resources();
    }
    slot->gpu_ids = gpu_ids;
    for (int g : gpu_ids) gpu_busy_[static_cast<size_t>(g)] = true;
    slot->driver = std::thread(&Scheduler::Drive, this, slot, study, trial);
    slots_.emplace(key, std::move(slot));
  }
  return true;
}

void Scheduler::Drive(std::shared_ptr<Slot> slot, v1::Study study, v1::Trial trial) {
  const v1::TrialTemplate& tt = study.spec().trial_template();
  auto infeasible = [&](const std::string& reason) {
    v1::CompleteTrialRequest req;
    req.set_name(trial.name());
    req.set_trial_infeasible(true);
    req.set_infeasible_reason(reason.substr(0, 4096));
    Complete(req);
  };
  std::vector<std::string> args(tt.args().begin(), tt.args().end());
  absl::StatusOr<std::vector<std::string>> expanded =
      ta::ExpandArgs(args, TemplateValues(study, trial));
  if (!expanded.ok()) {
    // A ${name} of a conditional parameter this trial does not have.
    infeasible(absl::StrCat("trial_template.", expanded.status().message()));
    slot->done = true;
    return;
  }
  // An OOM kill runs the trial again with twice the memory, up to the capacity.
  for (;;) {
    ta::TrialLaunch launch;
    launch.trial_name = trial.name();
    launch.argv.push_back(tt.command());
    launch.argv.insert(launch.argv.end(), expanded->begin(), expanded->end());
    launch.env.insert(tt.env().begin(), tt.env().end());
    launch.limits.cpu_cores = trial.resources().cpu_cores();
    launch.limits.memory_bytes = trial.resources().memory_bytes();
    launch.limits.gpus = trial.resources().gpus();
    launch.gpu_ids = slot->gpu_ids;
    Reporter reporter(core_, trial.name(), options_.stop_grace,
                      [slot](absl::Duration grace) { slot->RequestStop(grace); });
    absl::StatusOr<std::unique_ptr<ta::RunningTrial>> run = runner_->Start(launch, &reporter);
    if (!run.ok()) {
      infeasible(absl::StrCat("cannot start: ", run.status().message()));
      break;
    }
    bool stop_wanted;
    {
      absl::MutexLock lock(&slot->mu);
      slot->run = run->get();
      if (slot->stop_wanted) slot->run->Stop(slot->stop_grace);
    }
    ta::TrialOutcome outcome = (*run)->Wait();
    {
      absl::MutexLock lock(&slot->mu);
      slot->run = nullptr;
      stop_wanted = slot->stop_wanted;
    }
    run->reset();
    if (slot->shutdown) break;
    if (outcome.kind == ta::TrialOutcome::Kind::kOutOfMemory && !stop_wanted) {
      const int64_t asked = trial.resources().memory_bytes();
      const int64_t more = std::min(2 * asked, memory_capacity_);
      if (asked > 0 && more > asked) {
        RerunTrialRequest rerun{.name = trial.name(),
                                .resources = trial.resources(),
                                .oom_kills = static_cast<int32_t>(std::max<int64_t>(
                                    1, outcome.oom_kills))};
        rerun.resources.set_memory_bytes(more);
        absl::StatusOr<v1::Trial> again = core_->Call(rerun);
        if (again.ok()) {
          trial = *std::move(again);
          absl::MutexLock lock(&slot->mu);
          slot->request = trial.resources();
          continue;
        }
        Log("rerun refused", trial.name(), std::string(again.status().message()));
      } else if (asked > 0) {
        absl::StrAppend(&outcome.reason, "; it needs more than the memory capacity of ",
                        memory_capacity_, " bytes");
        outcome.oom_kills = std::max<int64_t>(1, outcome.oom_kills);
      }
    }
    Report(study, trial, outcome);
    break;
  }
  slot->done = true;
}

void Scheduler::Report(const v1::Study& study, const v1::Trial& trial,
                       const ta::TrialOutcome& outcome) {
  v1::CompleteTrialRequest req;
  req.set_name(trial.name());
  // What it used, whatever its ending: right-sizing learns from every trial.
  v1::TrialUsage* usage = req.mutable_usage();
  const double wall = absl::ToDoubleSeconds(outcome.wall_time);
  usage->set_peak_memory_bytes(outcome.peak_memory_bytes);
  usage->set_cpu_seconds(outcome.cpu_seconds);
  usage->set_mean_cpu_cores(wall > 0 ? outcome.cpu_seconds / wall : 0);
  usage->set_wall_seconds(wall);
  // Earlier runs of this trial that were OOM-killed count too.
  usage->set_oom_kills(trial.usage().oom_kills() + static_cast<int32_t>(outcome.oom_kills));
  usage->set_enforcement(outcome.enforcement);
  switch (outcome.kind) {
    case ta::TrialOutcome::Kind::kSucceeded: {
      v1::Measurement* m = req.mutable_final_measurement();
      for (const auto& [name, value] : outcome.final->metrics) {
        (*m->mutable_metrics())[name] = value;
      }
      // What the trial used, next to what it scored (not objectives; the designer ignores them).
      (*m->mutable_metrics())["evoscale/peak_rss_bytes"] =
          static_cast<double>(outcome.peak_rss_bytes);
      (*m->mutable_metrics())["evoscale/cpu_seconds"] = outcome.cpu_seconds;
      (*m->mutable_metrics())["evoscale/wall_seconds"] = absl::ToDoubleSeconds(outcome.wall_time);
      m->set_elapsed_seconds(absl::ToDoubleSeconds(outcome.wall_time));
      for (const v1::MetricSpec& metric : study.spec().metrics()) {
        if (!outcome.final->metrics.contains(metric.name())) {
          std::vector<std::string> have;
          for (const auto& [name, value] : outcome.final->metrics) have.push_back(name);
          req.clear_final_measurement();
          req.set_trial_infeasible(true);
          req.set_infeasible_reason(absl::StrCat(
              "the final event has no metric \"", metric.name(), "\" (it has: ",
              have.empty() ? "none" : absl::StrJoin(have, ", "), ")"));
          break;
        }
      }
      break;
    }
    case ta::TrialOutcome::Kind::kStopped:
      // Early stopping or a client's StopTrial: the last measurement is final (Vizier).
      break;
    case ta::TrialOutcome::Kind::kFailed:
    case ta::TrialOutcome::Kind::kOutOfMemory:
      req.set_trial_infeasible(true);
      req.set_infeasible_reason(
          absl::StrCat(ta::TrialOutcomeKindName(outcome.kind), ": ", outcome.reason)
              .substr(0, 4096));
      break;
  }
  if (outcome.kind == ta::TrialOutcome::Kind::kStopped) {
    CompleteStopped(std::move(req));
  } else {
    Complete(req);
  }
}

void Scheduler::CompleteStopped(v1::CompleteTrialRequest req) {
  absl::StatusOr<v1::Trial> done = core_->Call(req);
  if (!done.ok() && done.status().code() == absl::StatusCode::kInvalidArgument) {
    req.set_trial_infeasible(true);
    req.set_infeasible_reason("stopped before its first measurement");
    Complete(req);
  } else if (!done.ok() && done.status().code() != absl::StatusCode::kFailedPrecondition) {
    Log("completion refused", req.name(), std::string(done.status().message()));
  }
}

void Scheduler::Complete(const v1::CompleteTrialRequest& req) {
  absl::StatusOr<v1::Trial> done = core_->Call(req);
  // FAILED_PRECONDITION: a client completed it meanwhile; nothing to do.
  if (!done.ok() && done.status().code() != absl::StatusCode::kFailedPrecondition) {
    Log("completion refused", req.name(), std::string(done.status().message()));
  }
}

}  // namespace evoscale::service
