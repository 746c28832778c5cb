// Managed studies: the real evoscaled server (in process, port 0, a SQLite file) runs each
// trial as a real child process (/bin/sh scripts) and reports it through the study API.
#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "tests/e2e/http_get.h"
#include "tests/service/test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::service::testing::AwaitCondition;
using ::evoscale::testing::HttpGet;
using ::evoscale::service::testing::GrpcOk;
using ::evoscale::service::testing::GrpcStatusIs;
using ::evoscale::service::testing::ScopedTempDir;
using ::evoscale::service::testing::StatusIs;
using ::evoscale::service::testing::StudyClient;
using ::grpc::StatusCode;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// loss = (x - 0.3)^2, printed with every digit.
constexpr char kLoss[] = "$(awk -v x=\"$1\" 'BEGIN{printf \"%.17g\", (x-0.3)^2}')";

v1::StudySpec ManagedSpec(int max_trials, const std::string& script, int parallel) {
  v1::StudySpec spec;
  v1::MetricSpec* metric = spec.add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  v1::ParameterSpec* x = spec.add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_min(0);
  x->mutable_double_spec()->set_max(1);
  spec.mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::QUASI_RANDOM);
  spec.set_max_trials(max_trials);
  v1::TrialTemplate* t = spec.mutable_trial_template();
  t->set_command("/bin/sh");
  // sh -c SCRIPT NAME ARG1 ARG2: $1 is x, $2 the trial's name.
  for (const char* a : {"-c", script.c_str(), "trial", "${x}", "${trial}"}) t->add_args(a);
  t->set_parallel_trials(parallel);
  return spec;
}

// What the trainer's own lines (tee'd to a file) say of a run stopped and resumed: the first
// run reported progress up to step `last1` and was stopped at step `stop` (checkpointed there);
// the second run's first report is at `first2`; the final line counts `final_steps`. -1: none.
std::vector<std::string> ReadLines(const std::string& path);  // below

struct TrainerRuns {
  int64_t last1 = -1, stop = -1, first2 = -1, final_steps = -1;
};

TrainerRuns ReadTrainerRuns(const std::string& path) {
  auto number_after = [](const std::string& line, const std::string& key) -> int64_t {
    const size_t at = line.find(key);
    if (at == std::string::npos) return -1;
    int64_t v = -1;
    const std::string digits = line.substr(at + key.size(), 20);
    return absl::SimpleAtoi(digits.substr(0, digits.find_first_not_of("0123456789")), &v) ? v
                                                                                          : -1;
  };
  TrainerRuns runs;
  for (const std::string& line : ReadLines(path)) {
    if (absl::StrContains(line, "\"event\":\"progress\"")) {
      const int64_t step = number_after(line, "\"step\":");
      if (runs.stop < 0) runs.last1 = step;
      if (runs.stop >= 0 && runs.first2 < 0) runs.first2 = step;
    } else if (absl::StrContains(line, "stopped at step ") && runs.stop < 0) {
      runs.stop = number_after(line, "stopped at step ");
    } else if (absl::StrContains(line, "\"event\":\"final\"")) {
      runs.final_steps = number_after(line, "\"steps\":");
    }
  }
  return runs;
}

