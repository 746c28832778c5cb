// serve_torch_peer: the libtorch peer of evoscale-serve (issue 29, must-show 2), what a
// TorchRec-style team would run: the same model as a frozen TorchScript module
// (export_torchscript.py, the same weights), behind the same gRPC server evoscale-serve uses
// (serve/predict_server.h, the same threads and transport) and the same request parsing, so the
// two differ only in the model's runtime. Feature ids map to table rows through a hash map in
// front of the module, as TorchRec keeps its id transform outside the model. Updates are whole
// model reloads: with --reload-seconds K a thread loads the module and the id map again every K
// seconds and swaps them in (calls in flight finish on the old one).
//
// usage: serve_torch_peer --export DIR --grpc HOST:PORT [--threads 2] [--reload-seconds 0]
// Prints {"event":"listening","grpc":HOST:PORT,...}; serves until SIGINT or SIGTERM.
#include <torch/script.h>
#include <torch/version.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "serve/predict_server.h"
#include "serve/prediction_service.h"
#include "trainer/criteo_reader.h"

namespace {

using evoscale::trainer::kNumCategorical;
using evoscale::trainer::kNumDense;

// One loaded model: the module and the feature id -> row + 1 map (0: no row).
struct Loaded {
  mutable torch::jit::Module module;  // forward() is not const, yet safe to call concurrently
  absl::flat_hash_map<uint64_t, int64_t> rows;
};

std::shared_ptr<const Loaded> Load(const std::string& dir) {
  auto loaded = std::make_shared<Loaded>();
  loaded->module = torch::jit::load(dir + "/model.pt");
  loaded->module.eval();
  std::ifstream in(dir + "/keys.u64", std::ios::binary);
  uint64_t key = 0;
  int64_t row = 0;
  while (in.read(reinterpret_cast<char*>(&key), sizeof key)) loaded->rows.emplace(key, ++row);
  return loaded;
}

class Peer {
 public:
  Peer(std::string dir, int max_batch) : dir_(std::move(dir)), max_batch_(max_batch) {
    current_ = Load(dir_);
  }

  grpc::Status Handle(const evoscale::v1::PredictRequest& request,
                      evoscale::v1::PredictResponse* response) {
    thread_local std::vector<float> dense;
    thread_local std::vector<uint64_t> fids;
    thread_local std::vector<int64_t> rows;
    const absl::Status parsed =
        evoscale::serve::ExamplesFromRequest(request, max_batch_, &dense, &fids);
    if (!parsed.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(parsed.message()));
    }
    const std::shared_ptr<const Loaded> model = Current();
    const int64_t n = request.examples_size();
    rows.resize(fids.size());
    for (size_t i = 0; i < fids.size(); ++i) {
      const auto it = model->rows.find(fids[i]);
      rows[i] = it == model->rows.end() ? 0 : it->second;
    }
    c10::InferenceMode inference;
    std::vector<torch::jit::IValue> inputs = {
        torch::from_blob(rows.data(), {n, kNumCategorical}, torch::kInt64),
        torch::from_blob(dense.data(), {n, kNumDense}, torch::kFloat32)};
    const at::Tensor p = model->module.forward(inputs).toTensor().contiguous();
    response->mutable_probabilities()->Add(p.data_ptr<float>(), p.data_ptr<float>() + n);
    response->set_dense_version(version_.load());
    response->set_sparse_version(version_.load());
    return grpc::Status::OK;
  }

  // Loads the whole model again and swaps it in.
  void Reload() {
    std::shared_ptr<const Loaded> fresh = Load(dir_);
    absl::MutexLock lock(&mu_);
    current_ = std::move(fresh);
    version_.fetch_add(1);
  }

 private:
  std::shared_ptr<const Loaded> Current() {
    absl::MutexLock lock(&mu_);
    return current_;
  }

  const std::string dir_;
  const int max_batch_;
  absl::Mutex mu_;
  std::shared_ptr<const Loaded> current_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> version_{0};
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir, address = "127.0.0.1:0";
  int threads = 2, max_batch = 4096;
  double reload_seconds = 0;
  CLI::App app("serve_torch_peer: the CTR model as TorchScript behind evoscale-serve's server");
  app.add_option("--export", dir, "serve_export's directory, with export_torchscript.py's model.pt")
      ->required();
  app.add_option("--grpc", address, "HOST:PORT to listen on (port 0: any)");
  app.add_option("--threads", threads, "threads answering Predict")->check(CLI::Range(1, 64));
  app.add_option("--max-batch", max_batch, "most examples in one Predict call");
  app.add_option("--reload-seconds", reload_seconds, "reload the whole model this often (0: never)");
  CLI11_PARSE(app, argc, argv);

  // As evoscale-serve: no absl mutex deadlock detector (Debian's absl has it on).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Latency serving: one intra-op thread per call (the server's threads are the parallelism).
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<Peer> peer;
  try {
    peer = std::make_unique<Peer>(dir, max_batch);
  } catch (const std::exception& e) {
    std::cerr << "serve_torch_peer: --export: " << e.what() << "\n";
    return 1;
  }
  auto server = evoscale::serve::PredictServer::Start(
      address,
      [&peer](const evoscale::v1::PredictRequest& request,
              evoscale::v1::PredictResponse* response) { return peer->Handle(request, response); },
      threads, 64 << 20);
  if (!server.ok()) {
    std::cerr << "serve_torch_peer: " << server.status().message() << "\n";
    return 1;
  }
  std::atomic<bool> stop{false};
  std::thread reloader;
  if (reload_seconds > 0) {
    reloader = std::thread([&] {
      auto next = std::chrono::steady_clock::now();
      while (!stop.load()) {
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(reload_seconds));
        while (!stop.load() && std::chrono::steady_clock::now() < next) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (!stop.load()) peer->Reload();
      }
    });
  }
  std::cout << nlohmann::json{{"event", "listening"},
                              {"grpc", address.substr(0, address.rfind(':') + 1) +
                                           std::to_string((*server)->port())},
                              {"torch", TORCH_VERSION},
                              {"reload_seconds", reload_seconds}}
                   .dump()
            << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  stop.store(true);
  if (reloader.joinable()) reloader.join();
  (*server)->Shutdown(std::chrono::system_clock::now());
  return 0;
}
