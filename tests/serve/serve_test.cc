// evoscale-serve's model and gRPC service: scores equal to the trainer's own on the Criteo
// sample (a checkpoint the real trainer wrote in this process), checkpoints of another layout
// refused naming what differs, and every bad request answered INVALID_ARGUMENT naming the
// example and the field, over a real gRPC server on port 0.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serve/model.h"
#include "serve/model_sync_service.h"
#include "serve/predict_server.h"
#include "serve/prediction_service.h"
#include "serve/serve_metrics.h"
#include "trainer/checkpoint.h"
#include "trainer/criteo_reader.h"
#include "trainer/feature_id.h"
#include "trainer/metrics.h"
#include "tests/serve/criteo_example.h"
#include "trainer/trainer.h"

namespace evoscale::serve {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "serve_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Trains as `config` says, checkpointing into `dir`; the final line as JSON.
nlohmann::json Train(trainer::TrainerConfig config, const std::string& dir) {
  config.checkpoint_dir = dir;
  std::string last;
  const absl::Status status =
      trainer::RunTrainer(config, [&](std::string_view line) { last = std::string(line); });
  EXPECT_TRUE(status.ok()) << status;
  return nlohmann::json::parse(last, nullptr, false);
}

trainer::TrainerConfig Synthetic() {
  trainer::TrainerConfig config;
  config.synthetic_rows = 4000;
  config.batch_size = 256;
  config.threads = 2;
  config.hidden = {32, 16};
  return config;
}

// The examples of a Criteo file as the trainer reads them.
struct Examples {
  std::vector<float> labels, dense;
  std::vector<uint64_t> fids;
  std::vector<std::string> lines;
};

Examples Read(const std::string& path) {
  Examples e;
  auto source = trainer::OpenCriteoFile(path, 1);
  EXPECT_TRUE(source.ok()) << source.status();
  float label, dense[trainer::kNumDense];
  uint64_t fids[trainer::kNumCategorical];
  int64_t row;
  for (;;) {
    absl::StatusOr<bool> more = (*source)->Next(&label, dense, fids, &row);
    if (!more.ok() || !*more) break;
    e.labels.push_back(label);
    e.dense.insert(e.dense.end(), dense, dense + trainer::kNumDense);
    e.fids.insert(e.fids.end(), fids, fids + trainer::kNumCategorical);
  }
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) e.lines.push_back(line);
  return e;
}

using testing::ExampleOf;

void Rewrite(const std::string& path, const std::string& key, const std::string& value) {
  std::ifstream in(path);
  std::stringstream out;
  for (std::string line; std::getline(in, line);) {
    out << (line.rfind(key + "=", 0) == 0 ? key + "=" + value : line) << "\n";
  }
  in.close();
  std::ofstream(path) << out.str();
}

std::string NewestFolder(const std::string& dir) {
  std::string newest;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name > newest) newest = name;
  }
  return newest;
}