// A managed study of the real trainer whose output is tee'd to `out` (tee ignores the SIGTERM
// of a stop; the trainer sets its own handler) and that checkpoints into ${checkpoint_dir} when
// stopped and resumes from it. Its script first waits for `go` to exist.
v1::StudySpec TrainerSpec(const std::string& out, const std::string& go,
                          const std::vector<std::string>& trainer_args) {
  v1::StudySpec spec = ManagedSpec(1, "", 1);
  v1::TrialTemplate* tt = spec.mutable_trial_template();
  tt->set_command("/bin/sh");
  tt->clear_args();
  tt->add_args("-c");
  tt->add_args(absl::StrCat("while [ ! -e '", go, "' ]; do sleep 0.02; done; trap '' TERM; \"$0\" \"$@\" | tee -a '", out, "'"));
  tt->add_args(absl::StrCat(EVOSCALE_BIN_DIR, "/evoscale-trainer"));
  for (const std::string& a : trainer_args) tt->add_args(a);
  for (const char* a : {"--checkpoint-dir", "${checkpoint_dir}", "--resume", "--checkpoint-every", "100000"}) {
    tt->add_args(a);
  }
  spec.clear_metrics();
  spec.add_metrics()->set_name("auc");
  spec.mutable_metrics(0)->set_goal(v1::MetricSpec::MAXIMIZE);
  tt->mutable_resources()->set_memory_bytes(150 << 20);
  tt->set_fixed_resources(true);
  return spec;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start()); }

  void Start() {
    ServerOptions options;
    options.db_path = dir_.File("evoscale.db");
    options.grpc_address = "127.0.0.1:0";
    options.http_address = "127.0.0.1:0";
    options.scheduler.max_running_trials = 4;
    options.scheduler.poll_every = absl::Milliseconds(50);
    options.scheduler.stop_grace = absl::Seconds(5);
    options.scheduler.runner.sample_every = absl::Milliseconds(50);
    // An OOM-killed trial runs again with twice its memory, up to this.
    options.scheduler.memory_capacity_bytes = capacity_;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<StudyClient>(absl::StrCat("127.0.0.1:", server_->grpc_port()));
  }

  // Creates a managed study of one trial running `script`, waits for the trial's first
  // measurement, asks it to stop, and returns what StopTrial answered.
  v1::Trial StartThenStop(const std::string& script) {
    const std::string study = client_->MustCreateStudy(ManagedSpec(1, script, 1)).name();
    const std::string trial = study + "/trials/1";
    AwaitStudy(study, [&](const v1::Study& s) {
      return s.trial_count() == 1 && Trial(trial).measurements_size() == 1;
    });
    v1::StopTrialRequest stop;
    stop.set_name(trial);
    v1::Trial stopped;
    EXPECT_THAT(client_->Call(&StudyClient::Stub::StopTrial, stop, &stopped), GrpcOk());
    return stopped;
  }

  // Waits (up to 60 s) until `done(study)`.
  v1::Study AwaitStudy(const std::string& name, const std::function<bool(const v1::Study&)>& done) {
    v1::Study s;
    if (!AwaitCondition([&] {
          s = client_->MustGetStudy(name);
          return done(s);
        })) {
      ADD_FAILURE() << "timed out waiting on " << name << ": " << s.ShortDebugString();
    }
    return s;
  }

  std::vector<v1::Trial> Trials(const std::string& study) {
    v1::ListTrialsRequest req;
    req.set_parent(study);
    req.set_page_size(1000);
    v1::ListTrialsResponse resp;
    EXPECT_THAT(client_->Call(&StudyClient::Stub::ListTrials, req, &resp), GrpcOk());
    return {resp.trials().begin(), resp.trials().end()};
  }

  v1::Trial Trial(const std::string& name) { return client_->MustGetTrial(name); }

  ScopedTempDir dir_;
  int64_t capacity_ = 128 << 20;
  std::unique_ptr<Server> server_;
  std::unique_ptr<StudyClient> client_;
};

TEST_F(SchedulerTest, AManagedStudyRunsItsTrialsToCompletion) {
  const std::string script = absl::StrCat(
      "echo 'loading'\n"
      "echo \"{\\\"event\\\":\\\"progress\\\",\\\"step\\\":1,\\\"metrics\\\":{\\\"loss\\\":", kLoss,
      "}}\"\n"
      "echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":", kLoss, "}}\"\n");
  const std::string study = client_->MustCreateStudy(ManagedSpec(6, script, 3)).name();
  // The scheduler's next ask after the budget is spent marks the study COMPLETED.
  AwaitStudy(study, [](const v1::Study& s) {
    return s.completed_trial_count() == 6 && s.state() == v1::Study::COMPLETED;
  });
  const std::vector<v1::Trial> trials = Trials(study);
  ASSERT_EQ(trials.size(), 6u);
  for (const v1::Trial& t : trials) {
    ASSERT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
    const double x = t.parameters(0).double_value();
    EXPECT_DOUBLE_EQ(t.final_measurement().metrics().at("loss"), (x - 0.3) * (x - 0.3));
    ASSERT_EQ(t.measurements_size(), 1);  // the progress line
    EXPECT_EQ(t.measurements(0).step(), 1);
    EXPECT_GT(t.final_measurement().metrics().at("evoscale/wall_seconds"), 0);
    EXPECT_TRUE(t.final_measurement().metrics().contains("evoscale/peak_rss_bytes"));
    EXPECT_THAT(t.client_id(), StartsWith("evoscaled/slot-"));
    // What it used is on the trial, with how its limits were enforced.
    // (A script this short may end before any page is charged or sampled: its peak can be 0.)
    EXPECT_GT(t.usage().wall_seconds(), 0);
    EXPECT_EQ(t.usage().oom_kills(), 0);
    EXPECT_THAT(t.usage().enforcement(),
                ::testing::AnyOf(StartsWith("cgroup v1"), StartsWith("sampling /proc")));
  }
}

