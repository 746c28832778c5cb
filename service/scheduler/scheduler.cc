#include "service/scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <fstream>
#include <unistd.h>
#include <functional>
#include <map>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/time_util.h"
#include "service/study/study_converter.h"
#include "service/common/log.h"
#include "service/scheduler/placement.h"
#include "service/trial_template/trial_template.h"

namespace evoscale::service {

namespace ta = ::evoscale::trainer_adapter;

struct Scheduler::Slot {
  int priority = 0;
  absl::Time started;
  std::string study;
  std::string client_id;
  std::string trial_name;
  std::vector<int> gpu_ids;
  // The cost model's prediction for the trial, noted on it when it starts (its first one stays).
  std::map<std::string, std::string> prediction;
  std::thread driver;
  std::atomic<bool> done{false};
  std::atomic<bool> shutdown{false};  // stopped because evoscaled stops: leave it ACTIVE
  // Stopped to make room for a trial of higher priority: its trial waits again (ACTIVE, with
  // its measurements and checkpoint) instead of completing.
  std::atomic<bool> preempted{false};
  absl::Time last_heartbeat;  // read and written by the scheduling pass only

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

struct Scheduler::Pending {
  v1::Study study;
  v1::Trial trial;
  absl::Time last_heartbeat;
};

namespace {

// Structured and quiet: one line per trial that could not be reported, and per decision an
// operator would ask about (a preemption, an OOM rerun).
void Log(const std::string& what, const std::string& trial, const std::string& detail) {
  LogEvent("scheduler", {{"what", what}, {"trial", trial}, {"detail", detail}});
}

// Turns a trial's events into measurements and early-stopping checks.
class Reporter : public ta::TrialObserver {
 public:
  // `first_step`: the step after the trial's last recorded measurement (1 for a fresh run);
  // `first_elapsed`: that measurement's elapsed_seconds (0 for a fresh run), from which a
  // resumed run's clock goes on, so that the trial's elapsed time never goes backwards.
  Reporter(StudyCore* core, Clock* clock, std::string study, std::string trial_name,
           int64_t first_step, double first_elapsed, absl::Duration grace,
           std::function<void(absl::Duration)> stop,
           const std::function<void(const v1::TelemetrySample&)>* usage_sink)
      : core_(core), clock_(clock), study_(std::move(study)), trial_(std::move(trial_name)),
        grace_(grace), stop_(std::move(stop)), usage_sink_(usage_sink), start_(clock->Now()),
        next_step_(first_step), first_elapsed_(first_elapsed) {}

  // One sample a second into the telemetry store.
  void OnUsage(const ta::UsageSample& u) override {
    if (usage_sink_ == nullptr || !*usage_sink_) return;
    if (u.time - last_usage_ < absl::Seconds(1)) return;
    last_usage_ = u.time;
    v1::TelemetrySample sample;
    sample.set_workload(study_);
    sample.set_instance(trial_);
    *sample.mutable_time() =
        google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(u.time));
    sample.set_cpu_cores(u.cpu_cores);
    sample.set_memory_bytes(static_cast<double>(u.memory_bytes));
    (*usage_sink_)(sample);
  }

