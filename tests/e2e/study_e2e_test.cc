// End-to-end: the real evoscaled binary on port 0 with a temporary SQLite database, driven by
// real gRPC clients.
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/grpc_health.h"
#include "tests/e2e/trial_scripts.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_support.h"

namespace evoscale {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::ExitedProcess;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::ProcessGone;
using ::evoscale::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::SizeIs;

v1::Study ExampleStudy(int max_trials, v1::AlgorithmSpec::Algorithm algorithm) {
  v1::Study study;
  static int serial = 0;  // get-or-create: each study of a test is a new one
  study.set_display_name(absl::StrCat("e2e-", ++serial));
  v1::StudySpec* spec = study.mutable_spec();
  auto* m = spec->add_metrics();
  m->set_name("loss");
  m->set_goal(v1::MetricSpec::MINIMIZE);
  auto* lr = spec->add_parameters();
  lr->set_name("lr");
  lr->mutable_double_spec()->set_min(1e-4);
  lr->mutable_double_spec()->set_max(1);
  lr->set_scale(v1::ParameterSpec::LOG);
  auto* layers = spec->add_parameters();
  layers->set_name("layers");
  layers->mutable_integer_spec()->set_min(1);
  layers->mutable_integer_spec()->set_max(8);
  auto* opt = spec->add_parameters();
  opt->set_name("optimizer");
  opt->mutable_categorical_spec()->add_values("sgd");
  opt->mutable_categorical_spec()->add_values("adam");
  spec->mutable_algorithm()->set_algorithm(algorithm);
  spec->mutable_algorithm()->set_seed(7);
  spec->set_max_trials(max_trials);
  return study;
}

// A deterministic objective of the trial's parameters.
double Loss(const v1::Trial& t) {
  double loss = 0;
  for (const auto& p : t.parameters()) {
    if (p.name() == "lr") loss += std::pow(std::log10(p.double_value()) + 2, 2);
    if (p.name() == "layers") loss += std::abs(p.int_value() - 3) * 0.1;
    if (p.name() == "optimizer") loss += p.string_value() == "adam" ? 0 : 0.5;
  }
  return loss;
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

class StudyE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (db_.empty()) db_ = dir_.path() + "/evoscale.db";
    Restart();
  }

  void Restart() {
    server_.reset();
    auto p = EvoscaledProcess::Start(db_, extra_args_);
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
    stub_ = server_->NewStub();
  }