TEST(ServeModelTest, ScoresEqualTheTrainersOwnOnTheCriteoSample) {
  if (!fs::exists(kData + "train.tsv")) GTEST_SKIP() << "no " << kData;
  TempDir dir;
  trainer::TrainerConfig config;
  config.train_path = kData + "train.tsv";
  config.test_path = kData + "test.tsv";
  config.epochs = 2;
  config.batch_size = 256;
  config.seed = 1;
  config.checkpoint_every = 10;  // deltas along the chain, a full one every 8th
  const nlohmann::json final_line = Train(config, dir.path());
  ASSERT_TRUE(final_line["metrics"].contains("auc")) << final_line;

  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelInfo& info = (*model)->info();
  EXPECT_EQ(info.step, final_line["steps"].get<int64_t>());
  EXPECT_EQ(info.ranks, 1);
  EXPECT_EQ(info.dim, 16);
  EXPECT_EQ(info.rows, final_line["table"]["rows"].get<size_t>());
  EXPECT_EQ((*model)->sparse_version(), info.step);

  const Examples test = Read(kData + "test.tsv");
  const int n = int(test.labels.size());
  ASSERT_EQ(n, final_line["eval_examples"].get<int>());
  std::vector<float> logits(n);
  ASSERT_TRUE((*model)->PredictLogits(test.dense.data(), test.fids.data(), n, logits.data()).ok());
  EXPECT_NEAR(trainer::ExactAuc(logits, test.labels), final_line["metrics"]["auc"].get<double>(), 1e-4);
  // An example alone scores as it does in a batch; probabilities are the logits' sigmoid.
  for (int i : {0, 7, n - 1}) {
    float one = 0, p = 0;
    ASSERT_TRUE((*model)->PredictLogits(&test.dense[size_t(i) * trainer::kNumDense],
                                        &test.fids[size_t(i) * trainer::kNumCategorical], 1, &one)
                    .ok());
    ASSERT_TRUE((*model)->Predict(&test.dense[size_t(i) * trainer::kNumDense],
                                  &test.fids[size_t(i) * trainer::kNumCategorical], 1, &p)
                    .ok());
    EXPECT_NEAR(one, logits[i], 1e-5f) << i;
    EXPECT_NEAR(p, 1.0f / (1.0f + std::exp(-logits[i])), 1e-6f) << i;
  }
}