TEST_F(SchedulerTest, EveryWayATrialFailsMakesItInfeasibleWithTheReason) {
  // x in [0, 0.3): fine; [0.3, 0.55): exits 3; [0.55, 0.8): its final event lacks "loss";
  // [0.8, 1]: grows past its 64 MiB memory limit.
  const std::string script = absl::StrCat(
      "case $(awk -v x=\"$1\" 'BEGIN{print "
      "(x<0.3)?\"ok\":(x<0.55)?\"exit\":(x<0.8)?\"auc\":\"oom\"}') in\n"
      "ok) echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":",
      kLoss,
      "}}\";;\n"
      "exit) echo 'disk full' >&2; exit 3;;\n"
      "auc) echo '{\"event\":\"final\",\"metrics\":{\"auc\":0.7}}';;\n"
      "oom) head -c 4000000000 /dev/zero | tail -n 1 > /dev/null;;\n"
      "esac\n");
  v1::StudySpec spec = ManagedSpec(12, script, 4);
  spec.mutable_trial_template()->mutable_resources()->set_memory_bytes(64 << 20);
  const std::string study = client_->MustCreateStudy(spec).name();
  AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 12; });
  int seen[4] = {0, 0, 0, 0};
  for (const v1::Trial& t : Trials(study)) {
    const double x = t.parameters(0).double_value();
    if (x < 0.3) {
      ++seen[0];
      EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
    } else if (x < 0.55) {
      ++seen[1];
      EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE);
      EXPECT_EQ(t.infeasible_reason(), "failed: exit code 3; stderr: disk full");
    } else if (x < 0.8) {
      ++seen[2];
      EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE);
      EXPECT_EQ(t.infeasible_reason(), "the final event has no metric \"loss\" (it has: auc)");
    } else {
      ++seen[3];
      EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE);
      // Killed at 64 MiB, run again with 128 MiB (the capacity), killed again: INFEASIBLE.
      EXPECT_EQ(t.resources().memory_bytes(), 128 << 20);
      EXPECT_GE(t.usage().oom_kills(), 2);
      EXPECT_THAT(t.infeasible_reason(),
                  HasSubstr("; it needs more than the memory capacity of 134217728 bytes"));
      if (absl::StartsWith(t.usage().enforcement(), "cgroup")) {
        // The kernel's limit: no sample needed to see it.
        EXPECT_THAT(t.infeasible_reason(),
                    StartsWith("out_of_memory: OOM-killed in its cgroup: memory limit 134217728 "
                               "bytes"));
      } else {
        EXPECT_THAT(t.infeasible_reason(), HasSubstr("out_of_memory: killed: resident memory"));
        EXPECT_THAT(t.infeasible_reason(), HasSubstr("over the limit of 134217728 bytes"));
      }
    }
    // Usage whatever the ending: failed trials teach the load model too.
    EXPECT_GT(t.usage().wall_seconds(), 0) << t.ShortDebugString();
  }
  for (int n : seen) EXPECT_GE(n, 1);  // the quasi-random points cover each range
}

TEST_F(SchedulerTest, AnOomKilledTrialRunsAgainWithTwiceTheMemoryAndCompletes) {
  // Holds about 90 MiB for half a second (long enough for sampling to see it too): over its
  // 64 MiB request, under the 128 MiB it gets on its second run. The first run's progress
  // line (step 7) must not survive into the second run's history (step 1).
  const std::string script = absl::StrCat(
      "if [ -n \"$EVOSCALE_MEMORY_BYTES\" ] && [ \"$EVOSCALE_MEMORY_BYTES\" -lt 100000000 ]; "
      "then echo '{\"event\":\"progress\",\"step\":7,\"metrics\":{\"loss\":9}}'; fi\n"
      "exec python3 -c \"import time; b = b'x' * (90 << 20); time.sleep(0.5); "
      "print('{\\\"event\\\":\\\"progress\\\",\\\"step\\\":1,\\\"metrics\\\":{\\\"loss\\\":1}}'); "
      "print('{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":1}}')\"\n");
  v1::StudySpec spec = ManagedSpec(1, script, 1);
  spec.mutable_trial_template()->mutable_resources()->set_memory_bytes(64 << 20);
  const std::string study = client_->MustCreateStudy(spec).name();
  AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  const v1::Trial t = Trial(study + "/trials/1");
  EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
  EXPECT_EQ(t.resources().memory_bytes(), 128 << 20);  // the request in force
  EXPECT_EQ(t.usage().oom_kills(), 1);
  ASSERT_EQ(t.measurements_size(), 1) << t.ShortDebugString();
  EXPECT_EQ(t.measurements(0).step(), 1);
}

TEST_F(SchedulerTest, StopTrialStopsTheProcessAndItsLastMeasurementIsFinal) {
  const std::string script = absl::StrCat(
      "echo \"{\\\"event\\\":\\\"progress\\\",\\\"step\\\":4,\\\"metrics\\\":{\\\"loss\\\":", kLoss,
      "}}\"\n"
      "exec sleep 300\n");
  const v1::Trial stopped = StartThenStop(script);
  const std::string trial = stopped.name();
  const std::string study = trial.substr(0, trial.find("/trials/"));
  AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  const v1::Trial t = Trial(trial);
  EXPECT_EQ(t.state(), v1::Trial::STOPPED);
  EXPECT_EQ(t.final_measurement().step(), 4);
  const double x = t.parameters(0).double_value();
  EXPECT_DOUBLE_EQ(t.final_measurement().metrics().at("loss"), (x - 0.3) * (x - 0.3));
  EXPECT_GT(t.usage().wall_seconds(), 0);  // a stopped trial reports its usage too
  EXPECT_FALSE(t.usage().enforcement().empty());
}