  std::string CreateStudy(const v1::Study& study) {
    v1::CreateStudyRequest req;
    *req.mutable_study() = study;
    v1::Study out;
    grpc::Status st = stub_->CreateStudy(Ctx().get(), req, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return out.name();
  }

  static grpc::Status Suggest(v1::StudyService::Stub* stub, const std::string& study,
                              const std::string& client, int count,
                              v1::SuggestTrialsResponse* out) {
    v1::SuggestTrialsRequest req;
    req.set_parent(study);
    req.set_client_id(client);
    req.set_suggestion_count(count);
    return stub->SuggestTrials(Ctx().get(), req, out);
  }

  static grpc::Status Complete(v1::StudyService::Stub* stub, const v1::Trial& t, double loss,
                               v1::Trial* out) {
    v1::CompleteTrialRequest req;
    req.set_name(t.name());
    (*req.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    return stub->CompleteTrial(Ctx().get(), req, out);
  }

  std::vector<v1::Trial> AllTrials(const std::string& study) {
    std::vector<v1::Trial> all;
    v1::ListTrialsRequest req;
    req.set_parent(study);
    req.set_page_size(1000);
    for (;;) {
      v1::ListTrialsResponse resp;
      grpc::Status st = stub_->ListTrials(Ctx().get(), req, &resp);
      EXPECT_TRUE(st.ok()) << st.error_message();
      all.insert(all.end(), resp.trials().begin(), resp.trials().end());
      if (!st.ok() || resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    return all;
  }

  v1::Study GetStudy(const std::string& name) {
    v1::GetStudyRequest req;
    req.set_name(name);
    v1::Study s;
    grpc::Status st = stub_->GetStudy(Ctx().get(), req, &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s;
  }

  TempDir dir_;
  std::string db_;
  std::vector<std::string> extra_args_;  // evoscaled flags beyond --db, --grpc, --http
  std::unique_ptr<EvoscaledProcess> server_;
  std::unique_ptr<v1::StudyService::Stub> stub_;
};

// Both durability modes on SQLite: process (WAL, no fsync) and power (fsync, group commit
// with the study's lock released before the wait); and power on PostgreSQL (a throwaway
// server, tests/support/postgres_server.h, fsync on; skipped, saying why, where PostgreSQL is
// not installed), telemetry in an SQLite file beside.
class DurabilityE2eTest : public StudyE2eTest,
                          public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      if (std::string why = PostgresServer::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
      absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start({.fsync = true});
      ASSERT_TRUE(pg.ok()) << pg.status();
      postgres_ = *std::move(pg);
      absl::StatusOr<std::string> uri = postgres_->CreateDatabase("evoscale");
      ASSERT_TRUE(uri.ok()) << uri.status();
      db_ = *uri;
      extra_args_ = {"--durability", "power", "--telemetry-db",
                     dir_.path() + "/evoscale.telemetry.db"};
    } else {
      extra_args_ = {"--durability", GetParam()};
    }
    StudyE2eTest::SetUp();
  }
  void TearDown() override { server_.reset(); }  // evoscaled stops before its database
  bool sqlite() const { return GetParam() != "postgresql"; }
  std::unique_ptr<PostgresServer> postgres_;
};

INSTANTIATE_TEST_SUITE_P(Modes, DurabilityE2eTest,
                         ::testing::Values("process", "power", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST_F(StudyE2eTest, WholeAskTellStudyRunsToCompletion) {
  const std::string study = CreateStudy(ExampleStudy(20, v1::AlgorithmSpec::RANDOM));
  ASSERT_EQ(study, "studies/1");
  std::map<int64_t, double> losses;
  for (int round = 0; round < 100; ++round) {
    v1::SuggestTrialsResponse resp;
    ASSERT_TRUE(Suggest(stub_.get(), study, "worker", 3, &resp).ok());
    if (resp.trials().empty()) {
      EXPECT_EQ(resp.study_state(), v1::Study::COMPLETED);
      break;
    }
    for (const v1::Trial& t : resp.trials()) {
      EXPECT_EQ(t.state(), v1::Trial::ACTIVE);
      v1::AddTrialMeasurementRequest m;
      m.set_trial_name(t.name());
      m.mutable_measurement()->set_step(1);
      (*m.mutable_measurement()->mutable_metrics())["loss"] = Loss(t) + 1;
      v1::Trial measured;
      ASSERT_TRUE(stub_->AddTrialMeasurement(Ctx().get(), m, &measured).ok());
      EXPECT_THAT(measured.measurements(), SizeIs(1));
      v1::Trial done;
      ASSERT_TRUE(Complete(stub_.get(), t, Loss(t), &done).ok());
      EXPECT_EQ(done.state(), v1::Trial::SUCCEEDED);
      losses[t.id()] = Loss(t);
    }
  }
  EXPECT_THAT(losses, SizeIs(20));
  v1::Study s = GetStudy(study);
  EXPECT_EQ(s.state(), v1::Study::COMPLETED);
  EXPECT_EQ(s.trial_count(), 20);
  EXPECT_EQ(s.completed_trial_count(), 20);

  v1::ListOptimalTrialsRequest oreq;
  oreq.set_parent(study);
  v1::ListOptimalTrialsResponse optimal;
  ASSERT_TRUE(stub_->ListOptimalTrials(Ctx().get(), oreq, &optimal).ok());
  ASSERT_THAT(optimal.optimal_trials(), SizeIs(1));
  auto best = std::min_element(losses.begin(), losses.end(),
                               [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_EQ(optimal.optimal_trials(0).id(), best->first);
}

TEST_F(StudyE2eTest, RetryWithSameClientIdReturnsTheSameTrials) {
  const std::string study = CreateStudy(ExampleStudy(0, v1::AlgorithmSpec::GENETIC));
  v1::SuggestTrialsResponse first, retry, other;
  ASSERT_TRUE(Suggest(stub_.get(), study, "a", 2, &first).ok());
  ASSERT_TRUE(Suggest(stub_.get(), study, "a", 2, &retry).ok());
  ASSERT_TRUE(Suggest(stub_.get(), study, "b", 2, &other).ok());
  ASSERT_THAT(first.trials(), SizeIs(2));
  ASSERT_THAT(retry.trials(), SizeIs(2));
  ASSERT_THAT(other.trials(), SizeIs(2));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(retry.trials(i).name(), first.trials(i).name());
    EXPECT_EQ(retry.trials(i).parameters_size(), first.trials(i).parameters_size());
    EXPECT_NE(other.trials(i).id(), first.trials(0).id());
    EXPECT_NE(other.trials(i).id(), first.trials(1).id());
  }
  // Asking for more than it holds: its trials first, then new ones.
  v1::SuggestTrialsResponse more;
  ASSERT_TRUE(Suggest(stub_.get(), study, "a", 3, &more).ok());
  ASSERT_THAT(more.trials(), SizeIs(3));
  EXPECT_EQ(more.trials(0).id(), first.trials(0).id());
  EXPECT_EQ(more.trials(1).id(), first.trials(1).id());
  EXPECT_EQ(more.trials(2).id(), 5);
  EXPECT_THAT(AllTrials(study), SizeIs(5));
}

TEST_P(DurabilityE2eTest, SixteenConcurrentClientsNeverShareATrialAndEveryCompletionIsStored) {
  constexpr int kClients = 16;
  constexpr int kPerClient = 100;
  const std::string study =
      CreateStudy(ExampleStudy(kClients * kPerClient, v1::AlgorithmSpec::QUASI_RANDOM));
  std::vector<std::vector<int64_t>> got(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = server_->NewStub();
      const std::string client = "client-" + std::to_string(c);
      while (static_cast<int>(got[c].size()) < kPerClient * 2) {
        v1::SuggestTrialsResponse resp;
        if (!Suggest(stub.get(), study, client, 1, &resp).ok()) {
          ++errors;
          return;
        }
        if (resp.trials().empty()) return;  // budget spent
        for (const v1::Trial& t : resp.trials()) {
          v1::Trial done;
          if (!Complete(stub.get(), t, t.id() * 0.5, &done).ok()) ++errors;
          got[c].push_back(t.id());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::map<int64_t, int> owner;
  for (int c = 0; c < kClients; ++c) {
    for (int64_t id : got[c]) {
      EXPECT_TRUE(owner.emplace(id, c).second) << "trial " << id << " handed to two clients";
    }
  }
  EXPECT_THAT(owner, SizeIs(kClients * kPerClient));
  std::vector<v1::Trial> all = AllTrials(study);
  ASSERT_THAT(all, SizeIs(kClients * kPerClient));
  for (const v1::Trial& t : all) {
    EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.name();
    EXPECT_EQ(t.final_measurement().metrics().at("loss"), t.id() * 0.5);
    EXPECT_EQ(t.client_id(), "client-" + std::to_string(owner[t.id()]));
  }
  EXPECT_EQ(GetStudy(study).state(), v1::Study::COMPLETED);
}

// Runs half a study, restarts evoscaled (gracefully or with SIGKILL), finishes the study.
class StudyRestartTest : public StudyE2eTest, public ::testing::WithParamInterface<int> {
 public:
  void Run() {
    const std::string study = CreateStudy(ExampleStudy(20, v1::AlgorithmSpec::GENETIC));
    std::vector<v1::Trial> before;
    for (int i = 0; i < 10; ++i) {
      v1::SuggestTrialsResponse resp;
      ASSERT_TRUE(Suggest(stub_.get(), study, "w", 1, &resp).ok());
      ASSERT_THAT(resp.trials(), SizeIs(1));
      v1::Trial done;
      ASSERT_TRUE(Complete(stub_.get(), resp.trials(0), Loss(resp.trials(0)), &done).ok());
      before.push_back(done);
    }
    v1::SuggestTrialsResponse held;  // an ACTIVE trial across the restart
    ASSERT_TRUE(Suggest(stub_.get(), study, "w", 1, &held).ok());
    ASSERT_THAT(held.trials(), SizeIs(1));

    stub_.reset();
    server_->Stop(GetParam());
    Restart();

    std::vector<v1::Trial> after = AllTrials(study);
    ASSERT_THAT(after, SizeIs(11));
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(after[i].SerializeAsString(), before[i].SerializeAsString()) << i;
    }
    EXPECT_EQ(after[10].state(), v1::Trial::ACTIVE);
    // The worker's retry after the restart gets its trial back, then the study goes on.
    v1::SuggestTrialsResponse again;
    ASSERT_TRUE(Suggest(stub_.get(), study, "w", 1, &again).ok());
    ASSERT_THAT(again.trials(), SizeIs(1));
    EXPECT_EQ(again.trials(0).name(), held.trials(0).name());
    for (int round = 0; round < 50; ++round) {
      v1::SuggestTrialsResponse resp;
      ASSERT_TRUE(Suggest(stub_.get(), study, "w", 1, &resp).ok());
      if (resp.trials().empty()) break;
      v1::Trial done;
      ASSERT_TRUE(Complete(stub_.get(), resp.trials(0), Loss(resp.trials(0)), &done).ok());
    }
    std::vector<v1::Trial> final_trials = AllTrials(study);
    ASSERT_THAT(final_trials, SizeIs(20));
    std::set<std::string> distinct;
    for (const auto& t : final_trials) {
      EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED);
      std::string key;
      for (const auto& p : t.parameters()) key += p.ShortDebugString();
      distinct.insert(key);
    }
    EXPECT_THAT(distinct, SizeIs(20)) << "the designer repeated a point after the restart";
    EXPECT_EQ(GetStudy(study).state(), v1::Study::COMPLETED);
  }
};

TEST_P(StudyRestartTest, RestartInTheMiddleResumesWithNothingLost) { Run(); }

INSTANTIATE_TEST_SUITE_P(Signals, StudyRestartTest, ::testing::Values(SIGTERM, SIGKILL),
                         [](const auto& info) { return info.param == SIGTERM ? "Sigterm" : "Sigkill"; });

// gRPC health follows the study database: NOT_SERVING (the server as a whole and the study
// service) while PostgreSQL is down, SERVING again once it answers, and the studies are all
// there.
class PostgresE2eTest : public DurabilityE2eTest {};
INSTANTIATE_TEST_SUITE_P(Modes, PostgresE2eTest, ::testing::Values("postgresql"),
                         [](const auto& info) { return info.param; });

TEST_P(PostgresE2eTest, HealthIsNotServingWhileTheDatabaseIsLost) {
  const std::string study = CreateStudy(ExampleStudy(10, v1::AlgorithmSpec::RANDOM));
  auto health = [&](const std::string& service) {
    absl::StatusOr<std::string> h = testing::HealthCheck(server_->grpc_address(), service);
    return h.ok() ? *h : std::string("error");
  };
  EXPECT_EQ(health(""), testing::kHealthServing);
  ASSERT_TRUE(postgres_->Stop(/*immediate=*/true).ok());
  EXPECT_TRUE(testing::AwaitCondition(
      [&] {
        return health("") != testing::kHealthServing &&
               health("evoscale.v1.StudyService") != testing::kHealthServing;
      },
      absl::Seconds(10)))
      << "health stayed SERVING with the database down";
  ASSERT_TRUE(postgres_->Restart().ok()) << postgres_->LogTail();
  EXPECT_TRUE(testing::AwaitCondition([&] { return health("") == testing::kHealthServing; },
                                      absl::Seconds(10)))
      << "health did not come back";
  EXPECT_EQ(GetStudy(study).name(), study);
  v1::SuggestTrialsResponse resp;
  EXPECT_TRUE(Suggest(stub_.get(), study, "after", 1, &resp).ok());
}

TEST_P(DurabilityE2eTest, KillNineDuringABurstLosesNoAcknowledgedWrite) {
  const std::string study = CreateStudy(ExampleStudy(0, v1::AlgorithmSpec::RANDOM));
  struct Ack {
    int64_t trial_id;
    int64_t step;  // -1: the completion
    double value;
  };
  absl::Mutex mu;
  std::vector<Ack> acks;  // guarded by mu
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      auto stub = server_->NewStub();
      const std::string client = "writer-" + std::to_string(w);
      while (!stop.load()) {
        v1::SuggestTrialsResponse resp;
        if (!Suggest(stub.get(), study, client, 1, &resp).ok() || resp.trials().empty()) return;
        const v1::Trial& t = resp.trials(0);
        for (int step = 1; step <= 3; ++step) {
          v1::AddTrialMeasurementRequest m;
          m.set_trial_name(t.name());
          m.mutable_measurement()->set_step(step);
          const double v = t.id() + step / 10.0;
          (*m.mutable_measurement()->mutable_metrics())["loss"] = v;
          v1::Trial out;
          if (!stub->AddTrialMeasurement(Ctx().get(), m, &out).ok()) return;
          absl::MutexLock lock(&mu);
          acks.push_back({t.id(), step, v});
        }
        v1::Trial out;
        if (!Complete(stub.get(), t, t.id() * 2.0, &out).ok()) return;
        absl::MutexLock lock(&mu);
        acks.push_back({t.id(), -1, t.id() * 2.0});
      }
    });
  }
  {
    absl::MutexLock lock(&mu);
    // Wait on the condition, not a sleep: enough acknowledged writes are in.
    ASSERT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(+[](std::vector<Ack>* a) { return a->size() >= 400; }, &acks),
        absl::Seconds(120)));
  }
  server_->Stop(SIGKILL);  // writers are still sending
  stop = true;
  for (auto& t : writers) t.join();

  // The database is intact and every acknowledged write is in it.
  if (sqlite()) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  Restart();
  std::vector<v1::Trial> all = AllTrials(study);
  std::map<int64_t, const v1::Trial*> by_id;
  for (const auto& t : all) by_id[t.id()] = &t;
  absl::MutexLock lock(&mu);
  ASSERT_GE(acks.size(), 400u);
  for (const Ack& a : acks) {
    ASSERT_TRUE(by_id.contains(a.trial_id)) << "trial " << a.trial_id << " lost";
    const v1::Trial& t = *by_id[a.trial_id];
    if (a.step < 0) {
      EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.name();
      EXPECT_EQ(t.final_measurement().metrics().at("loss"), a.value);
    } else {
      ASSERT_GE(t.measurements_size(), a.step) << t.name() << " lost step " << a.step;
      EXPECT_EQ(t.measurements(a.step - 1).metrics().at("loss"), a.value);
    }
  }
}

// Raw protobuf bytes for the two generic calls below (their generated code is not installed
// with Debian's gRPC): field 1 or 7, length-delimited.
std::string LengthDelimited(int field, const std::string& value) {
  std::string out(1, static_cast<char>((field << 3) | 2));
  out += static_cast<char>(value.size());  // short values only
  return out + value;
}

std::string ToString(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bb.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A managed trial does not outlive evoscaled: killed with SIGKILL, evoscaled cannot stop its
// trials, so each trial is tied to it (PR_SET_PDEATHSIG) and dies too; after the restart the
// trial runs again, once.
TEST_F(StudyE2eTest, KillNineOfEvoscaledTakesItsManagedTrialsWithIt) {
  extra_args_ = {"--max-running-trials", "1"};
  Restart();
  const std::string pid_file = dir_.path() + "/trial.pid";
  const std::string runs_file = dir_.path() + "/runs";
  v1::Study spec = ExampleStudy(1, v1::AlgorithmSpec::RANDOM);
  evoscale::testing::HangOnceThenFinish(pid_file, runs_file,
                                        spec.mutable_spec()->mutable_trial_template());
  const std::string study = CreateStudy(spec);
  ASSERT_TRUE(AwaitCondition([&] { return evoscale::testing::ReadPid(pid_file) != 0; }))
      << "the trial never started";
  const int pid = evoscale::testing::ReadPid(pid_file);
  server_->Stop(SIGKILL);
  // The trial's process is gone (or a zombie waiting for a reaper).
  EXPECT_TRUE(AwaitCondition([&] { return ProcessGone(pid); }, absl::Seconds(10)))
      << "trial process " << pid << " outlived evoscaled";
  Restart();
  EXPECT_TRUE(AwaitCondition([&] { return GetStudy(study).completed_trial_count() >= 1; }));
  std::vector<v1::Trial> all = AllTrials(study);
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].state(), v1::Trial::SUCCEEDED) << all[0].ShortDebugString();
  EXPECT_EQ(evoscale::testing::CountLines(runs_file), 2);  // interrupted, then after the restart
}

// Two managed studies running when evoscaled is killed with SIGKILL: after the restart every
// trial completes, none is lost or added, and no trial ever runs twice at once (each run holds
// its trial's lock with flock -n, and records when it cannot). A double-forked grandchild in a
// trial's cgroup does not outlive the restart either.
TEST_F(StudyE2eTest, KillNineMidRunWithTwoStudiesLosesNothingAndRunsNothingTwice) {
  extra_args_ = {"--capacity", "cpu=4,memory=1Gi"};
  Restart();
  const std::string log = dir_.path() + "/runs.log";
  const std::string orphan = dir_.path() + "/orphan.pid";
  std::vector<std::string> studies;
  for (int i = 0; i < 2; ++i) {
    v1::Study spec = ExampleStudy(3, v1::AlgorithmSpec::RANDOM);
    v1::TrialTemplate* t = spec.mutable_spec()->mutable_trial_template();
    t->set_command("/bin/sh");
    t->add_args("-c");
    // $1: the trial's name. The first study's first run also leaves a grandchild behind.
    t->add_args(absl::StrCat(
        "lock='", dir_.path(), "/'$(echo \"$1\" | tr / _).lock\n",
        "exec 9> \"$lock\"\n",
        "flock -n 9 || { echo \"twice $1\" >> '", log, "'; exit 1; }\n",
        "echo \"start $1\" >> '", log, "'\n",
        i == 0 ? absl::StrCat("[ -e '", orphan, "' ] || (sh -c 'echo $$ > ", orphan,
                              "; exec sleep 300' 9>&- &)\n")
               : "",
        "sleep 1\n",
        "echo '{\"event\":\"final\",\"metrics\":{\"loss\":1}}'\n"));
    t->add_args("trial");
    t->add_args("${trial}");
    t->set_parallel_trials(2);
    t->mutable_resources()->set_memory_bytes(64 << 20);
    t->set_fixed_resources(true);
    studies.push_back(CreateStudy(spec));
  }
  auto lines = [&] {
    std::ifstream in(log);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  // Kill it while trials of both studies run.
  ASSERT_TRUE(AwaitCondition([&] {
    int a = 0, b = 0;
    for (const std::string& l : lines()) {
      a += absl::StrContains(l, studies[0] + "/") ? 1 : 0;
      b += absl::StrContains(l, studies[1] + "/") ? 1 : 0;
    }
    return a >= 1 && b >= 1;
  })) << "trials of both studies never started";
  server_->Stop(SIGKILL);
  Restart();
  std::string enforcement;
  for (const std::string& study : studies) {
    EXPECT_TRUE(AwaitCondition([&] { return GetStudy(study).completed_trial_count() >= 3; },
                               absl::Seconds(60)));
    std::vector<v1::Trial> all = AllTrials(study);
    EXPECT_THAT(all, SizeIs(3));
    for (const v1::Trial& t : all) {
      EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED) << t.ShortDebugString();
      enforcement = t.usage().enforcement();
    }
  }
  for (const std::string& l : lines()) EXPECT_FALSE(absl::StartsWith(l, "twice")) << l;
  std::ifstream in(orphan);
  int pid = 0;
  in >> pid;
  if (pid > 0 && absl::StartsWith(enforcement, "cgroup")) {
    EXPECT_TRUE(AwaitCondition([&] { return ProcessGone(pid); }, absl::Seconds(10)))
        << "the grandchild " << pid << " outlived its trial's restart";
  } else if (pid > 0) {
    kill(pid, SIGKILL);
    std::cerr << "SKIPPED grandchild check: trials ran without cgroups (" << enforcement
              << ")\n";
  }
}

// A managed study whose command is not on evoscaled's PATH: each trial is INFEASIBLE with the
// reason, and evoscaled's log says so too (before, nothing was logged).
TEST_F(StudyE2eTest, AManagedCommandNotOnPathIsLogged) {
  server_.reset();
  auto p = EvoscaledProcess::Start(db_, {}, /*merge_stderr=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  server_ = *std::move(p);
  stub_ = server_->NewStub();
  v1::Study spec = ExampleStudy(1, v1::AlgorithmSpec::RANDOM);
  spec.mutable_spec()->mutable_trial_template()->set_command("evoscale-no-such-command");
  const std::string study = CreateStudy(spec);
  std::string logged;
  for (int i = 0; i < 20 && logged.empty(); ++i) {
    absl::StatusOr<std::string> line = server_->ReadLine(std::chrono::seconds(30));
    ASSERT_TRUE(line.ok()) << line.status();
    if (absl::StrContains(*line, "cannot start")) logged = *line;
  }
  EXPECT_THAT(logged, HasSubstr("evoscale-no-such-command"));
  EXPECT_THAT(logged, HasSubstr("not found in PATH"));
  EXPECT_THAT(logged, HasSubstr(study + "/trials/1"));
  ASSERT_TRUE(AwaitCondition([&] { return GetStudy(study).completed_trial_count() == 1; }));
  const std::vector<v1::Trial> all = AllTrials(study);
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].state(), v1::Trial::INFEASIBLE);
  EXPECT_THAT(all[0].infeasible_reason(), HasSubstr("not found in PATH"));
}

TEST_F(StudyE2eTest, HealthCheckAndServerReflectionAnswer) {
  // grpc.health.v1.Health/Check{service: "evoscale.v1.StudyService"} -> status SERVING (1).
  for (const std::string service : {"", "evoscale.v1.StudyService", "evoscale.v1.AutoscalerService"}) {
    absl::StatusOr<std::string> health = testing::HealthCheck(server_->grpc_address(), service);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, testing::kHealthServing) << service;
  }
  grpc::GenericStub generic(
      grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));

  // grpc.reflection.v1alpha.ServerReflection: list_services (field 7) names our services.
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](void* want) {
    ASSERT_TRUE(cq.Next(&tag, &ok));
    ASSERT_EQ(tag, want);
    ASSERT_TRUE(ok);
  };
  call->StartCall(reinterpret_cast<void*>(1));
  step(reinterpret_cast<void*>(1));
  grpc::Slice slice(LengthDelimited(7, ""));
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  step(reinterpret_cast<void*>(2));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  step(reinterpret_cast<void*>(3));
  const std::string listed = ToString(response);
  EXPECT_THAT(listed, ::testing::HasSubstr("evoscale.v1.StudyService"));
  EXPECT_THAT(listed, ::testing::HasSubstr("evoscale.v1.AutoscalerService"));
  call->WritesDone(reinterpret_cast<void*>(4));
  step(reinterpret_cast<void*>(4));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(reinterpret_cast<void*>(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// The issue 16 data loss: two evoscaled on one database each answered CreateStudy with
// studies/2 and only one survived. Now the second exits at once naming the holder.
TEST_F(StudyE2eTest, SecondEvoscaledOnTheSameDatabaseExitsAndTheFirstLosesNothing) {
  const std::string first = CreateStudy(ExampleStudy(5, v1::AlgorithmSpec::GENETIC));
  EXPECT_EQ(first, "studies/1");
  ExitedProcess second = EvoscaledProcess::RunToExit(
      {"--db", db_, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"});
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_THAT(second.output,
              ::testing::HasSubstr(absl::StrCat("evoscaled: database \"", db_,
                                                "\" is in use by another evoscaled (pid ",
                                                server_->pid(), ", lock \"", db_, ".lock\")")));
  EXPECT_THAT(second.output, ::testing::Not(::testing::HasSubstr("listening")));
  // The first keeps serving, and every acknowledged study survives its restart.
  const std::string next = CreateStudy(ExampleStudy(5, v1::AlgorithmSpec::RANDOM));
  EXPECT_EQ(next, "studies/2");
  Restart();
  EXPECT_EQ(GetStudy(first).spec().algorithm().algorithm(), v1::AlgorithmSpec::GENETIC);
  EXPECT_EQ(GetStudy(next).spec().algorithm().algorithm(), v1::AlgorithmSpec::RANDOM);
}

TEST_F(StudyE2eTest, LockIsReleasedWhenTheHolderIsKilled) {
  const std::string first = CreateStudy(ExampleStudy(5, v1::AlgorithmSpec::GENETIC));
  server_->Stop(SIGKILL);  // no clean shutdown: the kernel drops the flock
  Restart();
  EXPECT_EQ(GetStudy(first).name(), first);
}

// gRPC enables SO_REUSEPORT by default: a second server bound the same port and took half of
// the connections, to another database.
TEST_F(StudyE2eTest, SecondEvoscaledOnTheSameGrpcPortExitsAndTheFirstKeepsServing) {
  const std::string first = CreateStudy(ExampleStudy(5, v1::AlgorithmSpec::GENETIC));
  const std::string address = server_->grpc_address();
  ExitedProcess second = EvoscaledProcess::RunToExit(
      {"--db", dir_.path() + "/other.db", "--grpc", address, "--http", "127.0.0.1:0"});
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_THAT(second.output, ::testing::HasSubstr(absl::StrCat(
                                 "evoscaled: --grpc \"", address,
                                 "\": cannot listen (in use or bad address)")));
  // Every new connection still reaches the first server and its database.
  for (int i = 0; i < 8; ++i) {
    auto stub = server_->NewStub();
    v1::ListStudiesRequest req;
    v1::ListStudiesResponse resp;
    grpc::Status st = stub->ListStudies(Ctx().get(), req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.studies_size(), 1);
    EXPECT_EQ(resp.studies(0).name(), first);
  }
}

}  // namespace
}  // namespace evoscale
