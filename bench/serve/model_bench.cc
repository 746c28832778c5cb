// The served model's compute alone (no gRPC): Model::Predict on criteo-8k's test examples in
// batches of 1, 16, 100 and 256, per example. A checkpoint is trained first (criteo-8k, 2 epochs,
// the trainer's defaults: dim 16, MLP 429-256-128-1) into a temporary folder.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "serve/model.h"
#include "trainer/criteo_reader.h"
#include "trainer/trainer.h"

namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::unique_ptr<evoscale::serve::Model> model;
  std::vector<float> dense;
  std::vector<uint64_t> fids;
  int n = 0;
};

Fixture& Get() {
  static Fixture* f = [] {
    auto* f = new Fixture;
    const std::string data = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";
    const std::string dir = (fs::temp_directory_path() / "evoscale_model_bench").string();
    fs::remove_all(dir);
    evoscale::trainer::TrainerConfig config;
    config.train_path = data + "train.tsv";
    config.test_path = data + "test.tsv";
    config.epochs = 2;
    config.batch_size = 256;
    config.checkpoint_dir = dir;
    if (!evoscale::trainer::RunTrainer(config, [](std::string_view) {}).ok()) std::abort();
    f->model = *evoscale::serve::Model::Load(dir);
    auto source = *evoscale::trainer::OpenCriteoFile(data + "test.tsv", 1);
    float label, dense[evoscale::trainer::kNumDense];
    uint64_t fids[evoscale::trainer::kNumCategorical];
    int64_t row;
    while (*source->Next(&label, dense, fids, &row)) {
      f->dense.insert(f->dense.end(), dense, dense + evoscale::trainer::kNumDense);
      f->fids.insert(f->fids.end(), fids, fids + evoscale::trainer::kNumCategorical);
      ++f->n;
    }
    fs::remove_all(dir);
    return f;
  }();
  return *f;
}

void BM_Predict(benchmark::State& state) {
  Fixture& f = Get();
  const int batch = int(state.range(0));
  std::vector<float> out(static_cast<size_t>(batch));
  int i = 0;
  for (auto _ : state) {
    if (i + batch > f.n) i = 0;
    const absl::Status scored =
        f.model->Predict(&f.dense[size_t(i) * evoscale::trainer::kNumDense],
                         &f.fids[size_t(i) * evoscale::trainer::kNumCategorical], batch,
                         out.data());
    if (!scored.ok()) state.SkipWithError(std::string(scored.message()).c_str());
    benchmark::DoNotOptimize(out.data());
    i += batch;
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_Predict)->Arg(1)->Arg(16)->Arg(100)->Arg(256);

}  // namespace

BENCHMARK_MAIN();
