// End-to-end: two real evoscaled replicas on one throwaway PostgreSQL database (issue 30), each
// study served by the replica holding its lease, calls on the other forwarded to it; the owner
// killed (SIGKILL) or hung (SIGSTOP) and its studies taken over. Skipped, saying why, where
// PostgreSQL is not installed.
#include <signal.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/http_get.h"
#include "tests/e2e/trial_scripts.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_support.h"

namespace evoscale {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::TempDir;

v1::Study SharedStudy(const std::string& display_name) {
  v1::Study study;
  study.set_display_name(display_name);
  v1::StudySpec* spec = study.mutable_spec();
  auto* m = spec->add_metrics();
  m->set_name("loss");
  m->set_goal(v1::MetricSpec::MINIMIZE);
  auto* x = spec->add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_min(0);
  x->mutable_double_spec()->set_max(1);
  spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  spec->mutable_algorithm()->set_seed(7);
  return study;
}

class ReplicasE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = PostgresServer::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    postgres_ = *std::move(pg);
    absl::StatusOr<std::string> uri = postgres_->CreateDatabase("evoscale");
    ASSERT_TRUE(uri.ok()) << uri.status();
    uri_ = *uri;
    for (const char* name : {"a", "b"}) {
      std::unique_ptr<EvoscaledProcess> replica = StartReplica(name);
      ASSERT_NE(replica, nullptr);
      replicas_.push_back(std::move(replica));
    }
  }
  void TearDown() override { replicas_.clear(); }  // before their database

  std::unique_ptr<EvoscaledProcess> StartReplica(const std::string& name) {
    absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p = EvoscaledProcess::Start(
        uri_, {"--durability", "power", "--lease-seconds", "1", "--telemetry-db",
               absl::StrCat(dir_.path(), "/", name, ".telemetry.db")});
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  static grpc::Status Create(EvoscaledProcess& replica, const v1::Study& study, v1::Study* out) {
    v1::CreateStudyRequest req;
    *req.mutable_study() = study;
    grpc::ClientContext ctx;
    return replica.NewStub()->CreateStudy(&ctx, req, out);
  }
  static grpc::Status Suggest(EvoscaledProcess& replica, const std::string& study,
                              const std::string& client, int count,
                              v1::SuggestTrialsResponse* out) {
    v1::SuggestTrialsRequest req;
    req.set_parent(study);
    req.set_client_id(client);
    req.set_suggestion_count(count);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return replica.NewStub()->SuggestTrials(&ctx, req, out);
  }
  static std::vector<int64_t> Ids(const v1::SuggestTrialsResponse& resp) {
    std::vector<int64_t> ids;
    for (const v1::Trial& t : resp.trials()) ids.push_back(t.id());
    return ids;
  }

  TempDir dir_;
  std::unique_ptr<PostgresServer> postgres_;
  std::string uri_;
  std::vector<std::unique_ptr<EvoscaledProcess>> replicas_;
};

