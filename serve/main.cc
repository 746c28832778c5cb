// evoscale-serve: a trained CTR model served over gRPC (evoscale.v1.PredictionService), with
// /healthz and /metrics over HTTP. Prints one listening line, as evoscaled does:
//   {"event":"listening","grpc":"HOST:PORT","http":"HOST:PORT","model_dir":...,"step":...}
// SIGINT/SIGTERM stop it ({"event":"stopped"}). Exit codes: 0 stopped, 1 failed to start
// (the model refused or a port taken), 2 bad flags.
// `evoscale-serve rollback ...` rolls replicas back to an earlier checkpoint (serve/rollback.h).
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "serve/model.h"
#include "serve/embedding_service.h"
#include "serve/front_service.h"
#include "serve/model_sync_service.h"
#include "serve/predict_server.h"
#include "serve/prediction_service.h"
#include "serve/rollback.h"
#include "serve/serve_metrics.h"
#include "serve/shard_client.h"
#include "serve/telemetry_reporter.h"
#include "service/common/http_listener.h"
#include "trainer/checkpoint.h"
#include "trainer/internal/checkpoint_layout.h"

namespace {

constexpr int kStartFailed = 1;
constexpr int kBadUsage = 2;

int Fail(int code, const std::string& message) {
  std::cerr << "evoscale-serve: " << message << "\n";
  std::cout << nlohmann::json{{"event", "error"}, {"message", message}}.dump() << std::endl;
  return code;
}

std::string WithPort(const std::string& address, int port) {
  return address.substr(0, address.rfind(':')) + ":" + std::to_string(port);
}

// When the model's checkpoint was written (its MANIFEST's time).
std::chrono::system_clock::time_point MadeAt(const evoscale::serve::ModelInfo& info) {
  const std::string manifest =
      absl::StrCat(evoscale::trainer::internal::RankCheckpointDir(info.dir, 0, info.ranks), "/",
                   evoscale::trainer::CheckpointName(info.step), "/MANIFEST");
  struct stat st {};
  if (stat(manifest.c_str(), &st) != 0) return std::chrono::system_clock::now();
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

struct Flags {
  std::string model_dir, grpc_address = "127.0.0.1:50061", http_address = "127.0.0.1:8081";
  std::string evoscaled, workload, instance;
  int max_batch = 1024;
  int threads = 2;
  double report_every = 5;
  double cpu_request = 0;
  std::string shard;                // "I/N": this replica holds shard I of N of the rows
  std::vector<std::string> shards;  // a front: the shards' addresses, shard 0 first
  std::string memory_budget;
  evoscale::serve::LoadOptions load;
  double shard_wait = 30;
};

// "I/N" into options; false when it is not two integers 0 <= I < N.
bool ParseShard(const std::string& text, evoscale::serve::LoadOptions& options) {
  const std::vector<std::string> parts = absl::StrSplit(text, '/');
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], &options.shard) &&
         absl::SimpleAtoi(parts[1], &options.shards) && options.shards >= 1 &&
         options.shard >= 0 && options.shard < options.shards;
}

// Bytes, with an optional K, M, G (powers of 1024, an "i" and "B" allowed: 512MiB, 2G).
bool ParseBytes(std::string text, size_t& bytes) {
  static const std::pair<const char*, size_t> kUnits[] = {
      {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}, {"GB", 1ull << 30},
      {"MB", 1ull << 20},  {"KB", 1ull << 10},  {"G", 1ull << 30},   {"M", 1ull << 20},
      {"K", 1ull << 10},   {"B", 1}};
  size_t unit = 1;
  for (const auto& [suffix, scale] : kUnits) {
    const std::string_view s(suffix);
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      text.resize(text.size() - s.size());
      unit = scale;
      break;
    }
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n == 0 || n > (uint64_t(1) << 50) / unit) return false;
  bytes = size_t(n * unit);
  return true;
}