TEST(ServeModelTest, ACheckpointOfAnotherLayoutIsRefusedNamingWhatDiffers) {
  TempDir dir;
  Train(Synthetic(), dir.path());
  const std::string manifest = dir.path() + "/" + NewestFolder(dir.path()) + "/MANIFEST";
  ASSERT_TRUE(fs::exists(manifest));
  ASSERT_TRUE(Model::Load(dir.path()).ok());

  Rewrite(manifest, "mlp_sizes", "100,32,1");
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(model.status().message().find(
                "takes 100 inputs where the trainer's feature layout with embedding dim 16 "
                "gives 429 (26 x 16 + 13)"),
            std::string::npos)
      << model.status();

  Rewrite(manifest, "mlp_sizes", "429,32,2");
  model = Model::Load(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(model.status().message().find("ends in 2 outputs"), std::string::npos)
      << model.status();

  // The MANIFEST's MLP and the dense file disagree: the file is foreign, nothing is served.
  Rewrite(manifest, "mlp_sizes", "429,64,16,1");
  model = Model::Load(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss) << model.status();
  EXPECT_NE(model.status().message().find("dense.bin"), std::string::npos) << model.status();
}

TEST(ServeModelTest, AJobsRanksMustAgreeAndShareAStep) {
  TempDir single;
  Train(Synthetic(), single.path());
  const std::string name = NewestFolder(single.path());
  // A job of two whose rank folders each hold that checkpoint.
  TempDir job;
  for (int r = 0; r < 2; ++r) {
    const std::string folder = absl::StrCat(job.path(), "/rank-", r, "-of-2");
    fs::create_directories(folder);
    fs::copy(single.path(), folder, fs::copy_options::recursive);
  }
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(job.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->info().ranks, 2);

  Rewrite(job.path() + "/rank-1-of-2/" + name + "/MANIFEST", "dim", "8");
  model = Model::Load(job.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(model.status().message().find("rank-1-of-2/" + name + ": embedding dim 8 where "
                                          "rank-0-of-2/" + name + " has 16"),
            std::string::npos)
      << model.status();

  // Rank 1 holds only another step than rank 0's: nothing in common.
  Rewrite(job.path() + "/rank-1-of-2/" + name + "/MANIFEST", "dim", "16");
  for (const auto& entry : fs::directory_iterator(job.path() + "/rank-1-of-2")) {
    if (entry.path().filename() != name) fs::remove_all(entry.path());
  }
  fs::rename(job.path() + "/rank-1-of-2/" + name,
             job.path() + "/rank-1-of-2/" + trainer::CheckpointName(1));
  model = Model::Load(job.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(model.status().message().find("the ranks share no complete checkpoint"),
            std::string::npos)
      << model.status();
}

// What bench/serve's exporter writes for the peers (ForEachRow, dense()): every row once, and
// enough to answer as the model does: the rows' embeddings (zeros for an id without a row) and
// the 13 dense features into the MLP give PredictLogits' logits.
TEST(ServeModelTest, ItsRowsAndMlpAsExportedAnswerAsTheModelDoes) {
  TempDir dir;
  Train(Synthetic(), dir.path());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  const int dim = (*model)->info().dim;
  std::map<uint64_t, std::vector<float>> rows;
  std::map<uint32_t, std::vector<uint64_t>> by_slot;
  (*model)->ForEachRow([&](uint64_t key, const float* embedding) {
    EXPECT_TRUE(rows.emplace(key, std::vector<float>(embedding, embedding + dim)).second) << key;
    by_slot[trainer::FidSlot(key)].push_back(key);
  });
  ASSERT_EQ(rows.size(), (*model)->info().rows);
  ASSERT_GE(by_slot.size(), 2u);

  absl::StatusOr<std::unique_ptr<trainer::Mlp>> mlp =
      trainer::Mlp::CreateForInference((*model)->dense()->sizes());
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  (*mlp)->params() = (*model)->dense()->params();
  const int n = 8, input = (*mlp)->input_size();
  std::vector<uint64_t> fids(size_t(n) * trainer::kNumCategorical);
  std::vector<float> dense(size_t(n) * trainer::kNumDense), x(size_t(n) * input, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int f = 0; f < trainer::kNumCategorical; ++f) {
      const std::vector<uint64_t>& keys = by_slot[uint32_t(f)];
      // Known ids, and every third an id no row has.
      const uint64_t fid = keys.empty() || (i + f) % 3 == 0
                               ? trainer::MakeFid(uint32_t(f), 0xFEEDFACEull + uint64_t(i))
                               : keys[size_t(i * 7 + f) % keys.size()];
      fids[size_t(i) * trainer::kNumCategorical + size_t(f)] = fid;
      if (const auto it = rows.find(fid); it != rows.end()) {
        std::copy(it->second.begin(), it->second.end(), x.begin() + i * input + f * dim);
      }
    }
    for (int d = 0; d < trainer::kNumDense; ++d) {
      const float v = trainer::DenseFeature(i * 3 + d);
      dense[size_t(i) * trainer::kNumDense + size_t(d)] = v;
      x[size_t(i) * input + size_t(trainer::kNumCategorical * dim + d)] = v;
    }
  }
  std::vector<float> want(n), got(n);
  trainer::Mlp::Workspace ws = (*mlp)->NewWorkspace(n);
  (*mlp)->Forward(ws, x.data(), n, want.data());
  ASSERT_TRUE((*model)->PredictLogits(dense.data(), fids.data(), n, got.data()).ok());
  for (int i = 0; i < n; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "example " << i;
}

// Reload (a rollback's last step) serves the folder's newest checkpoint only when it is of the
// layout served; otherwise it is refused naming what differs, and nothing changes.
TEST(ServeModelTest, AReloadOfAnotherLayoutIsRefusedAndChangesNothing) {
  TempDir dir;
  Train(Synthetic(), dir.path());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t step = (*model)->checkpoint_step();
  EXPECT_TRUE((*model)->Reload().ok());  // the same checkpoint again
  EXPECT_EQ((*model)->sparse_version(), step);

  trainer::TrainerConfig other = Synthetic();  // a newer checkpoint, of another MLP
  other.synthetic_rows = 6000;
  other.hidden = {8};
  Train(other, dir.path());
  const absl::Status status = (*model)->Reload();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("MLP 429,8,1 where the served model has dim 16, MLP 429,32,16,1"),
            std::string::npos)
      << status;
  EXPECT_EQ((*model)->checkpoint_step(), step);
  EXPECT_EQ((*model)->sparse_version(), step);
  EXPECT_EQ((*model)->dense()->sizes(), (std::vector<int>{429, 32, 16, 1}));
}

TEST(ServeModelTest, MissingEmptyAndTruncatedCheckpointsAreClearErrors) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir.path() + "/nowhere");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("not a directory"), std::string::npos);
  model = Model::Load(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("no checkpoint"), std::string::npos);

  Train(Synthetic(), dir.path());
  const std::string rows = dir.path() + "/" + NewestFolder(dir.path()) + "/shard-0.rows";
  ASSERT_TRUE(fs::exists(rows)) << rows;
  fs::resize_file(rows, fs::file_size(rows) - 5);
  model = Model::Load(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss) << model.status();
  EXPECT_NE(model.status().message().find("shard-0.rows"), std::string::npos) << model.status();
}