TEST_F(ReplicasE2eTest, EitherReplicaServesAStudyTheOtherOwns) {
  EvoscaledProcess& a = *replicas_[0];
  EvoscaledProcess& b = *replicas_[1];
  v1::Study created, again;
  ASSERT_TRUE(Create(a, SharedStudy("shared"), &created).ok());
  // Get-or-create by display name spans the replicas: one study.
  ASSERT_TRUE(Create(b, SharedStudy("shared"), &again).ok());
  EXPECT_EQ(again.name(), created.name());
  v1::Study other_spec = SharedStudy("shared");
  other_spec.mutable_spec()->mutable_algorithm()->set_seed(8);
  grpc::Status taken = Create(b, other_spec, &again);
  EXPECT_EQ(taken.error_code(), grpc::StatusCode::ALREADY_EXISTS) << taken.error_message();

  // A client's retry on the other replica gets the same trials.
  v1::SuggestTrialsResponse first, retry;
  ASSERT_TRUE(Suggest(b, created.name(), "worker-1", 2, &first).ok());
  ASSERT_TRUE(Suggest(a, created.name(), "worker-1", 2, &retry).ok());
  EXPECT_EQ(Ids(first), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Ids(retry), Ids(first));

  // A trial completed through one replica is read back through the other.
  v1::CompleteTrialRequest complete;
  complete.set_name(first.trials(0).name());
  (*complete.mutable_final_measurement()->mutable_metrics())["loss"] = 0.25;
  v1::Trial done;
  grpc::ClientContext complete_ctx;
  ASSERT_TRUE(b.NewStub()->CompleteTrial(&complete_ctx, complete, &done).ok());
  v1::GetTrialRequest get;
  get.set_name(first.trials(0).name());
  v1::Trial read;
  grpc::ClientContext get_ctx;
  ASSERT_TRUE(a.NewStub()->GetTrial(&get_ctx, get, &read).ok());
  EXPECT_EQ(read.state(), v1::Trial::SUCCEEDED);

  // Both list it, with its counters.
  for (EvoscaledProcess* replica : {&a, &b}) {
    v1::ListStudiesRequest list;
    v1::ListStudiesResponse listed;
    grpc::ClientContext ctx;
    ASSERT_TRUE(replica->NewStub()->ListStudies(&ctx, list, &listed).ok());
    ASSERT_EQ(listed.studies_size(), 1);
    EXPECT_EQ(listed.studies(0).trial_count(), 2);
    EXPECT_EQ(listed.studies(0).completed_trial_count(), 1);
  }
  // The dashboard's reads work on either replica (the non-owner reads the database).
  for (EvoscaledProcess* replica : {&a, &b}) {
    const std::string study_path = "/api/v1/studies/" + created.name().substr(8);
    evoscale::testing::HttpResult got =
        evoscale::testing::HttpGet(replica->http_address(), study_path);
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_NE(got.body.find("\"completed_trial_count\":\"1\""), std::string::npos) << got.body;
    got = evoscale::testing::HttpGet(replica->http_address(), study_path + "/trials");
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_NE(got.body.find("\"total_size\":2"), std::string::npos) << got.body;
    got = evoscale::testing::HttpGet(replica->http_address(), study_path + "/trials/1");
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_NE(got.body.find("\"state\":\"SUCCEEDED\""), std::string::npos) << got.body;
    got = evoscale::testing::HttpGet(replica->http_address(), study_path + "/trials/9");
    EXPECT_EQ(got.status, 404) << got.body;
    // Importance and the optimal trials too, the same on both (computed from the database on
    // the non-owner); a metric the study lacks is named.
    got = evoscale::testing::HttpGet(replica->http_address(), study_path + "/importance");
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_NE(got.body.find("\"metric\":\"loss\""), std::string::npos) << got.body;
    EXPECT_NE(got.body.find("\"trial_count\":1"), std::string::npos) << got.body;
    got = evoscale::testing::HttpGet(replica->http_address(),
                                     study_path + "/importance?metric=auc");
    EXPECT_EQ(got.status, 400) << got.body;
    EXPECT_NE(got.body.find("metric: \\\"auc\\\" is not a metric of the study"),
              std::string::npos)
        << got.body;
    got = evoscale::testing::HttpGet(replica->http_address(), study_path + "/optimal");
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_NE(got.body.find(first.trials(0).name()), std::string::npos) << got.body;
  }
  // An unknown study is NOT_FOUND on either.
  v1::SuggestTrialsResponse none;
  EXPECT_EQ(Suggest(b, "studies/99", "worker-1", 1, &none).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ReplicasE2eTest, AKilledOwnersStudiesAreServedByTheOtherWithTheirTrials) {
  v1::Study study;
  ASSERT_TRUE(Create(*replicas_[0], SharedStudy("killed"), &study).ok());
  v1::SuggestTrialsResponse handed;
  ASSERT_TRUE(Suggest(*replicas_[0], study.name(), "worker-1", 2, &handed).ok());
  ASSERT_EQ(Ids(handed), (std::vector<int64_t>{1, 2}));

  replicas_[0]->Stop(SIGKILL);  // its database session ends: its studies are free at once
  v1::SuggestTrialsResponse retry, other;
  ASSERT_TRUE(Suggest(*replicas_[1], study.name(), "worker-1", 2, &retry).ok());
  EXPECT_EQ(Ids(retry), Ids(handed));  // acknowledged, so still the client's
  ASSERT_TRUE(Suggest(*replicas_[1], study.name(), "worker-2", 1, &other).ok());
  EXPECT_EQ(Ids(other), (std::vector<int64_t>{3}));  // no trial number repeats

  // A replica started again serves the study from its new owner.
  replicas_[0] = StartReplica("a2");
  ASSERT_NE(replicas_[0], nullptr);
  v1::SuggestTrialsResponse through_new;
  ASSERT_TRUE(Suggest(*replicas_[0], study.name(), "worker-2", 1, &through_new).ok());
  EXPECT_EQ(Ids(through_new), Ids(other));
}

TEST_F(ReplicasE2eTest, AHungOwnersStudyIsTakenAfterItsLeaseAndItWritesNothingAfter) {
  EvoscaledProcess& a = *replicas_[0];
  EvoscaledProcess& b = *replicas_[1];
  v1::Study study;
  ASSERT_TRUE(Create(a, SharedStudy("hung"), &study).ok());
  v1::SuggestTrialsResponse handed;
  ASSERT_TRUE(Suggest(a, study.name(), "worker-1", 1, &handed).ok());

  kill(a.pid(), SIGSTOP);
  // Forwarded to the hung owner, a call waits; once the lease (1 s) expires the other replica
  // takes the study over and answers.
  v1::SuggestTrialsResponse taken;
  grpc::Status st;
  ASSERT_TRUE(AwaitCondition(
      [&] {
        st = Suggest(b, study.name(), "worker-2", 1, &taken);
        return st.ok();
      },
      absl::Seconds(30), absl::Milliseconds(200)))
      << st.error_message();
  EXPECT_EQ(Ids(taken), (std::vector<int64_t>{2}));
  kill(a.pid(), SIGCONT);

  // The former owner's cache is stale: what it is asked now is served from the new owner's
  // state (its own writes are fenced off), so trial numbers still never repeat.
  std::set<int64_t> ids;
  for (int client = 3; client <= 5; ++client) {
    v1::SuggestTrialsResponse resp;
    ASSERT_TRUE(AwaitCondition(
        [&] { return Suggest(a, study.name(), absl::StrCat("worker-", client), 1, &resp).ok(); },
        absl::Seconds(30), absl::Milliseconds(100)));
    ASSERT_EQ(resp.trials_size(), 1);
    EXPECT_TRUE(ids.insert(resp.trials(0).id()).second);
  }
  EXPECT_EQ(ids, (std::set<int64_t>{3, 4, 5}));
  v1::GetStudyRequest get;
  get.set_name(study.name());
  v1::Study read;
  grpc::ClientContext ctx;
  ASSERT_TRUE(b.NewStub()->GetStudy(&ctx, get, &read).ok());
  EXPECT_EQ(read.trial_count(), 5);
}

// A managed study whose owner is killed continues on the other replica: its trial (killed with
// its replica, PR_SET_PDEATHSIG) runs again there, once, and the study completes.
TEST_F(ReplicasE2eTest, AManagedStudyContinuesOnTheOtherReplicaWhenItsOwnerIsKilled) {
  const std::string pid_file = dir_.path() + "/trial.pid";
  const std::string runs_file = dir_.path() + "/runs";
  v1::Study spec = SharedStudy("managed");
  spec.mutable_spec()->set_max_trials(1);
  evoscale::testing::HangOnceThenFinish(pid_file, runs_file,
                                        spec.mutable_spec()->mutable_trial_template());
  v1::Study study;
  ASSERT_TRUE(Create(*replicas_[0], spec, &study).ok());
  ASSERT_TRUE(AwaitCondition([&] { return evoscale::testing::ReadPid(pid_file) != 0; }))
      << "the trial never started";
  const int pid = evoscale::testing::ReadPid(pid_file);
  replicas_[0]->Stop(SIGKILL);
  EXPECT_TRUE(
      AwaitCondition([&] { return evoscale::testing::ProcessGone(pid); }, absl::Seconds(10)))
      << "trial process " << pid << " outlived its replica";
  v1::GetStudyRequest get;
  get.set_name(study.name());
  v1::Study read;
  EXPECT_TRUE(AwaitCondition(
      [&] {
        grpc::ClientContext ctx;
        return replicas_[1]->NewStub()->GetStudy(&ctx, get, &read).ok() &&
               read.completed_trial_count() == 1;
      },
      absl::Seconds(60), absl::Milliseconds(100)))
      << read.ShortDebugString();
  EXPECT_EQ(read.trial_count(), 1);
  EXPECT_EQ(evoscale::testing::CountLines(runs_file), 2);  // killed, then on the other replica
}

// Without --telemetry-db, telemetry is in the replicas' PostgreSQL database: what one replica
// is told, the other answers from, and one of them (the first up) runs the compaction chore.
TEST_F(ReplicasE2eTest, TelemetryReportedToOneReplicaIsInTheOthersRecommendation) {
  std::vector<std::unique_ptr<EvoscaledProcess>> shared;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p =
        EvoscaledProcess::Start(uri_, {"--durability", "power", "--lease-seconds", "1"});
    ASSERT_TRUE(p.ok()) << p.status();
    shared.push_back(*std::move(p));
  }
  auto stub = [](const EvoscaledProcess& replica) {
    return v1::AutoscalerService::NewStub(
        grpc::CreateChannel(replica.grpc_address(), grpc::InsecureChannelCredentials()));
  };
  v1::PutWorkloadRequest put;
  put.mutable_workload()->set_name("default/web");
  put.mutable_workload()->set_max_replicas(8);
  v1::Workload made;
  grpc::ClientContext put_ctx;
  ASSERT_TRUE(stub(*shared[0])->PutWorkload(&put_ctx, put, &made).ok());
  v1::TelemetryBatch batch;
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  for (int m = 0; m < 20; ++m) {
    v1::TelemetrySample* s = batch.add_samples();
    s->set_workload("default/web");
    s->set_instance(m % 2 == 0 ? "web-0" : "web-1");
    s->mutable_time()->set_seconds(now - 3600 + 60 * m);
    s->set_cpu_cores(0.5 + 0.05 * m);
    s->set_memory_bytes(2e8 + 1e6 * m);
    s->set_qps(40 + m);
  }
  v1::ReportTelemetryResponse reported;
  {
    grpc::ClientContext ctx;
    auto writer = stub(*shared[0])->ReportTelemetry(&ctx, &reported);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }
  ASSERT_EQ(reported.accepted(), 20);

  v1::ListWorkloadsRequest list;
  v1::ListWorkloadsResponse listed;
  grpc::ClientContext list_ctx;
  ASSERT_TRUE(stub(*shared[1])->ListWorkloads(&list_ctx, list, &listed).ok());
  ASSERT_EQ(listed.workloads_size(), 1);
  EXPECT_EQ(listed.workloads(0).sample_count(), 20);
  EXPECT_EQ(listed.workloads(0).max_replicas(), 8);
  v1::GetRecommendationRequest get;
  get.set_workload("default/web");
  v1::Recommendation from_a, from_b;
  grpc::ClientContext a_ctx, b_ctx;
  ASSERT_TRUE(stub(*shared[0])->GetRecommendation(&a_ctx, get, &from_a).ok());
  ASSERT_TRUE(stub(*shared[1])->GetRecommendation(&b_ctx, get, &from_b).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(from_a, from_b))
      << "A: " << from_a.ShortDebugString() << "\nB: " << from_b.ShortDebugString();

  EXPECT_NE(evoscale::testing::HttpGet(shared[0]->http_address(), "/metrics")
                .body.find("\nevoscale_leader 1\n"),
            std::string::npos);
  EXPECT_NE(evoscale::testing::HttpGet(shared[1]->http_address(), "/metrics")
                .body.find("\nevoscale_leader 0\n"),
            std::string::npos);
}

