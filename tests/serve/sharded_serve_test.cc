// A table sharded across real evoscale-serve processes: two shard replicas (--shard I/2) and a
// front (--shards) fed by a real streaming evoscale-trainer (--serve FRONT,SHARD0,SHARD1), a
// shard killed with SIGKILL mid-stream and restarted; at the end the front answers exactly what
// one replica of the trainer's final checkpoint answers. And the flags and layouts a sharded
// fleet can get wrong, refused at start naming them.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/http_get.h"
#include "tests/serve/criteo_example.h"
#include "tests/serve/serve_process.h"
#include "tests/support/test_support.h"

namespace evoscale::testing {
namespace {

using ShardedServeTest = ServeBinaryTest;

TEST_F(ShardedServeTest, AStreamingTrainerKeepsShardsAndTheirFrontEqualToItsModelAcrossAKill) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  const std::vector<std::string> lines = DeployFirstRows(dir.path(), ckpt);
  ASSERT_FALSE(lines.empty());
  absl::StatusOr<Served> shard0 = StartServe({"--model-dir", ckpt, "--shard", "0/2"});
  absl::StatusOr<Served> shard1 = StartServe({"--model-dir", ckpt, "--shard", "1/2"});
  ASSERT_TRUE(shard0.ok()) << shard0.status();
  ASSERT_TRUE(shard1.ok()) << shard1.status();
  EXPECT_EQ(shard1->listening["role"], "shard");
  EXPECT_EQ(shard1->listening["shard"], "1/2");
  absl::StatusOr<Served> front =
      StartServe({"--model-dir", ckpt, "--shards", shard0->grpc + "," + shard1->grpc});
  ASSERT_TRUE(front.ok()) << front.status();
  EXPECT_EQ(front->listening["role"], "front");
  EXPECT_EQ(front->listening["rows"], 0);
  const std::string s1 = shard1->grpc;
  const std::vector<float> frozen = Scores(front->grpc);

  // One example asked of a replica: its answer's status.
  const auto ask = [&](const std::string& address) {
    auto stub = v1::PredictionService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    v1::PredictRequest request;
    for (int i = 0; i < 30; ++i) *request.add_examples() = ExampleOf(lines[i]);
    v1::PredictResponse response;
    grpc::ClientContext ctx;
    return stub->Predict(&ctx, request, &response);
  };
  // A shard answers no Predict.
  const grpc::Status on_shard = ask(shard0->grpc);
  EXPECT_EQ(on_shard.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << on_shard.error_message();
  EXPECT_NE(on_shard.error_message().find("holds shard 0 of 2 of the rows: ask a front"),
            std::string::npos)
      << on_shard.error_message();

  Piped trainer = SpawnPiped({BinDir() + "/evoscale-trainer", "--stream", "--train", "-",
                              "--resume", "--checkpoint-dir", ckpt, "--batch-size", "256",
                              "--checkpoint-every", "4", "--serve",
                              front->grpc + "," + shard0->grpc + "," + s1, "--push-every", "0.05"});
  auto feed = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) std::fprintf(trainer.in, "%s\n", lines[i].c_str());
    std::fflush(trainer.in);
  };
  feed(2000, 4000);
  EXPECT_TRUE(AwaitCondition([&] { return ReplicaVersion(s1) >= 14; })) << ReplicaVersion(s1);
  shard1->process->Stop(SIGKILL);
  const grpc::Status down = ask(front->grpc);  // meanwhile, naming the shard down
  EXPECT_EQ(down.error_code(), grpc::StatusCode::UNAVAILABLE) << down.error_message();
  EXPECT_NE(down.error_message().find("shard 1 (" + s1 + ")"), std::string::npos)
      << down.error_message();
  feed(4000, 5600);
  absl::StatusOr<Served> back = absl::UnavailableError("not started");
  EXPECT_TRUE(AwaitCondition([&] {
    back = StartServe({"--model-dir", ckpt, "--shard", "1/2", "--grpc", s1});
    return back.ok();
  }, absl::Seconds(20), absl::Milliseconds(100)));
  ASSERT_TRUE(back.ok()) << back.status();
  // The front reconnects to it within about a second.
  EXPECT_TRUE(AwaitCondition([&] { return ask(front->grpc).ok(); }, absl::Seconds(10),
                             absl::Milliseconds(50)));
  feed(5600, lines.size());
  std::string out;
  const nlohmann::json final_line = EndStream(trainer, &out);
  ASSERT_TRUE(final_line.is_object()) << out;
  EXPECT_GE(final_line["serve"]["catch_ups"].get<int>(), 1) << final_line.dump();
  EXPECT_EQ(final_line["serve"]["replicas_behind"], 0) << final_line.dump();
  const int64_t steps = final_line["steps"].get<int64_t>();
  EXPECT_EQ(ReplicaVersion(s1), steps);
  EXPECT_EQ(ReplicaVersion(shard0->grpc), steps);