  void OnEvent(const ta::TrialEvent& e) override {
    if (e.kind != ta::TrialEvent::Kind::kProgress || e.metrics.empty()) return;
    v1::AddTrialMeasurementRequest req;
    req.set_trial_name(trial_);
    v1::Measurement* m = req.mutable_measurement();
    m->set_step(e.step >= 0 ? e.step : next_step_);
    // A run resumed from a checkpoint older than its last measurement repeats a few steps:
    // the history keeps the first report of each step and stays in order.
    if (m->step() < next_step_) return;
    next_step_ = m->step() + 1;
    m->set_elapsed_seconds(first_elapsed_ +
                           (e.elapsed_s >= 0 ? e.elapsed_s
                                             : absl::ToDoubleSeconds(clock_->Now() - start_)));
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
  Clock* const clock_;
  const std::string study_;
  const std::string trial_;
  const absl::Duration grace_;
  const std::function<void(absl::Duration)> stop_;
  const std::function<void(const v1::TelemetrySample&)>* const usage_sink_;
  const absl::Time start_;
  absl::Time last_usage_ = absl::InfinitePast();
  int64_t next_step_;
  const double first_elapsed_;
  bool warned_ = false;
};

// Whether a run that ended so may be promoted and resume from its checkpoint (which must then
// stay): stopped early in a study that promotes. A client's StopTrial is kept too; the
// promotion itself asks whether the policy stopped it.
bool MayBePromoted(const v1::Study& study, const ta::TrialOutcome& outcome) {
  return outcome.kind == ta::TrialOutcome::Kind::kStopped && PromotesStoppedTrials(study.spec());
}

// The elapsed seconds of a trial's latest measurement (0 with none).
double LatestElapsed(const v1::Trial& trial) {
  double latest = 0;
  for (const v1::Measurement& m : trial.measurements()) latest = std::max(latest, m.elapsed_seconds());
  return latest;
}

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

// The client id of slot `i` of a study: asking with it hands back the slot's unfinished trial.
std::string SlotClientId(int i) { return absl::StrCat("evoscaled/slot-", i); }

absl::Time CreatedAt(const v1::Study& s) {
  return absl::FromUnixSeconds(s.create_time().seconds()) +
         absl::Nanoseconds(s.create_time().nanos());
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

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(
    StudyCore* core, SchedulerOptions options, std::unique_ptr<RunnerFactory> runners) {
  const struct {
    const char* name;
    bool bad;
  } checks[] = {{"max_running_trials < 0", options.max_running_trials < 0},
                {"gpus < 0", options.gpus < 0},
                {"cpu_capacity < 0", !(options.cpu_capacity >= 0)},
                {"memory_capacity_bytes < 0", options.memory_capacity_bytes < 0},
                {"poll_every <= 0", options.poll_every <= absl::ZeroDuration()}};
  for (const auto& [what, bad] : checks) {
    if (bad) return absl::InvalidArgumentError(absl::StrCat("scheduler: ", what));
  }
  if (options.clock == nullptr) options.clock = Clock::Real();
  std::string root = !options.checkpoint_root.empty()
                         ? options.checkpoint_root
                         : (std::filesystem::temp_directory_path() /
                            absl::StrCat("evoscale-checkpoints-", getpid()))
                               .string();
  options.checkpoint_root = root;
  if (runners == nullptr) {
    runners = NewRunnerFactory(options.runner, options.slurm_conf, root + "/slurm");
  }
  const bool start_loop = options.start_loop;
  std::unique_ptr<Scheduler> s(new Scheduler(core, std::move(options), std::move(runners)));
  // Quiet unless it matters: a word only when trials cannot be put in cgroups.
  if (s->options_.max_running_trials > 0 &&
      !absl::StartsWith(s->runners_->enforcement(), "cgroup")) {
    Log("trials not in cgroups", "", s->runners_->enforcement());
  }
  if (start_loop) s->loop_ = std::thread(&Scheduler::Loop, s.get());
  return s;
}

Scheduler::Scheduler(StudyCore* core, SchedulerOptions options,
                     std::unique_ptr<RunnerFactory> runners)
    : core_(core),
      options_(std::move(options)),
      clock_(options_.clock),
      runners_(std::move(runners)),
      memory_capacity_(options_.memory_capacity_bytes > 0 ? options_.memory_capacity_bytes
                                                          : DefaultMemoryCapacity()),
      cpu_capacity_(options_.cpu_capacity > 0
                        ? options_.cpu_capacity
                        : std::max(1.0, static_cast<double>(std::thread::hardware_concurrency()))),
      checkpoint_root_(options_.checkpoint_root),
      sizer_(options_.learn_after_trials, memory_capacity_) {
  gpu_busy_.assign(static_cast<size_t>(options_.gpus), false);
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
  if (loop_.joinable()) loop_.join();
  // Joined without mu_: a trial's thread takes it on its way out.
  std::vector<std::thread> drivers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, slot] : slots_) {
      if (slot->driver.joinable()) drivers.push_back(std::move(slot->driver));
    }
  }
  for (std::thread& driver : drivers) driver.join();
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

int64_t Scheduler::preemptions() {
  absl::MutexLock lock(&mu_);
  return preemptions_;
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

std::vector<v1::Trial> Scheduler::TrialsIn(const std::string& study, v1::Trial::State state) {
  std::vector<v1::Trial> trials;
  v1::ListTrialsRequest list;
  list.set_parent(study);
  list.set_state(state);
  list.set_page_size(kMaxPageSize);
  for (;;) {
    absl::StatusOr<v1::ListTrialsResponse> page = core_->Call(list);
    if (!page.ok()) break;
    trials.insert(trials.end(), page->trials().begin(), page->trials().end());
    if (page->next_page_token().empty()) break;
    list.set_page_token(page->next_page_token());
  }
  return trials;
}

void Scheduler::FinishStoppingTrials() {
  for (const v1::Study& study : ManagedStudies()) {
    for (const v1::Trial& trial : TrialsIn(study.name(), v1::Trial::STOPPING)) {
      v1::CompleteTrialRequest req;
      req.set_name(trial.name());
      CompleteStopped(std::move(req));
    }
  }
}

void Scheduler::Loop() {
  for (bool first = true;; first = false) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || wake_; };
      // The first pass runs at once (it finishes what a previous run left STOPPING).
      if (!first) mu_.AwaitWithTimeout(absl::Condition(&woken), options_.poll_every);
      if (stopping_) return;
      wake_ = false;
    }
    RunOnce();
  }
}