// ---- Requests ---------------------------------------------------------------------------------

v1::Example GoodExample() {
  v1::Example e;
  for (int f = 0; f < trainer::kNumDense; ++f) e.add_numeric(f);
  for (int f = 0; f < trainer::kNumCategorical; ++f) e.add_categorical(f % 3 ? "a1b2c3d4" : "");
  return e;
}

TEST(ServeRequestTest, EachBadInputNamesTheExampleAndTheField) {
  std::vector<float> dense;
  std::vector<uint64_t> fids;
  v1::PredictRequest request;
  absl::Status st = ExamplesFromRequest(request, 8, &dense, &fids);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "examples: empty batch (send at least one)");

  for (int i = 0; i < 9; ++i) *request.add_examples() = GoodExample();
  st = ExamplesFromRequest(request, 8, &dense, &fids);
  EXPECT_EQ(st.message(), "examples: 9 examples, over this server's --max-batch 8");
  ASSERT_TRUE(ExamplesFromRequest(request, 9, &dense, &fids).ok());
  EXPECT_EQ(dense.size(), 9u * trainer::kNumDense);
  EXPECT_FLOAT_EQ(dense[2], std::log1p(2.0f));
  EXPECT_EQ(fids[1], trainer::MakeFid(1, 0xa1b2c3d4));
  EXPECT_EQ(fids[0], trainer::MakeFid(0, 0));  // "" is the field's missing value

  request.mutable_examples(3)->mutable_numeric()->RemoveLast();
  st = ExamplesFromRequest(request, 9, &dense, &fids);
  EXPECT_EQ(st.message(), "examples[3].numeric: 12 values, the model takes 13");
  *request.mutable_examples(3) = GoodExample();
  request.mutable_examples(5)->add_categorical("ff");
  st = ExamplesFromRequest(request, 9, &dense, &fids);
  EXPECT_EQ(st.message(), "examples[5].categorical: 27 values, the model takes 26");
  *request.mutable_examples(5) = GoodExample();
  request.mutable_examples(8)->set_categorical(20, "xyz");
  st = ExamplesFromRequest(request, 9, &dense, &fids);
  EXPECT_EQ(st.message(),
            "examples[8].categorical[20]: \"xyz\" is not a hex value of at most 16 digits");
  request.mutable_examples(8)->set_categorical(20, "12345678901234567");
  st = ExamplesFromRequest(request, 9, &dense, &fids);
  EXPECT_EQ(st.message(), "examples[8].categorical[20]: \"12345678901234567\" is not a hex "
                          "value of at most 16 digits");
  request.mutable_examples(8)->set_categorical(20, "-1");
  EXPECT_EQ(ExamplesFromRequest(request, 9, &dense, &fids).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServeServiceTest, ARealServerAnswersWhatTheModelSaysAndRefusesBadRequests) {
  if (!fs::exists(kData + "test.tsv")) GTEST_SKIP() << "no " << kData;
  TempDir dir;
  const nlohmann::json final_line = Train(Synthetic(), dir.path());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  ServeMetrics metrics;
  PredictionService service(model->get(), &metrics, /*max_batch=*/100);
  absl::StatusOr<std::unique_ptr<PredictServer>> server = PredictServer::Start(
      "127.0.0.1:0",
      [&service](const v1::PredictRequest& request, v1::PredictResponse* response) {
        return service.Handle(request, response);
      },
      /*threads=*/2, 4 << 20);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto stub = v1::PredictionService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  const Examples test = Read(kData + "test.tsv");
  v1::PredictRequest request;
  for (int i = 0; i < 100; ++i) *request.add_examples() = ExampleOf(test.lines[i]);
  v1::PredictResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->Predict(&ctx, request, &response).ok());
  ASSERT_EQ(response.probabilities_size(), 100);
  std::vector<float> want(100);
  ASSERT_TRUE((*model)->Predict(test.dense.data(), test.fids.data(), 100, want.data()).ok());
  for (int i = 0; i < 100; ++i) EXPECT_FLOAT_EQ(response.probabilities(i), want[i]) << i;
  EXPECT_EQ(response.sparse_version(), final_line["steps"].get<int64_t>());
  EXPECT_EQ(response.dense_version(), final_line["steps"].get<int64_t>());

  *request.add_examples() = ExampleOf(test.lines[100]);
  grpc::ClientContext over;
  grpc::Status st = stub->Predict(&over, request, &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "examples: 101 examples, over this server's --max-batch 100");
  request.mutable_examples()->RemoveLast();
  request.mutable_examples(42)->set_categorical(3, "not-hex");
  grpc::ClientContext bad;
  st = stub->Predict(&bad, request, &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "examples[42].categorical[3]: \"not-hex\" is not a hex value of at most 16 digits");
  const std::string scrape = metrics.Scrape();
  EXPECT_NE(scrape.find("evoscale_serve_requests_total{code=\"OK\"} 1"), std::string::npos)
      << scrape;
  EXPECT_NE(scrape.find("evoscale_serve_requests_total{code=\"INVALID_ARGUMENT\"} 2"),
            std::string::npos);
  EXPECT_NE(scrape.find("evoscale_serve_examples_total 100"), std::string::npos);
  EXPECT_NE(scrape.find("evoscale_serve_request_seconds_count 3"), std::string::npos);
  (*server)->Shutdown(std::chrono::system_clock::now());
}