// -1: go on; else the exit code (help printed, or bad flags reported).
int ParseFlags(int argc, char** argv, Flags& f) {
  CLI::App app("evoscale-serve: serves a trained evoscale-trainer model over gRPC",
               "evoscale-serve");
  app.add_option("--model-dir", f.model_dir,
                 "the trainer's --checkpoint-dir (one process's or a job's)")
      ->required();
  app.add_option("--grpc", f.grpc_address,
                 "gRPC address (PredictionService), HOST:PORT (port 0: any)")
      ->capture_default_str();
  app.add_option("--http", f.http_address, "HTTP address (/healthz, /metrics), HOST:PORT")
      ->capture_default_str();
  app.add_option("--max-batch", f.max_batch, "most examples in one Predict call")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--threads", f.threads, "threads answering Predict")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--evoscaled", f.evoscaled, "evoscaled's gRPC address to report telemetry to");
  app.add_option("--workload", f.workload, "this fleet's workload in evoscaled, NAMESPACE/NAME");
  app.add_option("--instance", f.instance,
                 "this replica's name in its reports (default: its gRPC address)");
  app.add_option("--report-every", f.report_every, "seconds between telemetry reports")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));  // evoscaled keeps one sample per second
  app.add_option("--cpu-request", f.cpu_request,
                 "the CPU cores this replica is given (its pod's request), sent with each "
                 "report; replica counts take utilisation over it (0: not sent)")
      ->check(CLI::Range(0.0, 4096.0));
  app.add_option("--shard", f.shard,
                 "I/N: hold only the rows of id-hash shard I of N (as a job of N ranks shards "
                 "them) and answer a front's lookups of them, for a table larger than one "
                 "replica");
  app.add_option("--shards", f.shards,
                 "a front: the shard replicas' gRPC addresses, shard 0 first (comma-separated); "
                 "answers Predict with the MLP, looking its rows up there")
      ->delimiter(',');
  app.add_option("--shard-wait", f.shard_wait,
                 "seconds a front waits for its shards to answer at start")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--memory-budget", f.memory_budget,
                 "the most bytes of rows and MLP to hold (e.g. 2GiB): past it the replica "
                 "refuses to start, naming how far it got (default: no limit)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& error) {
    return Fail(kBadUsage, std::string(error.what()) + " (see evoscale-serve --help)");
  }
  if (!f.shard.empty() && !ParseShard(f.shard, f.load)) {
    return Fail(kBadUsage, "--shard " + f.shard + ": want I/N with 0 <= I < N, e.g. 0/2");
  }
  if (!f.shard.empty() && !f.shards.empty()) {
    return Fail(kBadUsage, "--shard and --shards: a replica is a shard or a front, not both");
  }
  if (!f.memory_budget.empty() && !ParseBytes(f.memory_budget, f.load.memory_budget)) {
    return Fail(kBadUsage, "--memory-budget " + f.memory_budget +
                               ": want a positive size in bytes, e.g. 2GiB or 512MiB");
  }
  if (f.evoscaled.empty() != f.workload.empty()) {
    return Fail(kBadUsage, f.evoscaled.empty() ? "--workload needs --evoscaled ADDR"
                                               : "--evoscaled needs --workload NAMESPACE/NAME");
  }
  return -1;
}

// /healthz and /metrics.
evoscale::service::HttpResponse Http(evoscale::serve::ServeMetrics& metrics,
                                     const std::string& method, const std::string& target) {
  evoscale::service::HttpResponse r;
  const std::string path = target.substr(0, target.find('?'));
  if (method != "GET" && method != "HEAD") {
    r.status = 405;
    r.allow = "GET, HEAD";
    r.body = R"({"error":{"code":"METHOD_NOT_ALLOWED","message":"GET only"}})";
  } else if (path == "/healthz") {
    r.content_type = "text/plain";
    r.body = "ok\n";
  } else if (path == "/metrics") {
    r.content_type = "text/plain; version=0.0.4";
    r.body = metrics.Scrape();
  } else {
    r.status = 404;
    r.body =
        R"({"error":{"code":"NOT_FOUND","message":"evoscale-serve has /healthz and /metrics"}})";
  }
  return r;
}