void Scheduler::RunOnce() {
  absl::MutexLock pass(&pass_mu_);
  if (!finished_stopping_) {
    FinishStoppingTrials();
    finished_stopping_ = true;
  }
  CheckRunning(ReapSlots());
  if (options_.max_running_trials <= 0) return;
  const std::vector<v1::Study> managed = SchedulableStudies();
  std::vector<Ask> asks;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    asks = FreeSlots(managed);
  }
  // With no lock held: the core may write and wait for fsync; a fit reads the study's trials.
  std::vector<std::pair<Ask, std::optional<v1::Trial>>> got;
  for (Ask& ask : asks) {
    v1::SuggestTrialsRequest req;
    req.set_parent(ask.key.study);
    req.set_suggestion_count(1);
    req.set_client_id(SlotClientId(ask.key.slot));
    absl::StatusOr<v1::SuggestTrialsResponse> trials = core_->Call(req);
    std::optional<v1::Trial> trial;
    // None: the budget is spent, or the study is no longer ACTIVE.
    if (trials.ok() && !trials->trials().empty()) trial = trials->trials(0);
    got.emplace_back(std::move(ask), std::move(trial));
  }
  for (const v1::Study& study : managed) {
    if (sizer_.NeedsFit(study)) {
      std::vector<v1::Trial> ended = TrialsIn(study.name(), v1::Trial::SUCCEEDED);
      std::vector<v1::Trial> stopped = TrialsIn(study.name(), v1::Trial::STOPPED);
      ended.insert(ended.end(), stopped.begin(), stopped.end());
      sizer_.Fit(study, std::move(ended));
    }
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  Admit(got);
}

std::vector<std::shared_ptr<Scheduler::Slot>> Scheduler::ReapSlots() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Slot>> running;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (!it->second->done) {
      running.push_back(it->second);
      ++it;
      continue;
    }
    it->second->driver.join();  // `done` is the thread's last act
    for (int g : it->second->gpu_ids) gpu_busy_[static_cast<size_t>(g)] = false;
    it = slots_.erase(it);
  }
  return running;
}

void Scheduler::CheckRunning(const std::vector<std::shared_ptr<Slot>>& running) {
  const absl::Time now = clock_->Now();
  for (const std::shared_ptr<Slot>& slot : running) {
    // A client's StopTrial, or early stopping.
    v1::CheckTrialEarlyStoppingStateRequest check;
    check.set_trial_name(slot->trial_name);
    absl::StatusOr<v1::CheckTrialEarlyStoppingStateResponse> r = core_->Call(check);
    if (r.ok() && r->should_stop()) {
      slot->RequestStop(options_.stop_grace);
      continue;  // no heartbeat: a STOPPING trial is not handed back, a new one would be
    }
    if (now - slot->last_heartbeat >= options_.heartbeat_every) {
      // Asking again with the slot's client id hands back (and refreshes) its trial.
      v1::SuggestTrialsRequest beat;
      beat.set_parent(slot->study);
      beat.set_suggestion_count(1);
      beat.set_client_id(slot->client_id);
      core_->Call(beat).IgnoreError();
      slot->last_heartbeat = now;
    }
  }
}

