// Managed studies: the real evoscaled server (in process, port 0, a SQLite file) runs each
// trial as a real child process (/bin/sh scripts) and reports it through the study API.
#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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
    options.scheduler.memory_capacity_bytes = 128 << 20;
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
  EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(t.final_measurement().step(), 4);
  const double x = t.parameters(0).double_value();
  EXPECT_DOUBLE_EQ(t.final_measurement().metrics().at("loss"), (x - 0.3) * (x - 0.3));
  EXPECT_GT(t.usage().wall_seconds(), 0);  // a stopped trial reports its usage too
  EXPECT_FALSE(t.usage().enforcement().empty());
}

TEST_F(SchedulerTest, TrialsInterruptedByARestartRunAgainAfterIt) {
  // First run of a trial: leave a mark and hang. Second run (after the restart): finish.
  const std::string marks = dir_.path();
  const std::string script = absl::StrCat(
      "mark=\"", marks, "/$(echo \"$2\" | tr / _)\"\n"
      "if [ -e \"$mark\" ]; then\n"
      "  echo \"{\\\"event\\\":\\\"final\\\",\\\"metrics\\\":{\\\"loss\\\":", kLoss, "}}\"\n"
      "else\n"
      "  touch \"$mark\"; exec sleep 300\n"
      "fi\n");
  const std::string study = client_->MustCreateStudy(ManagedSpec(2, script, 2)).name();
  auto marked = [&](int id) {
    const std::string trial = absl::StrCat(study, "/trials/", id);
    return std::ifstream(absl::StrCat(marks, "/", absl::StrReplaceAll(trial, {{"/", "_"}}))).good();
  };
  AwaitStudy(study, [&](const v1::Study&) { return marked(1) && marked(2); });
  server_.reset();  // stops both processes; the trials stay ACTIVE
  ASSERT_NO_FATAL_FAILURE(Start());
  const v1::Study done =
      AwaitStudy(study, [](const v1::Study& s) { return s.completed_trial_count() == 2; });
  EXPECT_EQ(done.trial_count(), 2);  // the same two trials, not new ones
  for (const v1::Trial& t : Trials(study)) {
    EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
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
    return absl::StrContains(metrics,
                             "evoscale_capacity_requested{resource=\"memory_bytes\"} 104857600") &&
           absl::StrContains(metrics, "evoscale_studies_waiting 1");
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr("evoscale_capacity{resource=\"memory_bytes\"} 134217728"));
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
  EXPECT_EQ(server_->scheduler()->requested().memory_bytes(), 0);  // all done, nothing held
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
  EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
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
       "parameters, trial, trial_id, study)"},
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