// ---- Online updates (ModelSyncService) --------------------------------------------------------

class ServeSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kData + "test.tsv")) GTEST_SKIP() << "no " << kData;
    final_line_ = Train(Synthetic(), dir_.path());
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(dir_.path());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    step_ = model_->info().step;
    predict_ = std::make_unique<PredictionService>(model_.get(), &metrics_, 100);
    sync_ = std::make_unique<ModelSyncService>(model_.get(), &metrics_);
    absl::StatusOr<std::unique_ptr<PredictServer>> server = PredictServer::Start(
        "127.0.0.1:0",
        [this](const v1::PredictRequest& request, v1::PredictResponse* response) {
          return predict_->Handle(request, response);
        },
        2, 64 << 20, {sync_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                       grpc::InsecureChannelCredentials());
    predict_stub_ = v1::PredictionService::NewStub(channel);
    sync_stub_ = v1::ModelSyncService::NewStub(channel);
    test_ = Read(kData + "test.tsv");
    *request_.add_examples() = ExampleOf(test_.lines[0]);
  }

  v1::PredictResponse Ask() {
    v1::PredictResponse response;
    grpc::ClientContext ctx;
    EXPECT_TRUE(predict_stub_->Predict(&ctx, request_, &response).ok());
    return response;
  }
  grpc::Status Push(const v1::PushRowsRequest& push, v1::PushResponse* response = nullptr) {
    v1::PushResponse ignored;
    grpc::ClientContext ctx;
    return sync_stub_->PushRows(&ctx, push, response ? response : &ignored);
  }
  // A push setting example 0's ids' rows (all, or only `only`) to `value`.
  v1::PushRowsRequest RowsOfExample0(int64_t version, float value, int only = -1) {
    v1::PushRowsRequest push;
    push.set_version(version);
    push.set_dim(16);
    for (int f = 0; f < trainer::kNumCategorical; ++f) {
      if (only >= 0 && f != only) continue;
      push.add_keys(test_.fids[f]);
      for (int d = 0; d < 16; ++d) push.add_values(value);
    }
    return push;
  }

  TempDir dir_;
  nlohmann::json final_line_;
  std::unique_ptr<Model> model_;
  int64_t step_ = 0;
  ServeMetrics metrics_;
  std::unique_ptr<PredictionService> predict_;
  std::unique_ptr<ModelSyncService> sync_;
  std::unique_ptr<PredictServer> server_;
  std::unique_ptr<v1::PredictionService::Stub> predict_stub_;
  std::unique_ptr<v1::ModelSyncService::Stub> sync_stub_;
  Examples test_;
  v1::PredictRequest request_;
};