std::vector<v1::Study> Scheduler::SchedulableStudies() {
  // ACTIVE studies, and COMPLETED ones (budget spent) with trials still to finish; a paused
  // (INACTIVE) study starts nothing.
  std::vector<v1::Study> managed = ManagedStudies();
  std::erase_if(managed, [this](const v1::Study& s) {
    return !(s.state() == v1::Study::ACTIVE ||
             (s.state() == v1::Study::COMPLETED && s.trial_count() > s.completed_trial_count())) ||
           s.spec().trial_template().resources().gpus() > options_.gpus;  // never fits
  });
  // Highest priority first, then the oldest study.
  std::stable_sort(managed.begin(), managed.end(), [](const v1::Study& a, const v1::Study& b) {
    const int pa = a.spec().trial_template().priority();
    const int pb = b.spec().trial_template().priority();
    if (pa != pb) return pa > pb;
    return CreatedAt(a) < CreatedAt(b);
  });
  return managed;
}

std::vector<Scheduler::Ask> Scheduler::FreeSlots(const std::vector<v1::Study>& managed) {
  const absl::Time now = clock_->Now();
  std::set<std::string> active;
  std::vector<Ask> asks;
  // A waiting trial for each free slot: asking with the slot's client id hands back the trial
  // it had (preempted, OOM-killed, or interrupted by a restart) before a new one. A waiting
  // trial is asked for again (which refreshes its heartbeat) every heartbeat_every.
  for (const v1::Study& study : managed) {
    active.insert(study.name());
    for (int i = 0; i < std::max(1, study.spec().trial_template().parallel_trials()); ++i) {
      const Key key{study.name(), i};
      if (slots_.contains(key)) continue;
      auto it = pending_.find(key);
      if (it != pending_.end() && now - it->second.last_heartbeat < options_.heartbeat_every) {
        it->second.study = study;
        continue;
      }
      asks.push_back({key, study});
    }
  }
  std::erase_if(pending_, [&](const auto& p) { return !active.contains(p.first.study); });
  return asks;
}

void Scheduler::Admit(const std::vector<std::pair<Ask, std::optional<v1::Trial>>>& got) {
  const absl::Time now = clock_->Now();
  for (const auto& [ask, trial] : got) {
    if (trial.has_value()) {
      pending_[ask.key] = Pending{ask.study, *trial, now};
    } else {
      pending_.erase(ask.key);  // another slot may still hold a trial to hand back
    }
  }
  // The snapshot Place decides on: handles are indexes into `keys` and `placed`.
  std::vector<Key> keys;
  std::vector<WaitingTrial> waiting;
  for (const auto& [key, p] : pending_) {
    const v1::ResourceRequest r = sizer_.RequestFor(p.study, p.trial);
    waiting.push_back({.id = static_cast<int>(keys.size()),
                       .priority = p.study.spec().trial_template().priority(),
                       .study_created = CreatedAt(p.study),
                       .study = key.study,
                       .trial_id = p.trial.id(),
                       .request = {r.cpu_cores(), r.memory_bytes(), r.gpus()}});
    keys.push_back(key);
  }
  std::vector<std::shared_ptr<Slot>> slots;
  std::vector<PlacedTrial> running;
  for (const auto& [key, slot] : slots_) {
    if (slot->done) continue;
    absl::MutexLock slot_lock(&slot->mu);
    running.push_back({.id = static_cast<int>(slots.size()),
                       .priority = slot->priority,
                       .started = slot->started,
                       .request = {slot->request.cpu_cores(), slot->request.memory_bytes(),
                                   slot->request.gpus()},
                       .preempting = slot->preempted});
    slots.push_back(slot);
  }
  const Capacity capacity{
      .cpu_cores = cpu_capacity_,
      .memory_bytes = memory_capacity_,
      .free_gpus = static_cast<int>(std::count(gpu_busy_.begin(), gpu_busy_.end(), false)),
      .max_running = options_.max_running_trials};
  const Placement placement = Place(waiting, running, capacity);
  for (int id : placement.start) {
    const WaitingTrial& w = waiting[static_cast<size_t>(id)];
    auto it = pending_.find(keys[static_cast<size_t>(id)]);
    Pending p = std::move(it->second);
    pending_.erase(it);
    v1::ResourceRequest request;
    request.set_cpu_cores(w.request.cpu_cores);
    request.set_memory_bytes(w.request.memory_bytes);
    request.set_gpus(w.request.gpus);
    StartTrial(keys[static_cast<size_t>(id)], std::move(p), request);
  }
  for (int id : placement.preempt) {
    Slot& slot = *slots[static_cast<size_t>(id)];
    const Key& want = keys[static_cast<size_t>(placement.waiting.front())];
    slot.preempted = true;
    slot.RequestStop(options_.stop_grace);
    ++preemptions_;
    Log("preempted", slot.trial_name,
        absl::StrCat("for ", want.study, " (priority ",
                     waiting[static_cast<size_t>(placement.waiting.front())].priority, " over ",
                     slot.priority, ")"));
  }
  std::set<std::string> studies_waiting;
  for (int id : placement.waiting) studies_waiting.insert(keys[static_cast<size_t>(id)].study);
  waiting_studies_ = static_cast<int>(studies_waiting.size());
}

