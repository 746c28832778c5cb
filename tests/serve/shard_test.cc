// A table sharded across replicas by id hash (evoscale-serve --shard I/N) behind a front
// (--shards): each shard loads exactly its part of a real checkpoint of criteo-8k, the front
// answers bit for bit what one replica of the whole model answers, over real gRPC servers on
// port 0; pushes to a shard reach the front's answers; and what is not a shard's (a push or
// lookup of another shard's id, Predict on a shard, shards listed out of order, a shard down,
// a memory budget passed) is refused naming it.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "serve/cq_tag.h"
#include "serve/embedding_service.h"
#include "serve/model.h"
#include "serve/model_sync_service.h"
#include "serve/predict_server.h"
#include "serve/serve_metrics.h"
#include "serve/shard_client.h"
#include "trainer/criteo_reader.h"
#include "trainer/feature_id.h"
#include "trainer/model_sink.h"
#include "trainer/trainer.h"

namespace evoscale::serve {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";
constexpr int kShardCount = 3;

// One shard replica in this process: its model and a real server with its services.
struct ShardReplica {
  std::unique_ptr<Model> model;
  ServeMetrics metrics;
  std::unique_ptr<EmbeddingService> lookups;
  std::unique_ptr<ModelSyncService> sync;
  std::unique_ptr<PredictServer> server;
  std::string address;
};

class ShardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kData + "train.tsv")) return;
    std::string tmpl = (fs::temp_directory_path() / "shard_test.XXXXXX").string();
    dir_ = new std::string(mkdtemp(tmpl.data()));
    trainer::TrainerConfig config;
    config.train_path = kData + "train.tsv";
    config.batch_size = 256;
    config.holdout_fraction = 0;
    config.checkpoint_dir = *dir_;
    const absl::Status trained = trainer::RunTrainer(config, [](std::string_view) {});
    ASSERT_TRUE(trained.ok()) << trained;
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "no " << kData;
    absl::StatusOr<std::unique_ptr<Model>> whole = Model::Load(*dir_);
    ASSERT_TRUE(whole.ok()) << whole.status();
    whole_ = *std::move(whole);
    for (int i = 0; i < kShardCount; ++i) {
      auto replica = std::make_unique<ShardReplica>();
      absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(*dir_, {i, kShardCount});
      ASSERT_TRUE(model.ok()) << model.status();
      replica->model = *std::move(model);
      replica->lookups = std::make_unique<EmbeddingService>(replica->model.get(), &replica->metrics);
      replica->sync = std::make_unique<ModelSyncService>(replica->model.get(), &replica->metrics);
      absl::StatusOr<std::unique_ptr<PredictServer>> server = PredictServer::Start(
          "127.0.0.1:0",
          [](const v1::PredictRequest&, v1::PredictResponse*) { return grpc::Status::OK; }, 1,
          64 << 20, {replica->sync.get()},
          [lookups = replica->lookups.get()](const v1::LookupRequest& request,
                                             v1::LookupResponse* response) {
            return lookups->Handle(request, response);
          });
      ASSERT_TRUE(server.ok()) << server.status();
      replica->server = *std::move(server);
      replica->address = absl::StrCat("127.0.0.1:", replica->server->port());
      addresses_.push_back(replica->address);
      shards_.push_back(std::move(replica));
    }
    auto source = trainer::OpenCriteoFile(kData + "test.tsv", 1);
    ASSERT_TRUE(source.ok()) << source.status();
    float label, dense[trainer::kNumDense];
    uint64_t fids[trainer::kNumCategorical];
    int64_t row;
    while (true) {
      absl::StatusOr<bool> more = (*source)->Next(&label, dense, fids, &row);
      if (!more.ok() || !*more) break;
      dense_.insert(dense_.end(), dense, dense + trainer::kNumDense);
      fids_.insert(fids_.end(), fids, fids + trainer::kNumCategorical);
    }
    n_ = int(fids_.size() / trainer::kNumCategorical);
  }

  absl::StatusOr<std::unique_ptr<Model>> Front(const std::vector<std::string>& addresses,
                                               std::chrono::milliseconds wait =
                                                   std::chrono::seconds(5)) {
    return Model::LoadFront(*dir_, [&](const ModelInfo& info)
                                       -> absl::StatusOr<std::unique_ptr<RowSource>> {
      return ShardClient::Connect(addresses, info.dim, wait);
    });
  }

  static std::string* dir_;
  std::unique_ptr<Model> whole_;
  std::vector<std::unique_ptr<ShardReplica>> shards_;
  std::vector<std::string> addresses_;
  std::vector<float> dense_;
  std::vector<uint64_t> fids_;
  int n_ = 0;
};