TEST_F(SchedulerTest, TrialsInterruptedByARestartRunAgainAfterIt) {
  // First run of a trial: report step 620, leave a mark and hang. Second run (after the
  // restart, from scratch: no ${checkpoint_dir}): report step 430 and finish. The trial's
  // history is the second run's alone, not 620 then 430.
  const std::string marks = dir_.path();
  const std::string script = absl::StrCat(
      "mark=\"", marks, "/$(echo \"$2\" | tr / _)\"\n"
      "if [ -e \"$mark\" ]; then\n"
      "  echo '{\"event\":\"progress\",\"step\":430,\"metrics\":{\"loss\":2}}'\n"
      "  echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":", kLoss, "}}\"\n"
      "else\n"
      "  echo '{\"event\":\"progress\",\"step\":620,\"metrics\":{\"loss\":3}}'\n"
      "  touch \"$mark\"; exec sleep 300\n"
      "fi\n");
  const std::string study = client_->MustCreateStudy(ManagedSpec(2, script, 2)).name();
  auto marked = [&](int id) {
    const std::string trial = absl::StrCat(study, "/trials/", id);
    return std::ifstream(absl::StrCat(marks, "/", absl::StrReplaceAll(trial, {{"/", "_"}}))).good();
  };
  AwaitStudy(study, [&](const v1::Study&) {
    return marked(1) && marked(2) && Trial(study + "/trials/1").measurements_size() == 1 &&
           Trial(study + "/trials/2").measurements_size() == 1;
  });
  server_.reset();  // stops both processes; the trials stay ACTIVE
  ASSERT_NO_FATAL_FAILURE(Start());
  const v1::Study done =
      AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 2; });
  EXPECT_EQ(done.trial_count(), 2);  // the same two trials, not new ones
  for (const v1::Trial& t : Trials(study)) {
    EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
    ASSERT_EQ(t.measurements_size(), 1) << t.ShortDebugString();
    EXPECT_EQ(t.measurements(0).step(), 430);
  }
}