std::string Scheduler::CheckpointDir(const v1::Trial& trial) const {
  // "studies/S/trials/T" -> ROOT/S/T
  std::vector<std::string> parts = absl::StrSplit(trial.name(), '/');
  return parts.size() == 4 ? absl::StrCat(checkpoint_root_, "/", parts[1], "/", parts[3])
                           : absl::StrCat(checkpoint_root_, "/", trial.id());
}

void Scheduler::StartTrial(const Key& key, Pending pending, const v1::ResourceRequest& request) {
  const v1::TrialTemplate& tt = pending.study.spec().trial_template();
  const bool resumes = ResumesFromCheckpoint(tt);  // see trial_template.h
  auto slot = std::make_shared<Slot>();
  slot->priority = tt.priority();
  slot->started = clock_->Now();
  slot->last_heartbeat = slot->started;
  slot->study = key.study;
  slot->client_id = SlotClientId(key.slot);
  slot->trial_name = pending.trial.name();
  slot->prediction = sizer_.PredictionFor(pending.study, pending.trial, request);
  {
    absl::MutexLock slot_lock(&slot->mu);
    slot->request = request;
  }
  for (size_t g = 0; g < gpu_busy_.size() && static_cast<int>(slot->gpu_ids.size()) <
                                                 request.gpus(); ++g) {
    if (!gpu_busy_[g]) {
      gpu_busy_[g] = true;
      slot->gpu_ids.push_back(static_cast<int>(g));
    }
  }
  slot->driver = std::thread(&Scheduler::Drive, this, slot, std::move(pending.study),
                             std::move(pending.trial), request, resumes);
  slots_.emplace(key, std::move(slot));
}

namespace {

// The trial's process: the template's command and args (${name}s expanded) with its limits.
absl::StatusOr<ta::TrialLaunch> LaunchFor(const v1::Study& study, const v1::Trial& trial,
                                          const std::string& checkpoint_dir,
                                          const std::vector<int>& gpu_ids) {
  const v1::TrialTemplate& tt = study.spec().trial_template();
  std::vector<std::string> args(tt.args().begin(), tt.args().end());
  absl::StatusOr<std::vector<std::string>> expanded =
      ExpandArgs(args, TemplateValues(study, trial, checkpoint_dir));
  if (!expanded.ok()) {
    // A ${name} of a conditional parameter this trial does not have.
    return absl::InvalidArgumentError(absl::StrCat("trial_template.", expanded.status().message()));
  }
  ta::TrialLaunch launch;
  launch.trial_name = trial.name();
  launch.argv.push_back(tt.command());
  launch.argv.insert(launch.argv.end(), expanded->begin(), expanded->end());
  launch.env.insert(tt.env().begin(), tt.env().end());
  launch.limits.cpu_cores = trial.resources().cpu_cores();
  launch.limits.memory_bytes = trial.resources().memory_bytes();
  launch.limits.gpus = trial.resources().gpus();
  launch.gpu_ids = gpu_ids;
  launch.processes = std::max(1, tt.processes());
  return launch;
}

}  // namespace