TEST_F(ServeSyncTest, PushedRowsAnswerAtOnceAndRefusedPushesChangeNothing) {
  const v1::PredictResponse before = Ask();
  EXPECT_EQ(before.sparse_version(), step_);
  // A reference: the same checkpoint with the same rows applied directly.
  absl::StatusOr<std::unique_ptr<Model>> reference = Model::Load(dir_.path());
  ASSERT_TRUE(reference.ok());
  const v1::PushRowsRequest push = RowsOfExample0(step_ + 5, 0.25f);
  RowUpdate u;
  u.version = step_ + 5;
  u.dim = 16;
  u.keys = push.keys().data();
  u.rows = size_t(push.keys_size());
  u.values = push.values().data();
  u.value_count = size_t(push.values_size());
  ASSERT_TRUE((*reference)->ApplyRows(u).ok());
  float want = 0;
  ASSERT_TRUE((*reference)->Predict(test_.dense.data(), test_.fids.data(), 1, &want).ok());

  v1::PushResponse pushed;
  ASSERT_TRUE(Push(push, &pushed).ok());
  EXPECT_EQ(pushed.rows_applied(), 26);
  EXPECT_EQ(pushed.sparse_version(), step_ + 5);
  const v1::PredictResponse after = Ask();
  EXPECT_FLOAT_EQ(after.probabilities(0), want);
  EXPECT_NE(after.probabilities(0), before.probabilities(0));
  EXPECT_EQ(after.sparse_version(), step_ + 5);
  EXPECT_EQ(after.dense_version(), step_);

  // Refused, each naming why, and the answer stays what it was.
  grpc::Status st = Push(RowsOfExample0(step_ + 5, 0.9f));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(), absl::StrCat("version ", step_ + 5, " of source \"\" is not newer "
                                             "than the version applied, ", step_ + 5));
  v1::PushRowsRequest bad = RowsOfExample0(step_ + 6, 0.9f);
  bad.set_dim(8);
  EXPECT_EQ(Push(bad).error_message(), "dim: 8 where the served model's embeddings have 16");
  bad = RowsOfExample0(step_ + 6, 0.9f);
  bad.mutable_values()->RemoveLast();
  EXPECT_EQ(Push(bad).error_message(), "values: 415 for 26 keys of dim 16 (want 416)");
  bad = RowsOfExample0(step_ + 6, 0.9f);
  bad.set_values(25 * 16 + 3, std::nanf(""));  // the last row: the 25 before it stay unapplied
  st = Push(bad);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("values: row 25"), std::string::npos) << st.error_message();
  EXPECT_FLOAT_EQ(Ask().probabilities(0), want);
  EXPECT_EQ(Ask().sparse_version(), step_ + 5);

  // An id the trainer evicted answers as a missing one (zeros), as in the trainer.
  v1::PushRowsRequest evict;
  evict.set_version(step_ + 7);
  evict.set_dim(16);
  for (int f = 0; f < trainer::kNumCategorical; ++f) evict.add_erased(test_.fids[f]);
  ASSERT_TRUE(Push(evict).ok());
  std::vector<uint64_t> unseen(trainer::kNumCategorical, 1);  // ids no model has
  for (int f = 0; f < trainer::kNumCategorical; ++f) unseen[f] = trainer::MakeFid(f, 0xfeedbeefULL + f);
  float missing = 0;
  ASSERT_TRUE(model_->Predict(test_.dense.data(), unseen.data(), 1, &missing).ok());
  EXPECT_FLOAT_EQ(Ask().probabilities(0), missing);

  const std::string scrape = metrics_.Scrape();
  EXPECT_NE(scrape.find("evoscale_serve_pushes_total{kind=\"rows\",result=\"applied\"} 2"),
            std::string::npos) << scrape;
  EXPECT_NE(scrape.find("evoscale_serve_pushes_total{kind=\"rows\",result=\"stale\"} 1"),
            std::string::npos);
  EXPECT_NE(scrape.find("evoscale_serve_pushes_total{kind=\"rows\",result=\"invalid\"} 3"),
            std::string::npos);
  EXPECT_NE(scrape.find(absl::StrCat("evoscale_serve_sparse_version ", step_ + 7)),
            std::string::npos);
}