// Each trial appends "start NAME" and "end NAME" to `log`, 0.3 s apart, then finishes.
v1::StudySpec LoggingSpec(const std::string& log, int max_trials, int parallel,
                          int64_t memory_bytes, int priority) {
  const std::string script = absl::StrCat(
      "echo \"start $2\" >> '", log, "'; sleep 0.3; echo \"end $2\" >> '", log, "'\n",
      "echo '{\"event\":\"final\",\"metrics\":{\"loss\":1}}'\n");
  v1::StudySpec spec = ManagedSpec(max_trials, script, parallel);
  spec.mutable_trial_template()->mutable_resources()->set_memory_bytes(memory_bytes);
  spec.mutable_trial_template()->set_priority(priority);
  spec.mutable_trial_template()->set_fixed_resources(true);  // no right-sizing: as asked
  return spec;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(SchedulerTest, TrialsArePackedByTheirRequestsNotCounted) {
  // 128 MiB of capacity, 100 MiB asked by each trial: one at a time, although four may run
  // by count and each study allows two.
  const std::string log = dir_.File("packing.log");
  const std::string a = client_->MustCreateStudy(LoggingSpec(log, 2, 2, 100 << 20, 0)).name();
  const std::string b = client_->MustCreateStudy(LoggingSpec(log, 2, 2, 100 << 20, 0)).name();
  // While they run, /metrics shows the capacity, what is held of it, and the study waiting.
  const std::string http = absl::StrCat("127.0.0.1:", server_->http_port());
  std::string metrics;
  EXPECT_TRUE(AwaitCondition([&] {
    metrics = HttpGet(http, "/metrics").body;
    return absl::StrContains(metrics, "evoscale_capacity_requested_memory_bytes 104857600") &&
           absl::StrContains(metrics, "evoscale_studies_waiting 1");
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr("evoscale_capacity_memory_bytes 134217728"));
  for (const std::string& study : {a, b}) {
    AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 2; });
  }
  const std::vector<std::string> lines = ReadLines(log);
  ASSERT_EQ(lines.size(), 8u);
  int running = 0, most = 0;
  for (const std::string& line : lines) {
    running += absl::StartsWith(line, "start ") ? 1 : -1;
    most = std::max(most, running);
  }
  EXPECT_EQ(most, 1) << absl::StrJoin(lines, "\n");
  // All done: nothing held (the slot is released just after its trial completes).
  EXPECT_TRUE(AwaitCondition(
      [&] { return server_->scheduler()->requested().memory_bytes() == 0; }));
}

TEST_F(SchedulerTest, HigherPriorityStartsFirstWhenCapacityFrees) {
  const std::string log = dir_.File("priority.log");
  // The blocker holds the capacity while the two others are created: low first, then high.
  const std::string blocker =
      client_->MustCreateStudy(LoggingSpec(log, 1, 1, 100 << 20, 10)).name();
  AwaitStudy(blocker, [](const v1::Study& s) { return s.trial_count() == 1; });
  const std::string low = client_->MustCreateStudy(LoggingSpec(log, 1, 1, 100 << 20, 0)).name();
  const std::string high = client_->MustCreateStudy(LoggingSpec(log, 1, 1, 100 << 20, 5)).name();
  for (const std::string& study : {blocker, low, high}) {
    AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  }
  std::vector<std::string> starts;
  for (const std::string& line : ReadLines(log)) {
    if (absl::StartsWith(line, "start ")) starts.push_back(line.substr(6));
  }
  EXPECT_THAT(starts, ::testing::ElementsAre(blocker + "/trials/1", high + "/trials/1",
                                             low + "/trials/1"));
}

TEST_F(SchedulerTest, RequestsShrinkToWhatTrialsOfTheStudyUseAndNoneIsKilled) {
  // Each trial holds 20 + mb MiB for a moment (python3), so peak memory follows the parameter.
  // The template asks 512 MiB of every trial: after the first trials the requests follow the
  // model fitted to their peaks instead, without an OOM kill.
  const std::string script =
      "exec python3 -c \"import sys, time; b = bytearray((20 + int(sys.argv[1])) << 20); "
      "b[::4096] = b'x' * len(b[::4096]); time.sleep(0.2); "
      "print('{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":1}}')\" \"$1\"\n";
  v1::StudySpec spec = ManagedSpec(10, script, 1);
  spec.mutable_parameters(0)->set_name("mb");
  spec.mutable_parameters(0)->clear_double_spec();
  spec.mutable_parameters(0)->mutable_integer_spec()->set_min(10);
  spec.mutable_parameters(0)->mutable_integer_spec()->set_max(200);
  *spec.mutable_trial_template()->mutable_args(3) = "${mb}";
  spec.mutable_trial_template()->mutable_resources()->set_memory_bytes(int64_t{512} << 20);
  spec.mutable_trial_template()->mutable_resources()->set_cpu_cores(1);
  server_.reset();
  capacity_ = int64_t{1} << 30;
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string study = client_->MustCreateStudy(spec).name();
  AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 10; });
  std::vector<v1::Trial> trials = Trials(study);
  std::sort(trials.begin(), trials.end(),
            [](const v1::Trial& a, const v1::Trial& b) { return a.id() < b.id(); });
  ASSERT_EQ(trials.size(), 10u);
  EXPECT_EQ(trials[0].resources().memory_bytes(), int64_t{512} << 20);  // nothing learned yet
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
    EXPECT_EQ(t.usage().oom_kills(), 0) << t.ShortDebugString();
    EXPECT_FALSE(t.usage().stopped());
    if (i < 3) {  // three trials to learn from first
      EXPECT_EQ(t.resources().memory_bytes(), int64_t{512} << 20);
      continue;
    }
    // Learned: at least the peak, and not much more.
    const double peak = static_cast<double>(t.usage().peak_memory_bytes());
    const double asked = static_cast<double>(t.resources().memory_bytes());
    EXPECT_GE(asked, peak) << t.ShortDebugString();
    EXPECT_LE(asked, 1.5 * peak) << t.ShortDebugString();
    EXPECT_LE(t.resources().cpu_cores(), 1.0);  // never more cores than the template
  }
}