void Scheduler::Drive(std::shared_ptr<Slot> slot, v1::Study study, v1::Trial waiting,
                      v1::ResourceRequest request, bool resumes) {
  // However it ends, the slot is free and the loop looks at once (not at its next poll).
  // `done` comes last: the pass joins a done slot's thread while holding mu_.
  absl::Cleanup released = [&] {
    {
      absl::MutexLock lock(&mu_);
      wake_ = true;
    }
    slot->done = true;
  };
  // The request it runs with; refused when a client completed or stopped it meanwhile.
  absl::StatusOr<v1::Trial> started = core_->Call(RerunTrialRequest{
      .name = waiting.name(), .resources = request, .oom_kills = 0,
      .keep_measurements = resumes, .metadata = slot->prediction});
  if (!started.ok()) return;
  const v1::Trial& trial = *started;
  const std::string checkpoint_dir = CheckpointDir(trial);
  std::error_code ec;
  auto finish = [&] { std::filesystem::remove_all(checkpoint_dir, ec); };
  auto infeasible = [&](const std::string& reason) {
    v1::CompleteTrialRequest req;
    req.set_name(trial.name());
    req.set_trial_infeasible(true);
    req.set_infeasible_reason(reason.substr(0, 4096));
    Complete(req);
    finish();
  };
  absl::StatusOr<ta::TrialLaunch> launch = LaunchFor(study, trial, checkpoint_dir, slot->gpu_ids);
  if (!launch.ok()) return infeasible(std::string(launch.status().message()));
  if (!std::filesystem::create_directories(checkpoint_dir, ec) && ec) {
    return infeasible(absl::StrCat("cannot make its checkpoint_dir ", checkpoint_dir, ": ",
                                   ec.message()));
  }
  const int64_t first_step =
      trial.measurements_size() > 0
          ? trial.measurements(trial.measurements_size() - 1).step() + 1
          : 1;
  Reporter reporter(core_, clock_, study.name(), trial.name(), first_step, LatestElapsed(trial),
                    options_.stop_grace,
                    [slot](absl::Duration grace) { slot->RequestStop(grace); },
                    &options_.usage_sink);
  absl::StatusOr<ta::TrialRunner*> runner = runners_->RunnerFor(study);
  absl::StatusOr<std::unique_ptr<ta::RunningTrial>> run =
      runner.ok() ? (*runner)->Start(*launch, &reporter) : runner.status();
  if (!run.ok()) {
    // Every trial of the study will fail the same way (a command not on PATH): say so in
    // evoscaled's log too, not only in each trial's reason.
    Log("cannot start", trial.name(), std::string(run.status().message()));
    return infeasible(absl::StrCat("cannot start: ", run.status().message()));
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
  // Stopped because evoscaled stops, or to make room: the trial stays ACTIVE and its slot's
  // client id gets it back (with its measurements and checkpoint) when it runs again. A run
  // that ended on its own just before the signal is reported as it ended.
  const bool ended_anyway = outcome.final.has_value() && outcome.exit_code == 0;
  if (slot->shutdown || (slot->preempted && !ended_anyway)) return;
  if (slot->preempted) outcome.kind = ta::TrialOutcome::Kind::kSucceeded;
  if (outcome.kind == ta::TrialOutcome::Kind::kOutOfMemory && !stop_wanted &&
      RerunAfterOom(study, trial, &outcome)) {
    return finish();
  }
  Report(study, trial, outcome);
  if (!MayBePromoted(study, outcome)) finish();
}

bool Scheduler::RerunAfterOom(const v1::Study& study, const v1::Trial& trial,
                              ta::TrialOutcome* outcome) {
  const int64_t asked = trial.resources().memory_bytes();
  const int64_t more = std::min(2 * asked, memory_capacity_);
  if (asked > 0 && more > asked) {
    sizer_.AddOutOfMemory(study.name(), trial, asked);
    // From scratch (its measurements and checkpoints go), and admitted again against the
    // capacity in use: the slot's client id gets it back with the larger request.
    RerunTrialRequest rerun{.name = trial.name(),
                            .resources = trial.resources(),
                            .oom_kills = static_cast<int32_t>(
                                std::max<int64_t>(1, outcome->oom_kills))};
    rerun.resources.set_memory_bytes(more);
    absl::StatusOr<v1::Trial> again = core_->Call(rerun);
    if (again.ok()) {
      Log("out of memory", trial.name(),
          absl::StrCat("runs again with ", more, " bytes (was ", asked, ")"));
      return true;
    }
    Log("rerun refused", trial.name(), std::string(again.status().message()));
  } else if (asked > 0) {
    absl::StrAppend(&outcome->reason, "; it needs more than the memory capacity of ",
                    memory_capacity_, " bytes");
    outcome->oom_kills = std::max<int64_t>(1, outcome->oom_kills);
  }
  return false;
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
  usage->set_stopped(outcome.kind == ta::TrialOutcome::Kind::kStopped);
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
