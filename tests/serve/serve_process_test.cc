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
#include "tests/support/test_support.h"
#include "trainer/checkpoint.h"
#include "trainer/metrics.h"

namespace evoscale::testing {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";
const char kMpirun[] = "/usr/bin/mpirun";

// Runs `binary args...` to its end; its last stdout line as JSON (null if none) and exit code.
struct Ran {
  nlohmann::json last;
  std::string output;
  int exit_code = -1;
};

Ran RunToEnd(const std::string& binary, const std::vector<std::string>& args,
             bool merge_stderr = false) {
  Ran ran;
  absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p =
      EvoscaledProcess::Spawn(args, merge_stderr, binary);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return ran;
  std::string last;
  for (;;) {
    absl::StatusOr<std::string> line = (*p)->ReadLine(std::chrono::seconds(240));
    if (!line.ok()) break;
    ran.output += *line + "\n";
    last = *line;
  }
  const int status = (*p)->Stop(0);
  if (WIFEXITED(status)) ran.exit_code = WEXITSTATUS(status);
  ran.last = nlohmann::json::parse(last, nullptr, false);
  return ran;
}

std::vector<std::string> TrainerArgs(const std::string& dir, int threads) {
  return {"--train", kData + "train.tsv", "--test", kData + "test.tsv", "--epochs", "2",
          "--batch-size", "256", "--seed", "1", "--threads", std::to_string(threads),
          "--checkpoint-dir", dir, "--checkpoint-every", "20"};
}

// A started evoscale-serve and the addresses of its listening line.
struct Served {
  std::unique_ptr<EvoscaledProcess> process;
  nlohmann::json listening;
  std::string grpc, http;
};

absl::StatusOr<Served> StartServe(const std::vector<std::string>& extra) {
  std::vector<std::string> args = extra;
  for (const char* flag : {"--grpc", "--http"}) {
    if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
      args.insert(args.end(), {flag, "127.0.0.1:0"});
    }
  }
  absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p =
      EvoscaledProcess::Spawn(args, false, "evoscale-serve");
  if (!p.ok()) return p.status();
  absl::StatusOr<std::string> line = (*p)->ReadLine(std::chrono::seconds(60));
  if (!line.ok()) return line.status();
  Served s;
  s.listening = nlohmann::json::parse(*line, nullptr, false);
  if (!s.listening.is_object() || s.listening.value("event", "") != "listening") {
    return absl::InternalError("evoscale-serve said: " + *line);
  }
  s.grpc = s.listening["grpc"];
  s.http = s.listening["http"];
  s.process = *std::move(p);
  return s;
}

// Every probability the replica at `address` answers for the test file, 100 examples a call;
// `version`, when given, the sparse version of the last answer (and each answer's dense version
// must be its sparse one).
std::vector<float> Scores(const std::string& address, int64_t* version = nullptr) {
  auto stub = v1::PredictionService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::ifstream in(kData + "test.tsv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<float> scores;
  for (size_t i0 = 0; i0 < lines.size(); i0 += 100) {
    v1::PredictRequest request;
    for (size_t i = i0; i < std::min(lines.size(), i0 + 100); ++i) {
      *request.add_examples() = ExampleOf(lines[i]);
    }
    v1::PredictResponse response;
    grpc::ClientContext ctx;
    const grpc::Status st = stub->Predict(&ctx, request, &response);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (!st.ok()) return {};
    scores.insert(scores.end(), response.probabilities().begin(), response.probabilities().end());
    if (version != nullptr) {
      *version = response.sparse_version();
      EXPECT_EQ(response.dense_version(), response.sparse_version());
    }
  }
  return scores;
}

// The AUC of the replica's answers for the test file (-1 when it did not answer them all).
double ServedAuc(const std::string& address, int64_t* version) {
  std::ifstream in(kData + "test.tsv");
  std::vector<float> labels;
  for (std::string line; std::getline(in, line);) labels.push_back(line[0] == '1' ? 1.0f : 0.0f);
  const std::vector<float> scores = Scores(address, version);
  return scores.size() == labels.size() ? trainer::ExactAuc(scores, labels) : -1;
}

class ServeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(BinDir() + "/evoscale-serve")) GTEST_SKIP() << "evoscale-serve not built";
    if (!fs::exists(kData + "train.tsv")) GTEST_SKIP() << "no " << kData;
  }

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


// A child with a pipe to its stdin (the stream) and one from its stdout.
struct Piped {
  pid_t pid = -1;
  FILE* in = nullptr;
  int out = -1;
};

Piped SpawnPiped(const std::vector<std::string>& args) {
  // Close-on-exec: the replicas started later must not hold the stream open (its end is EOF).
  int in[2], out[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  Piped p;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p.in = fdopen(in[1], "w");
  p.out = out[0];
  return p;
}

// Online training's start: criteo-8k's training lines, the first 2,000 trained into `ckpt`
// (what a replica is deployed from); empty, after a failure, when that training failed.
std::vector<std::string> DeployFirstRows(const std::string& dir, const std::string& ckpt) {
  std::ifstream train(kData + "train.tsv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(train, line);) lines.push_back(line);
  {
    std::ofstream first(dir + "/first.tsv");
    for (int i = 0; i < 2000; ++i) first << lines[i] << "\n";
  }
  const Ran deployed = RunToEnd(BinDir() + "/evoscale-trainer",
                                {"--train", dir + "/first.tsv", "--batch-size", "256",
                                 "--holdout-fraction", "0", "--checkpoint-dir", ckpt});
  EXPECT_EQ(deployed.exit_code, 0) << deployed.output;
  return deployed.exit_code == 0 ? lines : std::vector<std::string>{};
}

// Ends a streaming trainer's input and waits for it: its final line (not an object, after a
// failure, when it did not exit 0 or printed none); `out`, everything it printed.
nlohmann::json EndStream(Piped& trainer, std::string* out) {
  std::fclose(trainer.in);  // the stream ends: the last push, the last checkpoint
  char chunk[4096];
  for (ssize_t n; (n = read(trainer.out, chunk, sizeof chunk)) > 0;) out->append(chunk, size_t(n));
  close(trainer.out);
  int status = 0;
  waitpid(trainer.pid, &status, 0);
  const size_t at = out->rfind("{\"event\":\"final\"");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0 && at != std::string::npos) << *out;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || at == std::string::npos) return {};
  return nlohmann::json::parse(out->substr(at), nullptr, false);
}

// How many of two equally long lists of answers differ.
int Differing(const std::vector<float>& a, const std::vector<float>& b) {
  int differ = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) differ += a[i] != b[i];
  return differ;
}

int64_t ReplicaVersion(const std::string& address) {
  auto stub = v1::ModelSyncService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::SyncState state;
  return stub->GetSyncState(&ctx, v1::GetSyncStateRequest(), &state).ok()
             ? state.sparse_version() : -1;
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
