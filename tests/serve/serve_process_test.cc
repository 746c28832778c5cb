// The real evoscale-serve binary: serving the checkpoints the real evoscale-trainer wrote (one
// process, and a job of two ranks under Debian's Open MPI) with the trainer's own test AUC over
// gRPC; /healthz and /metrics; refusing a checkpoint of another layout and bad flags at start;
// reporting its telemetry to a real evoscaled, which then knows the serving workload.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/http_get.h"
#include "tests/serve/criteo_example.h"
#include "tests/serve/serve_process.h"
#include "tests/support/test_support.h"
#include "trainer/checkpoint.h"
#include "trainer/metrics.h"

namespace evoscale::testing {
namespace {

namespace fs = std::filesystem;

class ServeProcessTest : public ServeBinaryTest {
 protected:
  // Serves `dir` (the trainer's final line in `trained`): the test AUC as the trainer's, the
  // versions its step, then /healthz, /metrics and a clean stop.
  void ServeAndCompare(const std::string& dir, const Ran& trained, int ranks) {
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    absl::StatusOr<Served> served = StartServe({"--model-dir", dir});
    ASSERT_TRUE(served.ok()) << served.status();
    const int64_t steps = trained.last["steps"];
    EXPECT_EQ(served->listening["step"], steps);
    EXPECT_EQ(served->listening["ranks"], ranks);
    EXPECT_EQ(served->listening["rows"], trained.last["table"]["rows"]);
    int64_t version = -1;
    EXPECT_NEAR(ServedAuc(served->grpc, &version), trained.last["metrics"]["auc"].get<double>(), 1e-4)
        << trained.last.dump();
    EXPECT_EQ(version, steps);

    EXPECT_EQ(HttpGet(served->http, "/healthz").body, "ok\n");
    const std::string metrics = HttpGet(served->http, "/metrics").body;
    EXPECT_NE(metrics.find("evoscale_serve_examples_total 391"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("evoscale_serve_requests_total{code=\"OK\"} 4"), std::string::npos);
    EXPECT_NE(metrics.find(absl::StrCat("evoscale_serve_sparse_version ", steps)),
              std::string::npos);
    EXPECT_NE(metrics.find("evoscale_serve_staleness_seconds"), std::string::npos);
    EXPECT_EQ(HttpGet(served->http, "/nothing").status, 404);

    const int status = served->process->Stop(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
};

// Must show 1 of issue 29, one process.
TEST_F(ServeProcessTest, AOneProcessCheckpointServesTheTrainersTestAuc) {
  TempDir dir;
  const Ran trained = RunToEnd(BinDir() + "/evoscale-trainer", TrainerArgs(dir.path(), 2));
  ServeAndCompare(dir.path(), trained, 1);
}

// Must show 1 of issue 29, a job of two ranks: each rank's rows, one model.
TEST_F(ServeProcessTest, ATwoRankCheckpointServesTheJobsTestAuc) {
  if (!fs::exists(kMpirun)) GTEST_SKIP() << "no " << kMpirun << " (scripts/dev.sh installs it)";
  TempDir dir;
  std::vector<std::string> args = {"--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                                   "-np", "2", BinDir() + "/evoscale-trainer"};
  for (const std::string& a : TrainerArgs(dir.path(), 1)) args.push_back(a);
  const Ran trained = RunToEnd(kMpirun, args);
  ASSERT_TRUE(fs::exists(dir.path() + "/rank-1-of-2")) << trained.output;
  ServeAndCompare(dir.path(), trained, 2);
}

TEST_F(ServeProcessTest, ACheckpointOfAnotherLayoutAndBadFlagsStopItAtStart) {
  TempDir dir;
  const Ran trained = RunToEnd(BinDir() + "/evoscale-trainer",
                               {"--synthetic", "3000", "--batch-size", "256", "--embedding-dim",
                                "8", "--checkpoint-dir", dir.path()});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::string newest;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    newest = std::max(newest, entry.path().filename().string());
  }
  const std::string manifest = dir.path() + "/" + newest + "/MANIFEST";
  std::string text = ReadFile(manifest);
  const size_t at = text.find("\ndim=8\n");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 7, "\ndim=4\n");
  std::ofstream(manifest) << text;

  Ran refused = RunToEnd("evoscale-serve", {"--model-dir", dir.path(), "--grpc", "127.0.0.1:0",
                                            "--http", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.last.value("event", ""), "error") << refused.output;
  EXPECT_NE(refused.output.find("takes 221 inputs where the trainer's feature layout with "
                                "embedding dim 4 gives 117"),
            std::string::npos)
      << refused.output;

  Ran none = RunToEnd("evoscale-serve", {"--grpc", "127.0.0.1:0"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("--model-dir is required"), std::string::npos) << none.output;
  Ran half = RunToEnd("evoscale-serve", {"--model-dir", dir.path(), "--workload", "default/x"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_NE(half.output.find("--workload needs --evoscaled ADDR"), std::string::npos)
      << half.output;
  Ran batch = RunToEnd("evoscale-serve", {"--model-dir", dir.path(), "--max-batch", "0"});
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_NE(batch.output.find("--max-batch"), std::string::npos) << batch.output;
  Ran request = RunToEnd("evoscale-serve", {"--model-dir", dir.path(), "--cpu-request", "-1"});
  EXPECT_EQ(request.exit_code, 2);
  EXPECT_NE(request.output.find("--cpu-request"), std::string::npos) << request.output;
}

TEST_F(ServeProcessTest, ItReportsItsTelemetryToEvoscaledAsAServingWorkload) {
  TempDir dir;
  const Ran trained = RunToEnd(BinDir() + "/evoscale-trainer",
                               {"--synthetic", "3000", "--batch-size", "256", "--checkpoint-dir",
                                dir.path()});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  absl::StatusOr<std::unique_ptr<EvoscaledProcess>> evoscaled =
      EvoscaledProcess::Start(dir.path() + "/evoscale.db");
  ASSERT_TRUE(evoscaled.ok()) << evoscaled.status();
  absl::StatusOr<Served> served =
      StartServe({"--model-dir", dir.path(), "--evoscaled", (*evoscaled)->grpc_address(),
                  "--workload", "default/ranker", "--instance", "replica-0", "--report-every",
                  "1", "--cpu-request", "0.5"});
  ASSERT_TRUE(served.ok()) << served.status();
  int64_t version = 0;
  ServedAuc(served->grpc, &version);

  auto stub = v1::AutoscalerService::NewStub(
      grpc::CreateChannel((*evoscaled)->grpc_address(), grpc::InsecureChannelCredentials()));
  v1::Workload workload;
  EXPECT_TRUE(AwaitCondition([&] {
    grpc::ClientContext ctx;
    v1::GetWorkloadRequest request;
    request.set_name("default/ranker");
    return stub->GetWorkload(&ctx, request, &workload).ok() && workload.sample_count() >= 2;
  })) << workload.DebugString();
  EXPECT_EQ(workload.kind(), v1::Workload::SERVING);
  // What the dashboard reads: the replica with the versions it serves, its latency and QPS.
  nlohmann::json history;
  EXPECT_TRUE(AwaitCondition([&] {
    history = nlohmann::json::parse(
        HttpGet((*evoscaled)->http_address(), "/api/v1/workloads/default/ranker/history").body,
        nullptr, false);
    if (!history.is_object() || history["instances_now"].empty()) return false;
    for (const nlohmann::json& l : history["latency_seconds"]) {
      if (l.is_number() && l.get<double>() > 0) return true;
    }
    return false;
  })) << history.dump();
  ASSERT_EQ(history["instances_now"].size(), 1u) << history.dump();
  const nlohmann::json& replica = history["instances_now"][0];
  EXPECT_EQ(replica["instance"], "replica-0");
  EXPECT_EQ(replica["versions"]["sparse"].get<int64_t>(), version);
  EXPECT_EQ(replica["versions"]["dense"].get<int64_t>(), version);  // one checkpoint: both
}


// Online training end to end: a replica deployed from a checkpoint of the first 2,000 rows, a
// trainer that resumes from it and trains on the rest from stdin, pushing to the replica; the
// replica killed with SIGKILL mid-stream and restarted (on its port) from the newest
// checkpoint. At the end the replica answers exactly what the trainer's final model answers:
// no update lost.
TEST_F(ServeProcessTest, AStreamingTrainerKeepsAReplicaEqualToItsModelAcrossAKill) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  const std::vector<std::string> lines = DeployFirstRows(dir.path(), ckpt);
  ASSERT_FALSE(lines.empty());
  absl::StatusOr<Served> replica = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(replica.ok()) << replica.status();
  const std::string address = replica->grpc;
  const std::vector<float> frozen = Scores(address);

  Piped trainer = SpawnPiped({BinDir() + "/evoscale-trainer", "--stream", "--train", "-",
                              "--resume", "--checkpoint-dir", ckpt, "--batch-size", "256",
                              "--checkpoint-every", "4", "--serve", address, "--push-every",
                              "0.05", "--progress-every", "4"});
  auto feed = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) std::fprintf(trainer.in, "%s\n", lines[i].c_str());
    std::fflush(trainer.in);
  };
  feed(2000, 4000);
  EXPECT_TRUE(AwaitCondition([&] { return ReplicaVersion(address) >= 14; }))
      << ReplicaVersion(address);
  // Down mid-stream: the trainer keeps training and checkpointing meanwhile.
  replica->process->Stop(SIGKILL);
  feed(4000, 5600);
  // Back on the same address, from the newest checkpoint; the trainer catches it up.
  absl::StatusOr<Served> back = absl::UnavailableError("not started");
  EXPECT_TRUE(AwaitCondition([&] {
    back = StartServe({"--model-dir", ckpt, "--grpc", address});
    return back.ok();
  }, absl::Seconds(20), absl::Milliseconds(100)));
  ASSERT_TRUE(back.ok()) << back.status();
  feed(5600, lines.size());
  std::string out;
  const nlohmann::json final_line = EndStream(trainer, &out);
  ASSERT_TRUE(final_line.is_object()) << out;
  EXPECT_GE(final_line["serve"]["catch_ups"].get<int>(), 1) << final_line.dump();
  EXPECT_EQ(final_line["serve"]["replicas_behind"], 0) << final_line.dump();
  EXPECT_EQ(ReplicaVersion(address), final_line["steps"].get<int64_t>());

  // The trainer's final model, from its last checkpoint, against the replica that lived
  // through the kill: every probability the same.
  absl::StatusOr<Served> reference = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<float> want = Scores(reference->grpc), got = Scores(address);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(Differing(got, want), 0) << "of " << got.size();
  EXPECT_GT(Differing(got, frozen), int(got.size()) / 2)
      << "the online model is not the deployed one";
}

// Rollback in one command: `evoscale-serve rollback` refuses a step that is not a checkpoint,
// changing nothing; for one that is, it moves the newer checkpoints aside and the replica then
// answers exactly as a replica started on that checkpoint; a trainer resumed from the folder
// continues from the rolled-back step and its pushes reach the replica again.
TEST_F(ServeProcessTest, RollbackServesAnEarlierCheckpointAndTheResumedTrainerPushesOnFromIt) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  const std::string serve = BinDir() + "/evoscale-serve";
  const Ran trained =
      RunToEnd(BinDir() + "/evoscale-trainer",
               {"--train", kData + "train.tsv", "--batch-size", "256", "--holdout-fraction", "0",
                "--checkpoint-every", "10", "--checkpoint-dir", ckpt});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const int64_t steps = trained.last["steps"].get<int64_t>();
  ASSERT_GT(steps, 20);
  absl::StatusOr<Served> replica = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(replica.ok()) << replica.status();
  const std::string address = replica->grpc;
  const std::vector<float> newest = Scores(address);
  ASSERT_EQ(ReplicaVersion(address), steps);
  auto count = [](const std::string& folder) {
    return std::distance(fs::directory_iterator(folder), fs::directory_iterator());
  };
  const auto checkpoints = count(ckpt);

  const Ran refused =
      RunToEnd(serve, {"rollback", "--model-dir", ckpt, "--to", "15", "--replicas", address},
               /*merge_stderr=*/true);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("--to 15: " + ckpt + " holds no complete checkpoint of that step"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(count(ckpt), checkpoints);
  EXPECT_EQ(ReplicaVersion(address), steps);

  const Ran rolled =
      RunToEnd(serve, {"rollback", "--model-dir", ckpt, "--to", "20", "--replicas", address});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.output;
  EXPECT_EQ(rolled.last["event"], "rolled_back") << rolled.output;
  EXPECT_EQ(rolled.last["replicas_reloaded"], 1) << rolled.output;
  EXPECT_EQ(rolled.last["moved"].get<int64_t>(), checkpoints - 2) << rolled.output;  // 10, 20 stay
  EXPECT_EQ(count(ckpt), 2);
  EXPECT_EQ(ReplicaVersion(address), 20);
  absl::StatusOr<Served> reference = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ(reference->listening["step"], 20);
  const std::vector<float> want = Scores(reference->grpc), got = Scores(address);
  EXPECT_EQ(got, want);
  EXPECT_NE(got, newest);

  // The trainer, resumed from the folder, goes on from step 20 to the end of its file again
  // (a run from step 0 would write checkpoints 10 and 20 on its way), and pushes to the
  // replica.
  const Ran resumed =
      RunToEnd(BinDir() + "/evoscale-trainer",
               {"--train", kData + "train.tsv", "--batch-size", "256", "--holdout-fraction", "0",
                "--checkpoint-every", "10", "--resume", "--checkpoint-dir", ckpt, "--serve",
                address});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  for (const int step : {10, 20}) {
    EXPECT_EQ(resumed.output.find(absl::StrCat("\"event\":\"checkpoint\",\"step\":", step, ",")),
              std::string::npos)
        << resumed.output;
  }
  EXPECT_EQ(resumed.last["steps"], steps) << resumed.output;
  EXPECT_EQ(ReplicaVersion(address), steps);
}

// Ids the trainer evicts reach the replica too: a streaming trainer that expires rows after 3
// steps, pushing to a replica; at the end the replica answers exactly what a replica loaded
// from the trainer's final checkpoint answers (without the evicted ids, a replica would go on
// serving their last values).
TEST_F(ServeProcessTest, EvictedIdsArePushedSoTheReplicaMatchesTheTrainersModel) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  const std::vector<std::string> lines = DeployFirstRows(dir.path(), ckpt);
  ASSERT_FALSE(lines.empty());
  absl::StatusOr<Served> replica = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(replica.ok()) << replica.status();
  const std::string address = replica->grpc;

  Piped trainer = SpawnPiped({BinDir() + "/evoscale-trainer", "--stream", "--train", "-",
                              "--resume", "--checkpoint-dir", ckpt, "--batch-size", "256",
                              "--expire-after-steps", "3", "--evict-every", "1", "--serve",
                              address, "--push-every", "0.05"});
  for (size_t i = 2000; i < lines.size(); ++i) std::fprintf(trainer.in, "%s\n", lines[i].c_str());
  std::string out;
  const nlohmann::json final_line = EndStream(trainer, &out);
  ASSERT_TRUE(final_line.is_object()) << out;
  EXPECT_GT(final_line["table"]["evicted"].get<int64_t>(), 1000) << final_line.dump();
  EXPECT_EQ(final_line["serve"]["replicas_behind"], 0) << final_line.dump();

  absl::StatusOr<Served> reference = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string metrics = HttpGet(replica->http, "/metrics").body;
  EXPECT_NE(metrics.find(absl::StrCat("evoscale_serve_rows ",
                                      reference->listening["rows"].get<int64_t>(), "\n")),
            std::string::npos)
      << reference->listening.dump() << " " << final_line["table"].dump();
  const std::vector<float> want = Scores(reference->grpc), got = Scores(address);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(Differing(got, want), 0) << "of " << got.size();
}

}  // namespace
}  // namespace evoscale::testing
