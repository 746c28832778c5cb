// The scheduler's decisions with an injected clock and a runner factory of the test's own
// (FakeRunner, below: trials that are objects, not processes, and end when the test says), over
// a real StudyCore on a SQLite file. Nothing here starts a process or sleeps: each test calls
// RunOnce itself and waits on conditions with a deadline.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/common/clock.h"
#include "service/scheduler/runner_factory.h"
#include "service/scheduler/scheduler.h"
#include "service/store/store.h"
#include "service/study/study_core.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

namespace ta = ::evoscale::trainer_adapter;
using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kGi = int64_t{1} << 30;
const absl::Duration kDeadline = absl::Seconds(30);

// A trial that runs until the test ends it (or the scheduler stops it).
class FakeTrial : public ta::RunningTrial {
 public:
  FakeTrial(ta::TrialLaunch launch, ta::TrialObserver* observer)
      : launch_(std::move(launch)), observer_(observer) {}

  int pid() const override { return -1; }
  void Stop(absl::Duration) override {
    absl::MutexLock lock(&mu_);
    stop_asked_ = true;
  }
  const ta::TrialOutcome& Wait() override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &FakeTrial::Over));
    if (!ended_) {
      outcome_.kind = ta::TrialOutcome::Kind::kStopped;
      outcome_.reason = "stopped";
      ended_ = true;
    }
    return outcome_;
  }

  const ta::TrialLaunch& launch() const { return launch_; }
  // Whether the scheduler asked it to stop, waiting for that until the deadline (the stop
  // reaches the trial from the thread that drives it).
  bool AwaitStopAsked() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&stop_asked_), kDeadline);
  }
  // What the trial prints: a progress event (on the test's thread, as a runner's reader would).
  void Progress(int64_t step, double loss, double elapsed_s = -1) {
    ta::TrialEvent e;
    e.kind = ta::TrialEvent::Kind::kProgress;
    e.step = step;
    e.elapsed_s = elapsed_s;
    e.metrics = {{"loss", loss}};
    observer_->OnEvent(e);
  }
  void Succeed(double loss) {
    ta::TrialOutcome outcome;
    outcome.kind = ta::TrialOutcome::Kind::kSucceeded;
    outcome.exit_code = 0;
    ta::TrialEvent final;
    final.kind = ta::TrialEvent::Kind::kFinal;
    final.metrics = {{"loss", loss}};
    outcome.final = final;
    outcome.peak_memory_bytes = 100 << 20;
    outcome.wall_time = absl::Seconds(10);
    End(std::move(outcome));
  }
  void OutOfMemory() {
    ta::TrialOutcome outcome;
    outcome.kind = ta::TrialOutcome::Kind::kOutOfMemory;
    outcome.reason = "OOM-killed in its cgroup";
    outcome.oom_kills = 1;
    End(std::move(outcome));
  }

 private:
  bool Over() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_ || stop_asked_; }
  void End(ta::TrialOutcome outcome) {
    absl::MutexLock lock(&mu_);
    outcome_ = std::move(outcome);
    ended_ = true;
  }

  const ta::TrialLaunch launch_;
  ta::TrialObserver* const observer_;
  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_asked_ ABSL_GUARDED_BY(mu_) = false;
  ta::TrialOutcome outcome_ ABSL_GUARDED_BY(mu_);
};

// The RunningTrial the scheduler owns is a handle onto a FakeTrial the runner keeps, so that
// the test can still reach a trial after the scheduler let go of it.
class FakeHandle : public ta::RunningTrial {
 public:
  explicit FakeHandle(FakeTrial* trial) : trial_(trial) {}
  int pid() const override { return -1; }
  void Stop(absl::Duration grace) override { trial_->Stop(grace); }
  const ta::TrialOutcome& Wait() override { return trial_->Wait(); }

 private:
  FakeTrial* const trial_;
};

// A fake (no process can be told what to print and when to end here without timing): every
// Start is recorded, in order.
class FakeRunner : public ta::TrialRunner, public RunnerFactory {
 public:
  absl::StatusOr<std::unique_ptr<ta::RunningTrial>> Start(const ta::TrialLaunch& launch,
                                                          ta::TrialObserver* observer) override {
    absl::MutexLock lock(&mu_);
    trials_.push_back(std::make_unique<FakeTrial>(launch, observer));
    return std::make_unique<FakeHandle>(trials_.back().get());
  }
  std::string enforcement() const override { return "cgroup v1 (fake: no process)"; }
  absl::StatusOr<ta::TrialRunner*> RunnerFor(const v1::Study&) override { return this; }