// SIGINT and SIGTERM blocked in every thread (main waits for them with sigwait).
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// glibc raises its mmap threshold to the size of the largest block freed, so after the first
// dense swap each new MLP would come from the heap and the replaced one stay there, free but
// resident: a second MLP for good. A fixed threshold keeps blocks of 512 KiB and more (the
// MLP's, the table's) mapped and unmapped, and request buffers, far smaller, on the heap; the
// heap's free top is kept up to 32 MiB, as the dynamic rule would have let it grow, rather than
// given back and faulted in again between bursts of requests (bench/serve/dense_swap.py).
// Also: Debian builds absl with the mutex deadlock detector on, and every lock paid for it (a
// single-example answer takes a dozen shard locks): ~2% of the replica's CPU at 20,000 QPS.
void TuneProcess() {
  mallopt(M_MMAP_THRESHOLD, 512 * 1024);
  mallopt(M_TRIM_THRESHOLD, 32 * 1024 * 1024);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

// The model to serve: a whole one, a shard's rows (--shard), or a front's MLP (--shards).
// A front's shards are `*shards` (owned by the model).
absl::StatusOr<std::unique_ptr<evoscale::serve::Model>> LoadModel(
    const Flags& flags, evoscale::serve::ShardClient** shards) {
  if (flags.shards.empty()) return evoscale::serve::Model::Load(flags.model_dir, flags.load);
  return evoscale::serve::Model::LoadFront(
      flags.model_dir,
      [&flags, shards](const evoscale::serve::ModelInfo& info)
          -> absl::StatusOr<std::unique_ptr<evoscale::serve::RowSource>> {
        absl::StatusOr<std::unique_ptr<evoscale::serve::ShardClient>> client =
            evoscale::serve::ShardClient::Connect(
                flags.shards, info.dim,
                std::chrono::milliseconds(int64_t(flags.shard_wait * 1000)));
        if (client.ok()) *shards = client->get();
        return client;
      });
}

// The gRPC edge over a model: Predict (a front's asynchronous, over its shards), the pushes,
// and a shard's lookups.
struct Services {
  Services(evoscale::serve::Model* model, evoscale::serve::ShardClient* shards,
           evoscale::serve::ServeMetrics* metrics, int max_batch)
      : predict(model, metrics, max_batch), sync(model, metrics), lookups(model, metrics) {
    if (shards != nullptr) {
      front = std::make_unique<evoscale::serve::FrontService>(model, shards, metrics, max_batch);
    }
  }
  evoscale::serve::PredictionService predict;
  evoscale::serve::ModelSyncService sync;
  evoscale::serve::EmbeddingService lookups;
  std::unique_ptr<evoscale::serve::FrontService> front;
};

// Messages up to 1 GiB: a trainer's catch-up push holds every row changed since a replica's
// version (about 14 million rows of dim 16), in one versioned message.
absl::StatusOr<std::unique_ptr<evoscale::serve::PredictServer>> StartGrpc(const Flags& flags,
                                                                         Services& s) {
  using evoscale::serve::PredictServer;
  if (s.front != nullptr) {
    return PredictServer::StartAsync(
        flags.grpc_address,
        [&s](const evoscale::v1::PredictRequest& request, evoscale::v1::PredictResponse* response,
             grpc::CompletionQueue* cq, PredictServer::Finish finish) {
          s.front->Handle(request, response, cq, std::move(finish));
        },
        flags.threads, 1 << 30, {&s.sync});
  }
  return PredictServer::Start(
      flags.grpc_address,
      [&s](const evoscale::v1::PredictRequest& request, evoscale::v1::PredictResponse* response) {
        return s.predict.Handle(request, response);
      },
      flags.threads, 1 << 30, {&s.sync},
      [&s](const evoscale::v1::LookupRequest& request, evoscale::v1::LookupResponse* response) {
        return s.lookups.Handle(request, response);
      });
}

// The line printed once serving.
nlohmann::ordered_json Listening(const Flags& flags, const evoscale::serve::ModelInfo& info,
                                 int grpc_port, int http_port) {
  nlohmann::ordered_json listening = {{"event", "listening"},
                                      {"grpc", WithPort(flags.grpc_address, grpc_port)},
                                      {"http", WithPort(flags.http_address, http_port)},
                                      {"model_dir", flags.model_dir},
                                      {"step", info.step},
                                      {"ranks", info.ranks},
                                      {"rows", info.rows},
                                      {"dim", info.dim},
                                      {"model_bytes", info.memory_bytes}};
  if (info.placement.shards > 1) {
    listening["role"] = "shard";
    listening["shard"] = absl::StrCat(info.placement.shard, "/", info.placement.shards);
  } else {
    listening["role"] = info.placement.front ? "front" : "whole";
  }
  if (info.placement.front) listening["shards"] = flags.shards;
  return listening;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "rollback") {
    return evoscale::serve::RollbackMain(argc - 1, argv + 1, std::cout, std::cerr);
  }
  Flags flags;
  if (const int code = ParseFlags(argc, argv, flags); code >= 0) return code;
  const sigset_t signals = BlockStopSignals();
  TuneProcess();

  evoscale::serve::ShardClient* shards = nullptr;
  absl::StatusOr<std::unique_ptr<evoscale::serve::Model>> model = LoadModel(flags, &shards);
  if (!model.ok()) return Fail(kStartFailed, std::string(model.status().message()));
  const evoscale::serve::ModelInfo& info = (*model)->info();
  evoscale::serve::ServeMetrics metrics;
  metrics.SetModel((*model)->sparse_version(), (*model)->dense_version(), info.rows,
                   info.memory_bytes, info.rows, MadeAt(info));

  Services services(model->get(), shards, &metrics, flags.max_batch);
  absl::StatusOr<std::unique_ptr<evoscale::serve::PredictServer>> server =
      StartGrpc(flags, services);
  if (!server.ok()) return Fail(kStartFailed, std::string(server.status().message()));
  const int grpc_port = (*server)->port();
  auto http = evoscale::service::HttpListener::Start(
      flags.http_address, "--http",
      [&metrics](const std::string& method, const std::string& target, const std::string&,
                 const std::string&) {
        return Http(metrics, method, target);
      },
      /*threads=*/1, "evoscale-serve");
  if (!http.ok()) return Fail(kStartFailed, std::string(http.status().message()));

  std::unique_ptr<evoscale::serve::TelemetryReporter> reporter;
  if (!flags.evoscaled.empty()) {
    evoscale::serve::ReporterOptions options;
    options.evoscaled = flags.evoscaled;
    options.workload = flags.workload;
    options.instance =
        flags.instance.empty() ? WithPort(flags.grpc_address, grpc_port) : flags.instance;
    if (const char* token = std::getenv("EVOSCALE_TOKEN")) options.token = token;
    options.period = std::chrono::milliseconds(int64_t(flags.report_every * 1000));
    options.cpu_request_cores = flags.cpu_request;
    const evoscale::serve::Model* served = model->get();
    options.versions = [served] {
      return std::map<std::string, int64_t>{{"sparse", served->sparse_version()},
                                            {"dense", served->dense_version()}};
    };
    reporter = std::make_unique<evoscale::serve::TelemetryReporter>(options, &metrics);
  }

  const nlohmann::ordered_json listening = Listening(flags, info, grpc_port, (*http)->port());
  std::cout << listening.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  reporter.reset();
  http->reset();
  std::cout << nlohmann::json{{"event", "stopped"}}.dump() << std::endl;
  return 0;
}