TEST_F(ServeSyncTest, VersionsAreOrderedPerSourceAndTheOldestIsAnswered) {
  v1::PushRowsRequest push = RowsOfExample0(step_ + 10, 0.1f);
  push.set_source("rank-0-of-2");
  ASSERT_TRUE(Push(push).ok());
  push = RowsOfExample0(step_ + 4, 0.2f, /*only=*/3);
  push.set_source("rank-1-of-2");
  ASSERT_TRUE(Push(push).ok());  // older than rank 0's, newer than rank 1's last (none)
  EXPECT_EQ(Ask().sparse_version(), step_ + 4);
  // A version at or below the checkpoint's step is older than what the replica holds.
  push = RowsOfExample0(step_, 0.2f);
  push.set_source("rank-2-of-3");
  grpc::Status st = Push(push);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("the checkpoint's step"), std::string::npos);

  grpc::ClientContext ctx;
  v1::SyncState state;
  ASSERT_TRUE(sync_stub_->GetSyncState(&ctx, v1::GetSyncStateRequest(), &state).ok());
  EXPECT_EQ(state.checkpoint_step(), step_);
  EXPECT_EQ(state.sparse_version(), step_ + 4);
  EXPECT_EQ(state.source_versions().at("rank-0-of-2"), step_ + 10);
  EXPECT_EQ(state.source_versions().at("rank-1-of-2"), step_ + 4);
  EXPECT_EQ(state.source_versions().count("rank-2-of-3"), 0u);
}