  // Each shard was sent only its own rows (none refused), and holds about half of them.
  absl::StatusOr<Served> reference = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (const std::string& http : {shard0->http, back->http}) {
    const std::string metrics = HttpGet(http, "/metrics").body;
    EXPECT_EQ(metrics.find("result=\"invalid\""), std::string::npos) << metrics;
  }
  int64_t version = -1;
  const std::vector<float> want = Scores(reference->grpc), got = Scores(front->grpc, &version);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(Differing(got, want), 0) << "of " << got.size();
  EXPECT_EQ(version, steps);
  EXPECT_GT(Differing(got, frozen), int(got.size()) / 2) << "the online model is not the deployed one";
}

// `evoscale-serve rollback` over a sharded fleet: each shard reloads its own part of the
// earlier checkpoint and the front its MLP; the front then answers as one replica of that
// checkpoint does.
TEST_F(ShardedServeTest, RollbackReloadsEachShardsPartAndTheFrontsMlp) {
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  const Ran trained =
      RunToEnd(BinDir() + "/evoscale-trainer",
               {"--train", kData + "train.tsv", "--batch-size", "256", "--holdout-fraction", "0",
                "--checkpoint-every", "10", "--checkpoint-dir", ckpt});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  absl::StatusOr<Served> shard0 = StartServe({"--model-dir", ckpt, "--shard", "0/2"});
  absl::StatusOr<Served> shard1 = StartServe({"--model-dir", ckpt, "--shard", "1/2"});
  ASSERT_TRUE(shard0.ok() && shard1.ok());
  absl::StatusOr<Served> front =
      StartServe({"--model-dir", ckpt, "--shards", shard0->grpc + "," + shard1->grpc});
  ASSERT_TRUE(front.ok()) << front.status();
  const std::vector<float> newest = Scores(front->grpc);

  const Ran rolled = RunToEnd(BinDir() + "/evoscale-serve",
                              {"rollback", "--model-dir", ckpt, "--to", "20", "--replicas",
                               front->grpc + "," + shard0->grpc + "," + shard1->grpc});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.output;
  EXPECT_EQ(rolled.last["replicas_reloaded"], 3) << rolled.output;
  absl::StatusOr<Served> reference = StartServe({"--model-dir", ckpt});
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ(reference->listening["step"], 20);
  int64_t version = -1;
  const std::vector<float> want = Scores(reference->grpc), got = Scores(front->grpc, &version);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(Differing(got, want), 0) << "of " << got.size();
  EXPECT_NE(got, newest);
  EXPECT_EQ(ReplicaVersion(shard0->grpc), 20);
  EXPECT_EQ(ReplicaVersion(shard1->grpc), 20);
}

TEST_F(ShardedServeTest, ShardFlagsAndLayoutsAFleetCanGetWrongStopItAtStart) {
  TempDir dir;
  const Ran trained = RunToEnd(BinDir() + "/evoscale-trainer",
                               {"--synthetic", "3000", "--batch-size", "256", "--checkpoint-dir",
                                dir.path()});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto refused = [&](std::vector<std::string> args, int code, const std::string& says) {
    args.insert(args.begin(), {"--model-dir", dir.path(), "--grpc", "127.0.0.1:0", "--http",
                               "127.0.0.1:0"});
    const Ran ran = RunToEnd("evoscale-serve", args, /*merge_stderr=*/true);
    EXPECT_EQ(ran.exit_code, code) << ran.output;
    EXPECT_NE(ran.output.find(says), std::string::npos) << ran.output;
  };
  refused({"--shard", "2/2"}, 2, "--shard 2/2: want I/N with 0 <= I < N");
  refused({"--shard", "one"}, 2, "--shard one: want I/N");
  refused({"--shard", "0/2", "--shards", "127.0.0.1:1"}, 2, "a shard or a front, not both");
  refused({"--memory-budget", "12Q"}, 2, "--memory-budget 12Q: want a positive size");
  refused({"--memory-budget", "64KiB"}, 1, "--memory-budget 65536: passed after");

  absl::StatusOr<Served> shard0 = StartServe({"--model-dir", dir.path(), "--shard", "0/2"});
  absl::StatusOr<Served> shard1 = StartServe({"--model-dir", dir.path(), "--shard", "1/2"});
  ASSERT_TRUE(shard0.ok()) << shard0.status();
  ASSERT_TRUE(shard1.ok()) << shard1.status();
  refused({"--shards", shard1->grpc + "," + shard0->grpc}, 1,
          "--shards " + shard1->grpc + " is listed as shard 0 of 2 but holds shard 1 of 2");
  refused({"--shards", shard0->grpc}, 1, "is listed as shard 0 of 1 but holds shard 0 of 2");
  shard1->process->Stop(SIGTERM);
  refused({"--shards", shard0->grpc + "," + shard1->grpc, "--shard-wait", "0.5"}, 1,
          "--shards " + shard1->grpc + " (shard 1 of 2)");
}

}  // namespace
}  // namespace evoscale::testing