std::string* ShardTest::dir_ = nullptr;

TEST_F(ShardTest, EachShardHoldsItsPartAndTheFrontAnswersAsTheWholeModel) {
  // The shards' rows are the whole model's, each row in the shard its id hashes to, once.
  std::map<uint64_t, std::vector<float>> whole;
  const int dim = whole_->info().dim;
  whole_->ForEachRow([&](uint64_t key, const float* e) { whole[key].assign(e, e + dim); });
  size_t held = 0;
  for (int i = 0; i < kShardCount; ++i) {
    const Model& shard = *shards_[i]->model;
    EXPECT_EQ(shard.info().placement.shard, i);
    EXPECT_LT(shard.info().rows, whole.size() * 2 / kShardCount) << "shard " << i;
    held += shard.info().rows;
    shard.ForEachRow([&](uint64_t key, const float* e) {
      EXPECT_EQ(trainer::ShardOfFid(key, kShardCount), uint32_t(i)) << key;
      const auto it = whole.find(key);
      ASSERT_NE(it, whole.end()) << key;
      EXPECT_EQ(std::vector<float>(e, e + dim), it->second) << key;
    });
  }
  EXPECT_EQ(held, whole.size());

  absl::StatusOr<std::unique_ptr<Model>> front = Front(addresses_);
  ASSERT_TRUE(front.ok()) << front.status();
  EXPECT_EQ((*front)->info().rows, 0u);
  EXPECT_TRUE((*front)->info().placement.front);
  std::vector<float> want(n_), got(n_);
  ASSERT_TRUE(whole_->Predict(dense_.data(), fids_.data(), n_, want.data()).ok());
  ASSERT_TRUE((*front)->Predict(dense_.data(), fids_.data(), n_, got.data()).ok());
  EXPECT_EQ(got, want);
  for (int i : {0, 5, n_ - 1}) {  // alone, as the whole model answers it alone
    float one = 0, whole_one = 0;
    ASSERT_TRUE((*front)->Predict(&dense_[size_t(i) * trainer::kNumDense],
                                  &fids_[size_t(i) * trainer::kNumCategorical], 1, &one)
                    .ok());
    ASSERT_TRUE(whole_->Predict(&dense_[size_t(i) * trainer::kNumDense],
                                &fids_[size_t(i) * trainer::kNumCategorical], 1, &whole_one)
                    .ok());
    EXPECT_EQ(one, whole_one) << i;
  }
  // A shard answers no Predict: its front does.
  const absl::Status refused = shards_[0]->model->Predict(dense_.data(), fids_.data(), 1, &got[0]);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("holds shard 0 of 3 of the rows: ask a front"),
            std::string::npos)
      << refused;
}

TEST_F(ShardTest, APushToAShardReachesTheFrontsAnswersAndVersion) {
  absl::StatusOr<std::unique_ptr<Model>> front = Front(addresses_);
  ASSERT_TRUE(front.ok()) << front.status();
  const int64_t step = whole_->info().step;
  float before = 0, after = 0;
  ASSERT_TRUE((*front)->Predict(dense_.data(), fids_.data(), 1, &before).ok());
  EXPECT_EQ((*front)->sparse_version(), step);
  // Example 0's ids, each pushed to the shard that holds it, as a trainer's sink sends them.
  for (int i = 0; i < kShardCount; ++i) {
    std::vector<uint64_t> keys;
    for (int f = 0; f < trainer::kNumCategorical; ++f) {
      if (trainer::ShardOfFid(fids_[f], kShardCount) == uint32_t(i)) keys.push_back(fids_[f]);
    }
    const std::vector<float> values(keys.size() * 16, 0.5f);
    RowUpdate u{"", step + 1 + i, 16, keys.data(), keys.size(), values.data(), values.size()};
    absl::StatusOr<size_t> applied = shards_[i]->model->ApplyRows(u);
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(*applied, keys.size());
  }
  ASSERT_TRUE((*front)->Predict(dense_.data(), fids_.data(), 1, &after).ok());
  EXPECT_NE(after, before);
  // The front answers the oldest of its shards' versions.
  EXPECT_EQ((*front)->sparse_version(), step + 1);

  // Another shard's id is refused whole, naming it; nothing of the push applies.
  const uint64_t mine = fids_[0];
  const uint32_t owner = trainer::ShardOfFid(mine, kShardCount);
  Model& other = *shards_[(owner + 1) % kShardCount]->model;
  const std::vector<float> values(16, 9.0f);
  const RowUpdate foreign{"", step + 10, 16, &mine, 1, values.data(), values.size()};
  const size_t rows = other.rows();
  const std::map<std::string, int64_t> versions = other.source_versions();
  const absl::Status status = other.ApplyRows(foreign).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(absl::StrCat("keys[0]: id ", mine, " is in shard ", owner,
                                               " of 3; this replica holds shard ",
                                               (owner + 1) % kShardCount)),
            std::string::npos)
      << status;
  EXPECT_EQ(other.rows(), rows);
  EXPECT_EQ(other.source_versions(), versions);
  std::vector<float> out(16);
  const absl::Status lookup = other.Lookup(&mine, 1, out.data());
  EXPECT_EQ(lookup.code(), absl::StatusCode::kInvalidArgument) << lookup;
  // A front holds no rows: a push to it is refused.
  const RowUpdate to_front{"", step + 10, 16, &mine, 1, values.data(), values.size()};
  EXPECT_EQ((*front)->ApplyRows(to_front).status().code(), absl::StatusCode::kFailedPrecondition);
}