// The CLI given both replicas keeps to the first live one.
TEST_F(ReplicasE2eTest, TheCliGivenBothReplicasMovesToTheLiveOne) {
  v1::Study study;
  ASSERT_TRUE(Create(*replicas_[0], SharedStudy("cli"), &study).ok());
  const std::string servers =
      absl::StrCat(replicas_[0]->grpc_address(), ",", replicas_[1]->grpc_address());
  auto cli = [&](const std::string& args, std::string* out) {
    const std::string path = dir_.path() + "/cli.out";
    const std::string cmd = absl::StrCat(evoscale::testing::BinDir(), "/evoscale --server ",
                                         servers, " ", args, " >", path, " 2>&1 </dev/null");
    const int status = std::system(cmd.c_str());
    std::ifstream in(path);
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  ASSERT_EQ(cli(absl::StrCat("trial suggest ", study.name(), " --client-id w --json"), &out), 0)
      << out;
  EXPECT_NE(out.find("\"studies/1/trials/1\""), std::string::npos) << out;
  replicas_[0]->Stop(SIGKILL);
  ASSERT_EQ(cli(absl::StrCat("trial suggest ", study.name(), " --client-id w --json"), &out), 0)
      << out;
  EXPECT_NE(out.find("\"studies/1/trials/1\""), std::string::npos) << out;  // the same trial
  // A host name in a list is refused as a usage error (exit 2), naming it.
  const std::string cmd = absl::StrCat(evoscale::testing::BinDir(),
                                       "/evoscale --server replica-a:1,replica-b:2 studies list >",
                                       dir_.path(), "/bad.out 2>&1 </dev/null");
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2);
  std::ifstream bad(dir_.path() + "/bad.out");
  const std::string said((std::istreambuf_iterator<char>(bad)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("\"replica-a:1\" in a list of replicas must be IP:PORT"), std::string::npos)
      << said;
}

}  // namespace
}  // namespace evoscale