  // The n-th trial started (0-based) of the study named `study`, once it has started
  // (trials started in one pass start in any order); nullptr after the deadline.
  FakeTrial* Started(const std::string& study, size_t n = 0) {
    absl::MutexLock lock(&mu_);
    FakeTrial* found = nullptr;
    auto started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      size_t seen = 0;
      for (const auto& t : trials_) {
        if (t->launch().trial_name.starts_with(study + "/") && seen++ == n) found = t.get();
      }
      return found != nullptr;
    };
    mu_.AwaitWithTimeout(absl::Condition(&started), kDeadline);
    return found;
  }
  size_t started() {
    absl::MutexLock lock(&mu_);
    return trials_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::unique_ptr<FakeTrial>> trials_ ABSL_GUARDED_BY(mu_);
};

// Forwards to the test's FakeRunner, which outlives the scheduler.
class Borrowed : public RunnerFactory {
 public:
  explicit Borrowed(FakeRunner* runner) : runner_(runner) {}
  absl::StatusOr<ta::TrialRunner*> RunnerFor(const v1::Study& s) override {
    return runner_->RunnerFor(s);
  }
  std::string enforcement() const override { return runner_->enforcement(); }

 private:
  FakeRunner* const runner_;
};

class SchedulerDecisionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open(dir_.File("s.db"), Durability::kProcessCrash);
    core_ = *StudyCore::Create(store_.get(), &clock_);
  }

  void StartScheduler(int64_t memory_gi) {
    SchedulerOptions options;
    options.max_running_trials = 4;
    options.cpu_capacity = 8;
    options.memory_capacity_bytes = memory_gi * kGi;
    options.checkpoint_root = dir_.File("checkpoints");
    options.clock = &clock_;
    options.start_loop = false;
    absl::StatusOr<std::unique_ptr<Scheduler>> made =
        Scheduler::Create(core_.get(), options, std::make_unique<Borrowed>(&runner_));
    ASSERT_TRUE(made.ok()) << made.status();
    scheduler_ = *std::move(made);
  }

  // A managed study of `max_trials` trials, each asking for `memory_gi` GiB and one core.
  std::string CreateStudy(const std::string& name, int64_t memory_gi, int priority,
                          int max_trials, bool resumes = false) {
    v1::CreateStudyRequest req;
    req.mutable_study()->set_display_name(name);
    v1::StudySpec* spec = req.mutable_study()->mutable_spec();
    v1::MetricSpec* metric = spec->add_metrics();
    metric->set_name("loss");
    metric->set_goal(v1::MetricSpec::MINIMIZE);
    v1::ParameterSpec* x = spec->add_parameters();
    x->set_name("x");
    x->mutable_double_spec()->set_min(0);
    x->mutable_double_spec()->set_max(1);
    spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::QUASI_RANDOM);
    spec->set_max_trials(max_trials);
    v1::TrialTemplate* t = spec->mutable_trial_template();
    t->set_command("fake-trainer");
    t->add_args("--x=${x}");
    if (resumes) t->add_args("--checkpoint-dir=${checkpoint_dir}");
    t->set_priority(priority);
    t->set_fixed_resources(true);
    t->mutable_resources()->set_cpu_cores(1);
    t->mutable_resources()->set_memory_bytes(memory_gi * kGi);
    absl::StatusOr<v1::Study> study = core_->Call(req);
    EXPECT_TRUE(study.ok()) << study.status();
    clock_.Advance(absl::Seconds(1));  // studies are ordered by their creation time
    return study.ok() ? study->name() : "";
  }

  v1::Trial Trial(const std::string& name) {
    v1::GetTrialRequest req;
    req.set_name(name);
    return *core_->Call(req);
  }

  // Waits until no more than `n` trials run (their threads have reported and let go).
  void AwaitRunning(int n) {
    ASSERT_TRUE(AwaitCondition([&] { return scheduler_->running() <= n; }, kDeadline))
        << scheduler_->running() << " trials still run";
  }

  ScopedTempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<Store> store_;
  std::unique_ptr<StudyCore> core_;
  FakeRunner runner_;  // outlives the scheduler: its trials are what the scheduler waits on
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerDecisionsTest, BestFitStartsTheLargestRequestsThatFitAndTheRestWaits) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*memory_gi=*/4));
  const std::string small_study = CreateStudy("small", 1, 0, 1);
  const std::string large_study = CreateStudy("large", 3, 0, 1);
  const std::string medium_study = CreateStudy("medium", 2, 0, 1);
  scheduler_->RunOnce();
  // 3 GiB first (least left over), then 1 GiB beside it; 2 GiB waits.
  FakeTrial* large = runner_.Started(large_study);
  FakeTrial* small = runner_.Started(small_study);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(large->launch().limits.memory_bytes, 3 * kGi);
  EXPECT_EQ(small->launch().limits.memory_bytes, 1 * kGi);
  EXPECT_EQ(scheduler_->waiting_studies(), 1);
  EXPECT_EQ(scheduler_->requested().memory_bytes(), 4 * kGi);

  large->Succeed(0.5);
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(1));
  scheduler_->RunOnce();
  FakeTrial* medium = runner_.Started(medium_study);
  ASSERT_NE(medium, nullptr);
  EXPECT_EQ(medium->launch().limits.memory_bytes, 2 * kGi);
  EXPECT_EQ(scheduler_->waiting_studies(), 0);
  EXPECT_EQ(runner_.started(), 3u);
}