// COST_AWARE promotion with the real trainer: a trial the policy stopped at its first rung is
// promoted once later arrivals there are worse, resumes from the checkpoint it wrote when it
// was stopped, and pays only for the steps after it.
TEST_F(SchedulerTest, APromotedTrialResumesFromItsCheckpointAndPaysOnlyTheStepsAfterIt) {
  server_.reset();
  capacity_ = 200 << 20;
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string out = dir_.File("trainer.jsonl"), go = dir_.File("go");
  const int64_t total_steps = 2 * 60000 * 9 / 10 / 128;  // 90% trains, the rest is held out
  v1::StudySpec spec = TrainerSpec(
      out, go, {"--synthetic", "60000", "--epochs", "2", "--batch-size", "128", "--embedding-dim",
                "4", "--hidden", "8", "--threads", "1", "--progress-every", "50"});
  spec.mutable_early_stopping()->set_policy(v1::EarlyStoppingSpec::COST_AWARE);
  spec.mutable_early_stopping()->set_max_step(total_steps);
  spec.mutable_early_stopping()->set_min_resource(50);  // rungs 50, 150, 450
  spec.set_max_trials(1 + 8 + 20);  // the real one, then only results from elsewhere
  const std::string study = client_->MustCreateStudy(spec).name();
  const std::string real = study + "/trials/1";
  AwaitStudy(study, [](const v1::Study& s) { return s.trial_count() == 1; });
  // Eight full runs far ahead of the real trainer (AUC 0.8+ at step 50), ranked alike at every
  // step; and twenty runs of another client, ACTIVE, at step 40 so far (below the first rung):
  // 29 trials, max_trials, so the scheduler starts no other.
  auto curve = [](v1::Trial& t, double at50, int64_t first, int64_t last) {
    for (int64_t step = first; step <= last; step += 10) {
      v1::Measurement* m = t.add_measurements();
      m->set_step(step);
      m->set_elapsed_seconds(0.001 * static_cast<double>(step));
      (*m->mutable_metrics())["auc"] = at50 + 0.1 - 5.0 / static_cast<double>(step);
    }
  };
  auto add = [&](v1::Trial::State state, double at50, int64_t last) {
    v1::Trial t;
    v1::Parameter* x = t.add_parameters();
    x->set_name("x");
    x->set_double_value(at50 / 2);
    t.set_state(state);
    if (state == v1::Trial::ACTIVE) t.set_client_id("elsewhere");
    curve(t, at50, 10, last);
    if (state != v1::Trial::ACTIVE) *t.mutable_final_measurement() = *t.measurements().rbegin();
    return client_->MustCreateTrial(study, t).name();
  };
  for (int i = 0; i < 8; ++i) add(v1::Trial::SUCCEEDED, 0.80 + 0.01 * i, total_steps);
  std::vector<std::string> behind;
  for (int i = 0; i < 20; ++i) behind.push_back(add(v1::Trial::ACTIVE, 0.20 + 0.001 * i, 40));
  std::ofstream(go) << "go\n";
  const v1::Trial stopped = [&] {
    v1::Trial t;
    EXPECT_TRUE(AwaitCondition([&] {
      t = Trial(real);
      return t.state() == v1::Trial::STOPPED;
    })) << t.ShortDebugString();
    return t;
  }();
  EXPECT_TRUE(stopped.policy_stopped());
  EXPECT_EQ(stopped.promotions(), 0);
  // The twenty behind it reach steps 50 to 450: now it is in the top third at its rung.
  for (size_t i = 0; i < behind.size(); ++i) {
    v1::Trial more;
    curve(more, 0.20 + 0.001 * static_cast<double>(i), 50, 450);
    for (const v1::Measurement& m : more.measurements()) {
      ASSERT_THAT(client_->AddMeasurement(behind[i], m), GrpcOk());
    }
  }
  ASSERT_TRUE(AwaitCondition([&] { return Trial(real).promotions() == 1; }));
  for (const std::string& name : behind) client_->MustComplete(name, v1::Measurement());
  const v1::Study done = AwaitStudy(study, [&](const v1::Study&) {
    const v1::Trial t = Trial(real);
    return t.state() == v1::Trial::SUCCEEDED || (t.promotions() > 0 && t.state() == v1::Trial::STOPPED);
  });
  const v1::Trial t = Trial(real);
  ASSERT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
  EXPECT_EQ(t.promotions(), 1);
  EXPECT_EQ(done.trial_count(), 29);
  const TrainerRuns runs = ReadTrainerRuns(out);
  ASSERT_GT(runs.last1, 0) << "no progress before the stop";
  ASSERT_GE(runs.stop, runs.last1) << "no \"stopped at step\" line";
  ASSERT_GT(runs.first2, runs.last1) << "the promoted run did not resume after the first run";
  EXPECT_NEAR(runs.final_steps, total_steps, 1);
  // It resumed after first2 - 50 (a report every 50 steps): at most stop - (first2 - 50) steps
  // were trained twice.
  const int64_t twice = std::max<int64_t>(0, runs.stop - (runs.first2 - 50));
  const double processed = static_cast<double>(runs.final_steps + twice) / runs.final_steps;
  EXPECT_LT(processed, 1.1) << "stop " << runs.stop << ", resumed before " << runs.first2;
  std::cerr << "stopped at step " << runs.stop << ", promoted, resumed by step " << runs.first2
            << " of " << runs.final_steps << ": at most " << processed
            << "x the examples of one run\n";
}

