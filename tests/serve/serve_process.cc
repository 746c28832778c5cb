#include "tests/serve/serve_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/serve/criteo_example.h"
#include "tests/support/test_support.h"
#include "trainer/metrics.h"

namespace evoscale::testing {

const std::string kData = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";

// Runs `binary args...` to its end; its last stdout line as JSON (null if none) and exit code.

Ran RunToEnd(const std::string& binary, const std::vector<std::string>& args,
             bool merge_stderr) {
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

std::vector<float> Scores(const std::string& address, int64_t* version) {
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

double ServedAuc(const std::string& address, int64_t* version) {
  std::ifstream in(kData + "test.tsv");
  std::vector<float> labels;
  for (std::string line; std::getline(in, line);) labels.push_back(line[0] == '1' ? 1.0f : 0.0f);
  const std::vector<float> scores = Scores(address, version);
  return scores.size() == labels.size() ? trainer::ExactAuc(scores, labels) : -1;
}

// A child with a pipe to its stdin (the stream) and one from its stdout.

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

void ServeBinaryTest::SetUp() {
  if (!std::filesystem::exists(BinDir() + "/evoscale-serve")) {
    GTEST_SKIP() << "evoscale-serve not built";
  }
  if (!std::filesystem::exists(kData + "train.tsv")) GTEST_SKIP() << "no " << kData;
}

}  // namespace evoscale::testing
