// evoscale-serve's model and gRPC service: scores equal to the trainer's own on the Criteo
// sample (a checkpoint the real trainer wrote in this process), checkpoints of another layout
// refused naming what differs, and every bad request answered INVALID_ARGUMENT naming the
// example and the field, over a real gRPC server on port 0.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serve/model.h"
#include "serve/prediction_service.h"
#include "serve/serve_metrics.h"
#include "trainer/checkpoint.h"
#include "trainer/criteo_reader.h"
#include "trainer/feature_id.h"
#include "trainer/metrics.h"
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

// A Criteo line (label first) as a request's example.
v1::Example ExampleOf(const std::string& line) {
  std::vector<std::string> fields = absl::StrSplit(line, '\t');
  v1::Example e;
  for (int f = 1; f <= trainer::kNumDense; ++f) {
    e.add_numeric(fields[f].empty() ? 0 : std::stoll(fields[f]));
  }
  for (int f = 1 + trainer::kNumDense; f < int(fields.size()); ++f) e.add_categorical(fields[f]);
  return e;
}

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
  (*model)->PredictLogits(test.dense.data(), test.fids.data(), n, logits.data());
  EXPECT_NEAR(trainer::ExactAuc(logits, test.labels), final_line["metrics"]["auc"].get<double>(), 1e-4);
  // An example alone scores as it does in a batch; probabilities are the logits' sigmoid.
  for (int i : {0, 7, n - 1}) {
    float one = 0, p = 0;
    (*model)->PredictLogits(&test.dense[size_t(i) * trainer::kNumDense],
                            &test.fids[size_t(i) * trainer::kNumCategorical], 1, &one);
    (*model)->Predict(&test.dense[size_t(i) * trainer::kNumDense],
                      &test.fids[size_t(i) * trainer::kNumCategorical], 1, &p);
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
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
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
  (*model)->Predict(test.dense.data(), test.fids.data(), 100, want.data());
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
  server->Shutdown();
}

}  // namespace
}  // namespace evoscale::serve