TEST_F(SchedulerTest, ALowerPriorityTrialIsPreemptedAndResumesFromItsCheckpoint) {
  // Room for one trial. The low-priority trial is the real trainer, checkpointing into
  // ${checkpoint_dir} when stopped; a high-priority study arrives while it runs.
  server_.reset();
  capacity_ = 200 << 20;
  ASSERT_NO_FATAL_FAILURE(Start());
  // The trainer's own output goes to a file too (tee ignores the SIGTERM of a stop; the trainer
  // sets its own handler), so that the test sees both runs as they were, not the trial's
  // history (which keeps one report per step).
  const std::string out = dir_.File("trainer.jsonl");
  v1::StudySpec low_spec = ManagedSpec(1, "", 1);
  v1::TrialTemplate* tt = low_spec.mutable_trial_template();
  tt->set_command("/bin/sh");
  tt->clear_args();
  tt->add_args("-c");
  tt->add_args(absl::StrCat("trap '' TERM; \"$0\" \"$@\" | tee -a '", out, "'"));
  tt->add_args(absl::StrCat(EVOSCALE_BIN_DIR, "/evoscale-trainer"));
  for (const char* a : {"--synthetic", "60000", "--epochs", "8", "--batch-size", "128",
                        "--embedding-dim", "4", "--hidden", "8", "--threads", "1",
                        "--progress-every", "50", "--checkpoint-dir", "${checkpoint_dir}",
                        "--resume", "--checkpoint-every", "100000"}) {
    tt->add_args(a);
  }
  low_spec.clear_metrics();
  low_spec.add_metrics()->set_name("auc");
  low_spec.mutable_metrics(0)->set_goal(v1::MetricSpec::MAXIMIZE);
  tt->mutable_resources()->set_memory_bytes(150 << 20);
  tt->set_fixed_resources(true);
  const std::string low = client_->MustCreateStudy(low_spec).name();
  const std::string low_trial = low + "/trials/1";
  AwaitStudy(low, [&](const v1::Study& s) {
    return s.trial_count() == 1 && Trial(low_trial).measurements_size() >= 3;
  });
  const std::string log = dir_.File("high.log");
  const std::string high = client_->MustCreateStudy(LoggingSpec(log, 1, 1, 150 << 20, 5)).name();
  AwaitStudy(high, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  EXPECT_EQ(server_->scheduler()->preemptions(), 1);
  const v1::Study done =
      AwaitStudy(low, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  const v1::Trial t = Trial(low_trial);
  ASSERT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
  EXPECT_EQ(t.retries(), 0);  // preempted is not failed
  EXPECT_EQ(done.trial_count(), 1);
  // Its steps continue across the preemption. From the trainer's own lines: the first run
  // reported progress up to step `last1`, was stopped at step `stop` (checkpointed there), and
  // the second run's first report is at `first2`, after `last1`: it resumed from a checkpoint at
  // or after `last1`, not from scratch. It resumed after first2 - 50 (a report every 50 steps),
  // so at most stop - (first2 - 50) steps were trained twice.
  std::vector<int64_t> steps;
  for (const v1::Measurement& m : t.measurements()) steps.push_back(m.step());
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()) &&
              std::adjacent_find(steps.begin(), steps.end()) == steps.end())
      << absl::StrJoin(steps, ",");
  const TrainerRuns runs = ReadTrainerRuns(out);
  const int64_t last1 = runs.last1, stop = runs.stop, first2 = runs.first2,
                final_steps = runs.final_steps;
  const int64_t total_steps = 8 * 60000 * 9 / 10 / 128;  // 90% trains, the rest is held out
  ASSERT_GT(last1, 0) << "no progress before the stop";
  ASSERT_GE(stop, last1) << "no \"stopped at step\" line";
  ASSERT_GT(first2, last1) << "the second run did not resume after the first run's progress";
  EXPECT_NEAR(final_steps, total_steps, 1);
  const int64_t twice = std::max<int64_t>(0, stop - (first2 - 50));
  const double processed = static_cast<double>(final_steps + twice) / final_steps;
  EXPECT_LT(processed, 1.3) << "stop " << stop << ", resumed before " << first2;
  std::cerr << "preempted at step " << stop << ", resumed by step " << first2 << " of "
            << final_steps << ": at most " << processed << "x the examples of one run\n";
  EXPECT_GT(t.final_measurement().metrics().at("auc"), 0.5);
}

TEST_F(SchedulerTest, ARunningTrialsUsageIsRecordedEachSecondAsATrainingWorkload) {
  // Holds 60 MiB for 2.5 s: two or three samples, each second, into the telemetry store.
  const std::string script =
      "exec python3 -c \"import time; b = bytearray(60 << 20); b[::4096] = b'x' * len(b[::4096]); "
      "time.sleep(2.5); print('{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":1}}')\"\n";
  const std::string study = client_->MustCreateStudy(ManagedSpec(1, script, 1)).name();
  AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  const std::string http = absl::StrCat("127.0.0.1:", server_->http_port());
  const auto workload = HttpGet(http, "/api/v1/workloads/" + study);
  ASSERT_EQ(workload.status, 200) << workload.body;
  EXPECT_THAT(workload.body, HasSubstr("\"kind\":\"TRAINING\""));
  const auto rec = HttpGet(http, "/api/v1/workloads/" + study + "/recommendation");
  ASSERT_EQ(rec.status, 200) << rec.body;
  // Learned from the samples: the newest one's time, and memory near the 60 MiB held.
  EXPECT_THAT(rec.body, HasSubstr("\"newest_sample_time\":\""));
  EXPECT_THAT(rec.body, HasSubstr("\"memory_bytes\":{"));
}