// A version in parts: each part's rows answer as it arrives, the version moves with the last;
// a part out of order, or of a version whose earlier parts this replica does not hold, is
// refused and changes nothing; a new version's part 0 drops what is left of an unfinished one.
TEST_F(ServeSyncTest, AVersionInPartsMovesWithItsLastPart) {
  const float before = Ask().probabilities(0);
  v1::PushRowsRequest part0 = RowsOfExample0(step_ + 5, 0.3f, /*only=*/0);
  part0.set_parts(3);
  ASSERT_TRUE(Push(part0).ok());
  const v1::PredictResponse after0 = Ask();
  EXPECT_NE(after0.probabilities(0), before);  // its rows answer at once
  EXPECT_EQ(after0.sparse_version(), step_);   // the version is not whole yet

  v1::PushRowsRequest part2 = RowsOfExample0(step_ + 5, 0.9f, /*only=*/2);
  part2.set_part(2);
  part2.set_parts(3);
  grpc::Status st = Push(part2);  // part 1 is missing
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("part 2 of version " + std::to_string(step_ + 5) +
                                    " of source \"\" does not follow part 0 of version"),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(Ask().probabilities(0), after0.probabilities(0));
  v1::PushRowsRequest bad = part2;
  bad.set_part(3);
  EXPECT_EQ(Push(bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::PushRowsRequest part1 = RowsOfExample0(step_ + 5, 0.6f, /*only=*/1);
  part1.set_part(1);
  part1.set_parts(3);
  ASSERT_TRUE(Push(part1).ok());
  ASSERT_TRUE(Push(part2).ok());
  const v1::PredictResponse whole = Ask();
  EXPECT_EQ(whole.sparse_version(), step_ + 5);

  // Version step + 7 left unfinished, then step + 8 whole: its part 0 starts afresh, and a
  // late part of step + 7 is refused.
  v1::PushRowsRequest unfinished = RowsOfExample0(step_ + 7, 0.1f, /*only=*/4);
  unfinished.set_parts(2);
  ASSERT_TRUE(Push(unfinished).ok());
  ASSERT_TRUE(Push(RowsOfExample0(step_ + 8, 0.2f, /*only=*/5)).ok());
  EXPECT_EQ(Ask().sparse_version(), step_ + 8);
  unfinished.set_part(1);
  EXPECT_EQ(Push(unfinished).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServeSyncTest, ANewMlpArrivesInChunksAndIsSwappedInWhole) {
  const size_t params = 429 * 32 + 32 + 32 * 16 + 16 + 16 + 1;
  int answers = 0;  // of the last push: one per chunk taken, then one after the swap
  v1::PushResponse last;
  auto push = [&](int64_t version, const std::string& sizes, int64_t total, size_t send,
                  float value) {
    grpc::ClientContext ctx;
    v1::PushResponse response;
    answers = 0;
    auto writer = sync_stub_->PushDense(&ctx);
    v1::DenseChunk first;
    first.set_version(version);
    first.set_mlp_sizes(sizes);
    first.set_total_params(total);
    size_t sent = 0;
    for (bool head = true; head || sent < send; head = false) {
      v1::DenseChunk chunk = head ? first : v1::DenseChunk();
      for (size_t i = 0; i < 4096 && sent < send; ++i, ++sent) chunk.add_params(value);
      if (!writer->Write(chunk) || !writer->Read(&response)) break;  // each chunk answered
      ++answers;
    }
    writer->WritesDone();
    while (writer->Read(&response)) {
      ++answers;
      last = response;
    }
    return writer->Finish();
  };
  const std::string sizes = "429,32,16,1";
  // Zero weights: every logit 0, every probability one half.
  grpc::Status st = push(step_ + 1, sizes, params, params, 0.0f);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // 14,305 params in chunks of 4,096: 4 acknowledgements, then the versions after the swap.
  EXPECT_EQ(answers, 4 + 1);
  EXPECT_EQ(last.dense_version(), step_ + 1);
  v1::PredictResponse r = Ask();
  EXPECT_FLOAT_EQ(r.probabilities(0), 0.5f);
  EXPECT_EQ(r.dense_version(), step_ + 1);
  EXPECT_EQ(r.sparse_version(), step_);

  st = push(step_ + 1, sizes, params, params, 1.0f);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  st = push(step_ + 2, "429,64,1", params, params, 1.0f);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "mlp_sizes 429,64,1 where the served MLP is 429,32,16,1");
  st = push(step_ + 2, sizes, params, params - 7, 1.0f);
  EXPECT_EQ(st.error_message(),
            absl::StrCat("params: ", params - 7, " of total_params ", params, " arrived"));
  st = push(step_ + 2, sizes, params + 1, params, 1.0f);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  st = push(step_ + 2, sizes, params, params, std::nanf(""));
  EXPECT_EQ(st.error_message(), "params: a value is not finite");
  // Nothing refused was swapped in.
  r = Ask();
  EXPECT_FLOAT_EQ(r.probabilities(0), 0.5f);
  EXPECT_EQ(r.dense_version(), step_ + 1);
}

}  // namespace
}  // namespace evoscale::serve