// The trainer's own client (serve/push_client.cc, as evoscale-trainer --serve links it): a
// version of 20,000 rows reaches a shard in parts of at most 2,048, only the shard's own rows,
// and the version moves once all of them are in; to a front it sends no rows.
TEST_F(ShardTest, TheTrainersClientSendsAShardOnlyItsRowsInParts) {
  const int64_t step = whole_->info().step;
  trainer::RowPush push;
  push.version = step + 3;
  push.dim = 16;
  for (uint64_t v = 0; v < 20000; ++v) {
    push.keys.push_back(trainer::MakeFid(uint32_t(v % 26), 0xABC00000ull + v));
    push.values.insert(push.values.end(), 16, 0.25f);
  }
  ShardReplica& target = *shards_[1];
  size_t mine = 0;
  for (uint64_t key : push.keys) mine += trainer::ShardOfFid(key, kShardCount) == 1;
  const size_t rows = target.model->rows();
  absl::StatusOr<std::unique_ptr<trainer::ModelSink>> sink =
      trainer::ConnectModelSink(target.address, "");
  ASSERT_TRUE(sink.ok()) << sink.status();
  absl::StatusOr<int64_t> holds = (*sink)->AppliedVersion();
  ASSERT_TRUE(holds.ok()) << holds.status();
  EXPECT_EQ(*holds, step);
  ASSERT_TRUE((*sink)->PushRows(push).ok());
  EXPECT_EQ(target.model->rows(), rows + mine);
  EXPECT_EQ(target.model->sparse_version(), step + 3);
  const auto parts = [](size_t rows) { return (rows + 2047) / 2048; };
  const std::string metrics = target.metrics.Scrape();
  EXPECT_NE(metrics.find(absl::StrCat("evoscale_serve_pushes_total{kind=\"rows\",result=\"applied\"} ",
                                      parts(mine), "\n")),
            std::string::npos)
      << mine << " rows of shard 1: " << metrics;
  EXPECT_EQ(metrics.find("result=\"invalid\""), std::string::npos) << metrics;

  // The whole model's replica takes the same version in 10 parts.
  ServeMetrics whole_metrics;
  ModelSyncService whole_sync(whole_.get(), &whole_metrics);
  absl::StatusOr<std::unique_ptr<PredictServer>> server = PredictServer::Start(
      "127.0.0.1:0",
      [](const v1::PredictRequest&, v1::PredictResponse*) { return grpc::Status::OK; }, 1,
      64 << 20, {&whole_sync});
  ASSERT_TRUE(server.ok()) << server.status();
  sink = trainer::ConnectModelSink(absl::StrCat("127.0.0.1:", (*server)->port()), "");
  ASSERT_TRUE(sink.ok() && (*sink)->AppliedVersion().ok());
  ASSERT_TRUE((*sink)->PushRows(push).ok());
  EXPECT_NE(whole_metrics.Scrape().find(absl::StrCat(
                "evoscale_serve_pushes_total{kind=\"rows\",result=\"applied\"} ", parts(20000),
                "\n")),
            std::string::npos)
      << whole_metrics.Scrape();
  EXPECT_EQ(whole_->sparse_version(), step + 3);
}