TEST(ParseCapacityTest, ReadsEachKeyAndRejectsBadOnesNamingThem) {
  SchedulerOptions options;
  ASSERT_TRUE(ParseCapacity("cpu=6.5, memory=16Gi,gpus=2", &options).ok());
  EXPECT_EQ(options.cpu_capacity, 6.5);
  EXPECT_EQ(options.memory_capacity_bytes, int64_t{16} << 30);
  EXPECT_EQ(options.gpus, 2);
  ASSERT_TRUE(ParseCapacity("memory=1500M", &options).ok());
  EXPECT_EQ(options.memory_capacity_bytes, 1500000000);
  ASSERT_TRUE(ParseCapacity("memory=4096", &options).ok());
  EXPECT_EQ(options.memory_capacity_bytes, 4096);
  EXPECT_EQ(options.cpu_capacity, 6.5);  // untouched keys keep their values
  const std::pair<const char*, const char*> bad[] = {
      {"cpu=-1", "--capacity cpu: \"-1\" is not a number of cores > 0"},
      {"cpu=nan", "--capacity cpu: \"nan\" is not a number of cores > 0"},
      {"gpus=x", "--capacity gpus: \"x\" is not a number of GPUs in [0, 1024]"},
      {"memory=", "--capacity memory: \"\" is not a size > 0 such as 16Gi or 2000000000"},
      {"memory=0Gi", "--capacity memory: \"0Gi\" is not a size > 0 such as 16Gi or 2000000000"},
      {"disk=1", "--capacity: unknown key \"disk\" (want cpu=N, memory=SIZE, gpus=N)"},
  };
  for (const auto& [text, message] : bad) {
    SchedulerOptions before;
    EXPECT_THAT(ParseCapacity(text, &before),
                StatusIs(absl::StatusCode::kInvalidArgument, ::testing::Eq(message)))
        << text;
    EXPECT_EQ(before.memory_capacity_bytes, 0);  // nothing applied on an error
  }
}

TEST_F(SchedulerTest, ATrialLeftStoppingByARestartIsFinishedAfterItAndNotRunAgain) {
  // The trial ignores SIGTERM, so after StopTrial it stays STOPPING until the grace ends; the
  // server stops meanwhile (its scheduler kills the trial and leaves it as it is).
  const std::string runs = dir_.File("runs");
  const std::string script = absl::StrCat(
      "trap '' TERM; echo run >> '", runs, "'\n",
      "echo '{\"event\":\"progress\",\"step\":3,\"metrics\":{\"loss\":0.5}}'\n",
      "exec sleep 300\n");
  const v1::Trial stopped = StartThenStop(script);
  ASSERT_EQ(stopped.state(), v1::Trial::STOPPING);
  const std::string trial = stopped.name();
  const std::string study = trial.substr(0, trial.find("/trials/"));
  server_.reset();
  ASSERT_NO_FATAL_FAILURE(Start());
  AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 1; });
  const v1::Trial t = Trial(trial);
  EXPECT_EQ(t.state(), v1::Trial::STOPPED) << t.ShortDebugString();
  EXPECT_EQ(t.final_measurement().step(), 3);
  EXPECT_EQ(ReadLines(runs).size(), 1u);  // it did not run again
}

TEST_F(SchedulerTest, BadTemplatesAreRejectedNamingTheField) {
  struct Case {
    std::function<void(v1::TrialTemplate*)> edit;
    const char* message;
  } const cases[] = {
      {[](v1::TrialTemplate* t) { t->set_args(4, "--lr=${lr}"); },
       "spec.trial_template.args[4] \"--lr=${lr}\": unknown name \"lr\" (names: the "
       "parameters, trial, trial_id, study, checkpoint_dir)"},
      {[](v1::TrialTemplate* t) { t->set_args(3, "${x"); }, "unclosed \"${\""},
      {[](v1::TrialTemplate* t) { t->set_parallel_trials(-1); },
       "spec.trial_template.parallel_trials: -1 must be in [0, 1000]"},
      {[](v1::TrialTemplate* t) { (*t->mutable_env())["A=B"] = "1"; },
       "spec.trial_template.env: bad variable name \"A=B\""},
      {[](v1::TrialTemplate* t) { t->clear_command(); },
       "spec.trial_template.command: empty, but args, env or parallel_trials are set"},
  };
  for (const Case& c : cases) {
    v1::StudySpec spec = ManagedSpec(1, "true", 1);
    c.edit(spec.mutable_trial_template());
    v1::Study out;
    EXPECT_THAT(client_->CreateStudy(spec, &out),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr(c.message)))
        << c.message;
  }
  v1::ListStudiesRequest list;
  v1::ListStudiesResponse studies;
  ASSERT_THAT(client_->Call(&StudyClient::Stub::ListStudies, list, &studies), GrpcOk());
  EXPECT_EQ(studies.studies_size(), 0);
}

}  // namespace
}  // namespace evoscale::service
