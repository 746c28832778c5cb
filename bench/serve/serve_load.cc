// serve_load: an open-loop load generator for PredictionService, and a null server (the
// transport floor: the same RPC answered without a model).
//
//   serve_load load --target HOST:PORT --data test.tsv --qps N --seconds S [--batch B]
//                   [--channels C]        one JSON line of figures
//   serve_load null --grpc HOST:PORT      prints {"event":"listening","grpc":...}, serves until
//                                         SIGINT/SIGTERM
//
// Open loop: request i is due at start + i / qps whatever the answers do, and its latency runs
// from when it was due (not when it was sent), so a server or generator that falls behind shows
// it in the latency instead of hiding it (no coordinated omission). Requests cycle through the
// data file's lines, `batch` examples each.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using evoscale::v1::PredictRequest;
using evoscale::v1::PredictResponse;

std::vector<PredictRequest> Requests(const std::string& path, int batch, int count) {
  std::ifstream in(path);
  std::vector<evoscale::v1::Example> examples;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() != 40) continue;
    evoscale::v1::Example e;
    for (int f = 1; f <= 13; ++f) e.add_numeric(fields[f].empty() ? 0 : std::stoll(fields[f]));
    for (int f = 14; f < 40; ++f) e.add_categorical(fields[f]);
    examples.push_back(std::move(e));
  }
  std::vector<PredictRequest> requests(static_cast<size_t>(count));
  size_t next = 0;
  for (PredictRequest& r : requests) {
    for (int i = 0; i < batch && !examples.empty(); ++i) {
      *r.add_examples() = examples[next++ % examples.size()];
    }
  }
  return requests;
}

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, size_t(q * double(sorted.size())));
  return sorted[i];
}

int Load(const std::string& target, const std::string& data, double qps, double seconds,
         int batch, int channels) {
  const std::vector<PredictRequest> requests = Requests(data, batch, 256);
  if (requests.empty() || requests[0].examples_size() == 0) {
    std::cerr << "serve_load: no examples in " << data << "\n";
    return 2;
  }
  std::vector<std::unique_ptr<evoscale::v1::PredictionService::Stub>> stubs;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per channel
    args.SetInt("evoscale.channel", c);                   // distinct channels, not shared
    stubs.push_back(evoscale::v1::PredictionService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  // Warm up: every channel connected before the clock starts.
  for (auto& stub : stubs) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    PredictResponse response;
    const grpc::Status st = stub->Predict(&ctx, requests[0], &response);
    if (!st.ok()) {
      std::cerr << "serve_load: " << target << ": " << st.error_message() << "\n";
      return 1;
    }
  }
  const int64_t n = std::max<int64_t>(1, int64_t(qps * seconds));
  std::vector<double> latency(size_t(n), -1);
  std::atomic<int64_t> done{0}, errors{0};
  struct Call {
    grpc::ClientContext ctx;
    PredictResponse response;
  };
  const auto interval = std::chrono::duration<double>(1.0 / qps);
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(10);
  for (int64_t i = 0; i < n; ++i) {
    const Clock::time_point due =
        start + std::chrono::duration_cast<Clock::duration>(interval * double(i));
    // Never spin (the server needs the cores): sleep until the next request is due, then send
    // every request that is due by then.
    if (due > Clock::now()) std::this_thread::sleep_until(due);
    auto* call = new Call;
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    stubs[size_t(i) % stubs.size()]->async()->Predict(
        &call->ctx, &requests[size_t(i) % requests.size()], &call->response,
        [call, due, i, &latency, &done, &errors](grpc::Status st) {
          if (st.ok()) {
            latency[size_t(i)] = std::chrono::duration<double>(Clock::now() - due).count();
          } else {
            errors.fetch_add(1);
          }
          delete call;
          done.fetch_add(1);
        });
  }
  const double sent_s = std::chrono::duration<double>(Clock::now() - start).count();
  const Clock::time_point wait_until = Clock::now() + std::chrono::seconds(15);
  while (done.load() < n && Clock::now() < wait_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ok;
  for (double v : latency) {
    if (v >= 0) ok.push_back(v);
  }
  std::sort(ok.begin(), ok.end());
  nlohmann::ordered_json out = {
      {"target", target},
      {"batch", batch},
      {"qps_target", qps},
      {"qps_sent", double(n) / sent_s},
      {"requests", n},
      {"ok", ok.size()},
      {"errors", errors.load()},
      {"unanswered", n - done.load()},
      {"examples_per_s", double(ok.size()) * batch / total_s},
      {"p50_ms", 1e3 * Percentile(ok, 0.50)},
      {"p90_ms", 1e3 * Percentile(ok, 0.90)},
      {"p99_ms", 1e3 * Percentile(ok, 0.99)},
      {"p999_ms", 1e3 * Percentile(ok, 0.999)},
      {"max_ms", ok.empty() ? 0.0 : 1e3 * ok.back()}};
  std::cout << out.dump() << std::endl;
  // Calls still in flight hold pointers into this frame: wait for them before returning.
  while (done.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return 0;
}

// The transport floor: Predict answered with one fixed probability per example.
class NullService final : public evoscale::v1::PredictionService::CallbackService {
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const PredictRequest* request,
                                    PredictResponse* response) override {
    response->mutable_probabilities()->Resize(request->examples_size(), 0.5f);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

int Null(const std::string& address) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  NullService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return 1;
  std::cout << nlohmann::json{{"event", "listening"},
                              {"grpc", address.substr(0, address.rfind(':') + 1) +
                                           std::to_string(port)}}
                   .dump()
            << std::endl;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server->Shutdown();
  });
  server->Wait();
  waiter.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("serve_load: open-loop load for PredictionService, and a null server");
  app.require_subcommand(1);
  std::string target, data, address = "127.0.0.1:0";
  double qps = 1000, seconds = 5;
  int batch = 1, channels = 4;
  CLI::App* load = app.add_subcommand("load", "send requests on a schedule, report latency");
  load->add_option("--target", target)->required();
  load->add_option("--data", data, "a Criteo file")->required();
  load->add_option("--qps", qps)->check(CLI::PositiveNumber);
  load->add_option("--seconds", seconds)->check(CLI::PositiveNumber);
  load->add_option("--batch", batch)->check(CLI::Range(1, 100000));
  load->add_option("--channels", channels)->check(CLI::Range(1, 64));
  CLI::App* null = app.add_subcommand("null", "serve Predict without a model");
  null->add_option("--grpc", address);
  CLI11_PARSE(app, argc, argv);
  if (*load) return Load(target, data, qps, seconds, batch, channels);
  return Null(address);
}