// From one completion queue (a front's server thread) at most one lookup per shard is in
// flight: three calls' keys started back to back reach each shard in two lookups (the first
// call's at once, the other two's together when it answers), each call answered with its own
// rows, as the shards hold them.
TEST_F(ShardTest, LookupsStartedWhileOneIsOutGoTogether) {
  absl::StatusOr<std::unique_ptr<ShardClient>> client =
      ShardClient::Connect(addresses_, 16, std::chrono::seconds(5));
  ASSERT_TRUE(client.ok()) << client.status();
  const size_t keys = 3 * trainer::kNumCategorical;
  std::vector<float> got(keys * 16, -1.0f), want(keys * 16);
  ASSERT_TRUE(shards_.size() == 3u);
  grpc::CompletionQueue cq;
  int done = 0;
  for (int call = 0; call < 3; ++call) {
    const size_t at = size_t(call) * trainer::kNumCategorical;
    (*client)->LookupAsync(&fids_[at], trainer::kNumCategorical, &got[at * 16], &cq,
                           [&](absl::StatusOr<int64_t> version) {
                             EXPECT_TRUE(version.ok()) << version.status();
                             ++done;
                           });
  }
  while (done < 3) {
    void* tag;
    bool ok;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    static_cast<CqTag*>(tag)->Proceed(ok);
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  for (size_t i = 0; i < keys; ++i) {
    const uint32_t k = trainer::ShardOfFid(fids_[i], kShardCount);
    ASSERT_TRUE(shards_[k]->model->Lookup(&fids_[i], 1, &want[i * 16]).ok());
  }
  EXPECT_EQ(got, want);
  for (int k = 0; k < kShardCount; ++k) {
    EXPECT_NE(shards_[k]->metrics.Scrape().find("evoscale_serve_requests_total{code=\"OK\"} 2\n"),
              std::string::npos)
        << "shard " << k << ": " << shards_[k]->metrics.Scrape();
  }
}

TEST_F(ShardTest, ShardsOutOfOrderOrDownAreNamed) {
  std::vector<std::string> swapped = addresses_;
  std::swap(swapped[0], swapped[1]);
  absl::StatusOr<std::unique_ptr<Model>> wrong = Front(swapped);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();
  EXPECT_NE(wrong.status().message().find(absl::StrCat(
                "--shards ", addresses_[1], " is listed as shard 0 of 3 but holds shard 1 of 3")),
            std::string::npos)
      << wrong.status();
  absl::StatusOr<std::unique_ptr<Model>> fewer = Front({addresses_[0], addresses_[1]});
  EXPECT_EQ(fewer.status().code(), absl::StatusCode::kFailedPrecondition) << fewer.status();

  absl::StatusOr<std::unique_ptr<Model>> front = Front(addresses_);
  ASSERT_TRUE(front.ok()) << front.status();
  shards_[2]->server->Shutdown(std::chrono::system_clock::now());
  std::vector<float> got(n_);
  const absl::Status down = (*front)->Predict(dense_.data(), fids_.data(), n_, got.data());
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_NE(down.message().find(absl::StrCat("shard 2 (", addresses_[2], ")")), std::string::npos)
      << down;
  absl::StatusOr<std::unique_ptr<Model>> late = Front(addresses_, std::chrono::milliseconds(300));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable) << late.status();
  EXPECT_NE(late.status().message().find(absl::StrCat("--shards ", addresses_[2], " (shard 2 of 3)")),
            std::string::npos)
      << late.status();
}

TEST_F(ShardTest, AMemoryBudgetStopsTheLoadNamingIt) {
  const size_t whole = whole_->info().memory_bytes;
  LoadOptions tight;
  tight.memory_budget = whole / 4;
  absl::StatusOr<std::unique_ptr<Model>> over = Model::Load(*dir_, tight);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find(absl::StrCat("--memory-budget ", whole / 4, ": passed")),
            std::string::npos)
      << over.status();
  LoadOptions enough = tight;
  enough.memory_budget = whole * 2;
  EXPECT_TRUE(Model::Load(*dir_, enough).ok());
  const LoadOptions bad{3, 3};
  EXPECT_EQ(Model::Load(*dir_, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace evoscale::serve