TEST_F(SchedulerDecisionsTest, AHigherPriorityPreemptsALowerOneWhichResumesWithItsHistory) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*memory_gi=*/4));
  const std::string low = CreateStudy("low", 3, 0, 1, /*resumes=*/true);
  scheduler_->RunOnce();
  FakeTrial* first = runner_.Started(low);
  ASSERT_NE(first, nullptr);
  const std::string low_trial = first->launch().trial_name;
  first->Progress(1, 0.9);

  const std::string high_study = CreateStudy("high", 2, 5, 1);
  scheduler_->RunOnce();  // 3 + 2 GiB do not fit in 4: the low trial is asked to stop
  EXPECT_TRUE(first->AwaitStopAsked());
  EXPECT_EQ(scheduler_->preemptions(), 1);
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));
  EXPECT_EQ(Trial(low_trial).state(), v1::Trial::ACTIVE);  // it waits, it did not end

  scheduler_->RunOnce();  // the high trial starts; the low one waits for room
  FakeTrial* high = runner_.Started(high_study);
  ASSERT_NE(high, nullptr);
  EXPECT_EQ(scheduler_->waiting_studies(), 1);
  high->Succeed(0.1);
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));

  scheduler_->RunOnce();
  FakeTrial* resumed = runner_.Started(low, 1);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->launch().trial_name, low_trial);
  EXPECT_EQ(Trial(low_trial).measurements_size(), 1);  // ${checkpoint_dir}: its history goes on
  resumed->Succeed(0.7);
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));
  EXPECT_EQ(Trial(low_trial).state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(scheduler_->preemptions(), 1);
}

TEST_F(SchedulerDecisionsTest, AnOomKilledTrialRunsAgainWithTwiceItsMemory) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*memory_gi=*/8));
  const std::string study = CreateStudy("oom", 1, 0, 1);
  scheduler_->RunOnce();
  FakeTrial* first = runner_.Started(study);
  ASSERT_NE(first, nullptr);
  const std::string trial = first->launch().trial_name;
  first->OutOfMemory();
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));
  v1::Trial waiting = Trial(trial);
  EXPECT_EQ(waiting.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(waiting.resources().memory_bytes(), 2 * kGi);
  EXPECT_EQ(waiting.usage().oom_kills(), 1);

  scheduler_->RunOnce();
  FakeTrial* again = runner_.Started(study, 1);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->launch().trial_name, trial);
  EXPECT_EQ(again->launch().limits.memory_bytes, 2 * kGi);
  again->Succeed(0.2);
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));
  EXPECT_EQ(Trial(trial).state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(Trial(trial).usage().oom_kills(), 1);
}

TEST_F(SchedulerDecisionsTest, AnOomKillAtTheWholeCapacityMakesTheTrialInfeasible) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*memory_gi=*/2));
  const std::string study = CreateStudy("too-big", 2, 0, 1);
  scheduler_->RunOnce();
  FakeTrial* first = runner_.Started(study);
  ASSERT_NE(first, nullptr);
  first->OutOfMemory();
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));
  const v1::Trial t = Trial(first->launch().trial_name);
  EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE);
  EXPECT_THAT(t.infeasible_reason(), HasSubstr("needs more than the memory capacity"));
}

TEST_F(SchedulerDecisionsTest, AMeasurementWithoutElapsedTimeTakesItFromTheInjectedClock) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*memory_gi=*/4));
  const std::string study = CreateStudy("clock", 1, 0, 1);
  scheduler_->RunOnce();
  FakeTrial* trial = runner_.Started(study);
  ASSERT_NE(trial, nullptr);
  clock_.Advance(absl::Seconds(42));
  trial->Progress(1, 0.3);
  const v1::Trial t = Trial(trial->launch().trial_name);
  ASSERT_EQ(t.measurements_size(), 1);
  EXPECT_DOUBLE_EQ(t.measurements(0).elapsed_seconds(), 42);
  trial->Succeed(0.3);
  ASSERT_NO_FATAL_FAILURE(AwaitRunning(0));
}

TEST_F(SchedulerDecisionsTest, CreateRejectsBadOptionsNamingThem) {
  SchedulerOptions options;
  options.max_running_trials = -1;
  auto create = [&] {
    return Scheduler::Create(core_.get(), options, std::make_unique<Borrowed>(&runner_)).status();
  };
  EXPECT_THAT(create(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_running_trials")));
  options = {};
  options.poll_every = absl::ZeroDuration();
  EXPECT_THAT(create(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("poll_every")));
}

}  // namespace
}  // namespace evoscale::service
