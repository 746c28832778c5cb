// serve_load: an open-loop load generator for PredictionService, and a null server (the
// transport floor: evoscale-serve's own gRPC server answering without a model).
//
//   serve_load load --target HOST:PORT --data test.tsv --qps N --seconds S [--batch B]
//                   [--channels C]        one JSON line of figures
//   serve_load push --target HOST:PORT --rows-per-s R --batch B --seconds S
//                                         rows pushed on a schedule; one JSON line
//   serve_load live --data test.tsv [--batch B]
//                                         open-loop load over a set of replicas that changes,
//                                         driven by commands on stdin (see Live below)
//   serve_load dense --target HOST:PORT --pid PID [--sizes 429,256,128,1] [--pushes N]
//                                         dense swaps; the replica's peak RSS rise per swap
//   serve_load agree --target HOST:PORT --other HOST:PORT --data test.tsv
//                                         both servers' answers on every example of the file
//                                         (100 a request); one JSON line: the largest difference
//   serve_load wake [--sleeps N]          how late a 100 us sleep wakes here (the floor)
//   serve_load burn --cores F --seconds S [--period-ms P]
//                                         spins F cores' worth of CPU, spread over ceil(F)
//                                         threads, busy at the start of every P ms (1)
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
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "serve/predict_server.h"
#include "trainer/model_sink.h"

namespace {

using Clock = std::chrono::steady_clock;
using evoscale::v1::PredictRequest;
using evoscale::v1::PredictResponse;

// `count` requests of `batch` examples each, cycling through the Criteo file's lines; none (and
// a message saying so) when the file has no examples.
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
  if (examples.empty()) {
    std::cerr << "serve_load: no examples in " << path << "\n";
    return {};
  }
  std::vector<PredictRequest> requests(static_cast<size_t>(count));
  size_t next = 0;
  for (PredictRequest& r : requests) {
    for (int i = 0; i < batch; ++i) {
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
  if (requests.empty()) return 2;
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
  // gRPC's completion-queue client: the sender starts each call, one thread takes the answers.
  struct Call {
    grpc::ClientContext ctx;
    PredictResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<PredictResponse>> rpc;
    Clock::time_point due;
    int64_t index = 0;
  };
  std::vector<double> lag(size_t(n), 0);  // sent - due: the generator's own delay
  grpc::CompletionQueue cq;
  std::thread receiver([&] {
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      if (ok && call->status.ok()) {
        latency[size_t(call->index)] =
            std::chrono::duration<double>(Clock::now() - call->due).count();
      } else {
        errors.fetch_add(1);
      }
      delete call;
      done.fetch_add(1);
    }
  });
  const auto interval = std::chrono::duration<double>(1.0 / qps);
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(10);
  for (int64_t i = 0; i < n; ++i) {
    const Clock::time_point due =
        start + std::chrono::duration_cast<Clock::duration>(interval * double(i));
    // Never spin (the server needs the cores): sleep until the next request is due, then send
    // every request that is due by then.
    if (due > Clock::now()) std::this_thread::sleep_until(due);
    auto* call = new Call;
    call->due = due;
    call->index = i;
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    lag[size_t(i)] = std::chrono::duration<double>(Clock::now() - due).count();
    call->rpc = stubs[size_t(i) % stubs.size()]->PrepareAsyncPredict(
        &call->ctx, requests[size_t(i) % requests.size()], &cq);
    call->rpc->StartCall();
    call->rpc->Finish(&call->response, &call->status, call);
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
  std::sort(lag.begin(), lag.end());
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
      {"max_ms", ok.empty() ? 0.0 : 1e3 * ok.back()},
      {"send_lag_p50_ms", 1e3 * Percentile(lag, 0.50)},
      {"send_lag_p99_ms", 1e3 * Percentile(lag, 0.99)}};
  std::cout << out.dump() << std::endl;
  // Calls still in flight hold pointers into this frame: wait for them before returning.
  while (done.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  cq.Shutdown();
  receiver.join();
  return 0;
}

// Pushes rows (ModelSyncService.PushRows) at `rows_per_s` in pushes of `batch` rows for
// `seconds`: random ids of the 26 slots (a third of them new), one source, versions counting up
// from the replica's; with part_rows > 0, each version in parts of that many rows, sent one
// after another as the trainer's client sends them. One JSON line: rows applied per second,
// push latency (a version's, from its due time to its last part's answer).
int Push(const std::string& target, double rows_per_s, int batch, double seconds, int dim,
         int part_rows) {
  auto stub = evoscale::v1::ModelSyncService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  evoscale::v1::SyncState state;
  {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    const grpc::Status st = stub->GetSyncState(&ctx, {}, &state);
    if (!st.ok()) {
      std::cerr << "serve_load: " << target << ": " << st.error_message() << "\n";
      return 1;
    }
  }
  int64_t version = std::max(state.checkpoint_step(), state.source_versions().contains("bench")
                                                          ? state.source_versions().at("bench")
                                                          : int64_t{0});
  // The pushes' rows are made before the clock starts (16 sets of random ids, reused in turn),
  // so the generator spends the shared cores sending, not building: it stands in for a trainer
  // that runs on another machine.
  std::mt19937_64 rng(7);
  const int per_part = part_rows > 0 ? std::min(part_rows, batch) : batch;
  const int parts = (batch + per_part - 1) / per_part;
  std::vector<std::vector<evoscale::v1::PushRowsRequest>> made(16);
  for (std::vector<evoscale::v1::PushRowsRequest>& version : made) {
    version.resize(size_t(parts));
    for (int r = 0; r < batch; ++r) {
      evoscale::v1::PushRowsRequest& request = version[size_t(r / per_part)];
      request.set_source("bench");
      request.set_dim(dim);
      request.set_part(r / per_part);
      request.set_parts(parts);
      const uint64_t slot = rng() % 26, value = rng() % 3 == 0 ? rng() : rng() % 20000;
      request.add_keys((slot << 48) | (value & ((uint64_t{1} << 48) - 1)));
      for (int d = 0; d < dim; ++d) request.add_values(0.001f * float(d));
    }
  }
  const int64_t pushes = std::max<int64_t>(1, int64_t(rows_per_s * seconds / batch));
  const auto interval = std::chrono::duration<double>(double(batch) / rows_per_s);
  std::vector<double> latency;
  int64_t applied = 0, failed = 0;
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < pushes; ++i) {
    const Clock::time_point due =
        start + std::chrono::duration_cast<Clock::duration>(interval * double(i));
    if (due > Clock::now()) std::this_thread::sleep_until(due);
    ++version;
    bool ok = true;
    for (evoscale::v1::PushRowsRequest& request : made[size_t(i) % made.size()]) {
      request.set_version(version);
      evoscale::v1::PushResponse response;
      grpc::ClientContext ctx;
      ok = ok && stub->PushRows(&ctx, request, &response).ok();
      if (ok) applied += response.rows_applied();
    }
    latency.push_back(std::chrono::duration<double>(Clock::now() - due).count());
    failed += !ok;
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latency.begin(), latency.end());
  std::cout << nlohmann::ordered_json{{"target", target},
                                      {"rows_per_s_target", rows_per_s},
                                      {"batch", batch},
                                      {"pushes", pushes},
                                      {"parts", parts},
                                      {"failed", failed},
                                      {"rows_applied_per_s", double(applied) / total_s},
                                      {"push_p50_ms", 1e3 * Percentile(latency, 0.5)},
                                      {"push_p99_ms", 1e3 * Percentile(latency, 0.99)}}
                   .dump()
            << std::endl;
  return failed == 0 ? 0 : 1;
}

// A field of /proc/PID/status in bytes (VmRSS, VmHWM: printed in kB); -1 when unreadable.
int64_t StatusBytes(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    int64_t kb = 0;
    std::vector<std::string> words = absl::StrSplit(line.substr(field.size() + 1), ' ',
                                                    absl::SkipWhitespace());
    if (!words.empty() && absl::SimpleAtoi(words[0], &kb)) return kb * 1024;
  }
  return -1;
}

// Dense swaps and what they cost the replica's memory: `warmup` pushes first (the allocator
// reaches its steady state), then VmRSS is read, the peak (VmHWM) reset through
// /proc/PID/clear_refs, and `pushes` more sent through the trainer's own client
// (serve/push_client.cc), one every `interval_ms`; the peak's rise over the RSS before them is
// the extra memory a swap needed, reported against the MLP's size.
int Dense(const std::string& target, int pid, const std::string& sizes_text, int warmup,
          int pushes, int interval_ms) {
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(sizes_text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      std::cerr << "serve_load: --sizes: \"" << sizes_text << "\" is not a list of widths\n";
      return 2;
    }
    sizes.push_back(v);
  }
  size_t params = 0;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    params += size_t(sizes[i]) * size_t(sizes[i + 1]) + size_t(sizes[i + 1]);
  }
  absl::StatusOr<std::unique_ptr<evoscale::trainer::ModelSink>> sink =
      evoscale::trainer::ConnectModelSink(target, "bench-dense");
  if (!sink.ok()) {
    std::cerr << "serve_load: " << sink.status() << "\n";
    return 1;
  }
  auto stub = evoscale::v1::ModelSyncService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  evoscale::v1::SyncState state;
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  if (const grpc::Status st = stub->GetSyncState(&ctx, {}, &state); !st.ok()) {
    std::cerr << "serve_load: " << target << ": " << st.error_message() << "\n";
    return 1;
  }
  evoscale::trainer::DensePush push;
  push.version = state.dense_version();
  push.sizes = sizes;
  push.params.resize(params);
  std::mt19937 rng(11);
  std::normal_distribution<float> weight(0, 0.05f);
  std::vector<double> latency;
  int64_t rss_before = -1, failed = 0;
  for (int i = 0; i < warmup + pushes; ++i) {
    if (i == warmup) {
      rss_before = StatusBytes(pid, "VmRSS");
      std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";  // VmHWM = VmRSS
    }
    for (float& w : push.params) w = weight(rng);
    ++push.version;
    const Clock::time_point t0 = Clock::now();
    if (absl::Status st = (*sink)->PushDense(push); !st.ok()) {
      std::cerr << "serve_load: push " << push.version << ": " << st << "\n";
      ++failed;
    }
    if (i >= warmup) latency.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  const int64_t peak = StatusBytes(pid, "VmHWM"), rss_after = StatusBytes(pid, "VmRSS");
  const double mlp_bytes = double(params) * sizeof(float);
  std::sort(latency.begin(), latency.end());
  std::cout << nlohmann::ordered_json{{"target", target},
                                      {"mlp_sizes", sizes_text},
                                      {"mlp_bytes", int64_t(mlp_bytes)},
                                      {"pushes", pushes},
                                      {"failed", failed},
                                      {"rss_before_bytes", rss_before},
                                      {"peak_bytes", peak},
                                      {"rss_after_bytes", rss_after},
                                      {"peak_extra_bytes", peak - rss_before},
                                      {"peak_extra_over_mlp", double(peak - rss_before) / mlp_bytes},
                                      {"push_p50_ms", 1e3 * Percentile(latency, 0.5)},
                                      {"push_p99_ms", 1e3 * Percentile(latency, 0.99)}}
                   .dump()
            << std::endl;
  return failed == 0 && rss_before > 0 && peak > 0 ? 0 : 1;
}

// Open-loop load over replicas behind a client-side balancer (round robin over the replicas
// live now, as gRPC's round_robin policy), driven by one command a line on stdin:
//   targets A,B,...  the live replicas from now on (a new one joins once connected; calls in
//                    flight to one that left finish); "targets" alone: none (calls fail)
//   qps X            the rate from now on (the schedule goes on from the last due time)
//   tick             one JSON line for the calls that finished since the last tick: count, ok,
//                    errors, latency percentiles (from each call's due time), and per replica
//                    its ok calls, errors and mean latency
//   quit             (or end of input) stop sending, wait for the calls in flight, exit
// A call not answered within 2 s is an error.
struct LiveTarget {
  std::string address;
  std::unique_ptr<evoscale::v1::PredictionService::Stub> stub;
};

struct LiveStats {
  std::vector<double> latency;  // of the calls that succeeded
  struct PerTarget {
    int64_t ok = 0, errors = 0;
    double latency_sum = 0;
  };
  std::map<std::string, PerTarget> targets;
  int64_t errors = 0, no_target = 0;
  double lag_max = 0;
};

int Live(const std::string& data, int batch) {
  const std::vector<PredictRequest> requests = Requests(data, batch, 256);
  if (requests.empty()) return 2;
  std::mutex mu;
  std::vector<std::shared_ptr<LiveTarget>> live;  // guarded by mu
  LiveStats stats;                                // guarded by mu
  std::atomic<double> rate{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> in_flight{0};
  struct Call {
    grpc::ClientContext ctx;
    PredictResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<PredictResponse>> rpc;
    std::shared_ptr<LiveTarget> target;
    Clock::time_point due;
  };
  grpc::CompletionQueue cq;
  std::thread receiver([&] {
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      const double seconds = std::chrono::duration<double>(Clock::now() - call->due).count();
      {
        std::lock_guard<std::mutex> lock(mu);
        LiveStats::PerTarget& t = stats.targets[call->target->address];
        if (ok && call->status.ok()) {
          stats.latency.push_back(seconds);
          ++t.ok;
          t.latency_sum += seconds;
        } else {
          ++stats.errors;
          ++t.errors;
        }
      }
      delete call;
      in_flight.fetch_sub(1);
    }
  });
  std::thread sender([&] {
    size_t next = 0;
    int64_t sent = 0;
    Clock::time_point due = Clock::now();
    double scheduled = 0;  // the rate `due` was scheduled at
    while (!stop.load()) {
      const double r = rate.load();
      if (r <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        due = Clock::now();
        continue;
      }
      const auto interval =
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / r));
      if (r != scheduled) {
        // A new rate: the next call is due one new interval after the last one, or now.
        due = std::max(due, Clock::now() - interval);
        scheduled = r;
      }
      const Clock::time_point following = due + interval;
      // Sleep at most 10 ms at a time, so that a new rate or a stop is seen.
      if (following > Clock::now() + std::chrono::milliseconds(10)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      due = following;
      if (due > Clock::now()) std::this_thread::sleep_until(due);
      std::shared_ptr<LiveTarget> target;
      {
        std::lock_guard<std::mutex> lock(mu);
        stats.lag_max = std::max(stats.lag_max,
                                 std::chrono::duration<double>(Clock::now() - due).count());
        if (live.empty()) {
          ++stats.no_target;
          ++stats.errors;
          continue;
        }
        target = live[next++ % live.size()];
      }
      auto* call = new Call;
      call->due = due;
      call->target = std::move(target);
      call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      in_flight.fetch_add(1);
      call->rpc = call->target->stub->PrepareAsyncPredict(
          &call->ctx, requests[size_t(sent++) % requests.size()], &cq);
      call->rpc->StartCall();
      call->rpc->Finish(&call->response, &call->status, call);
    }
  });
  std::map<std::string, std::shared_ptr<LiveTarget>> known;  // by address, connected
  Clock::time_point last_tick = Clock::now();
  for (std::string line; std::getline(std::cin, line);) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty()) continue;
    if (words[0] == "quit") break;
    if (words[0] == "qps" && words.size() == 2) {
      double r = 0;
      if (!absl::SimpleAtod(words[1], &r) || r < 0) {
        std::cerr << "serve_load live: qps: \"" << words[1] << "\" is not a rate\n";
        continue;
      }
      rate.store(r);
    } else if (words[0] == "targets") {
      std::vector<std::shared_ptr<LiveTarget>> next;
      if (words.size() > 1) {
        for (absl::string_view a : absl::StrSplit(words[1], ',', absl::SkipEmpty())) {
          const std::string address(a);
          auto it = known.find(address);
          if (it == known.end()) {
            auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
            if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(5))) {
              std::cerr << "serve_load live: " << address << ": not connected in 5 s\n";
              continue;
            }
            auto t = std::make_shared<LiveTarget>();
            t->address = address;
            t->stub = evoscale::v1::PredictionService::NewStub(channel);
            it = known.emplace(address, std::move(t)).first;
          }
          next.push_back(it->second);
        }
      }
      // Replicas that left are forgotten here; their calls in flight hold them until answered.
      for (auto it = known.begin(); it != known.end();) {
        const bool kept = std::find(next.begin(), next.end(), it->second) != next.end();
        it = kept ? std::next(it) : known.erase(it);
      }
      std::lock_guard<std::mutex> lock(mu);
      live = std::move(next);
    } else if (words[0] == "tick") {
      LiveStats taken;
      {
        std::lock_guard<std::mutex> lock(mu);
        std::swap(taken, stats);
      }
      const Clock::time_point now = Clock::now();
      std::sort(taken.latency.begin(), taken.latency.end());
      nlohmann::ordered_json per_target = nlohmann::ordered_json::object();
      for (const auto& [address, t] : taken.targets) {
        per_target[address] = {{"ok", t.ok},
                               {"errors", t.errors},
                               {"latency_mean_ms", t.ok > 0 ? 1e3 * t.latency_sum / t.ok : 0.0}};
      }
      std::cout << nlohmann::ordered_json{
                       {"seconds", std::chrono::duration<double>(now - last_tick).count()},
                       {"qps_target", rate.load()},
                       {"ok", taken.latency.size()},
                       {"errors", taken.errors},
                       {"no_target", taken.no_target},
                       {"p50_ms", 1e3 * Percentile(taken.latency, 0.50)},
                       {"p99_ms", 1e3 * Percentile(taken.latency, 0.99)},
                       {"max_ms", taken.latency.empty() ? 0.0 : 1e3 * taken.latency.back()},
                       {"send_lag_max_ms", 1e3 * taken.lag_max},
                       {"targets", per_target}}
                       .dump()
                << std::endl;
      last_tick = now;
    } else {
      std::cerr << "serve_load live: unknown command \"" << line << "\"\n";
    }
  }
  stop.store(true);
  sender.join();
  const Clock::time_point wait_until = Clock::now() + std::chrono::seconds(10);
  while (in_flight.load() > 0 && Clock::now() < wait_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  cq.Shutdown();
  receiver.join();
  return 0;
}

// The machine's own floor: how late a thread that sleeps 100 us wakes, over `count` sleeps
// (every server and client thread that blocks pays this on its next request).
int Wake(int count) {
  std::vector<double> late;
  for (int i = 0; i < count; ++i) {
    const Clock::time_point due = Clock::now() + std::chrono::microseconds(100);
    std::this_thread::sleep_until(due);
    late.push_back(std::chrono::duration<double>(Clock::now() - due).count());
  }
  std::sort(late.begin(), late.end());
  std::cout << nlohmann::ordered_json{{"sleeps", count},
                                      {"late_p50_ms", 1e3 * Percentile(late, 0.5)},
                                      {"late_p90_ms", 1e3 * Percentile(late, 0.9)},
                                      {"late_p99_ms", 1e3 * Percentile(late, 0.99)},
                                      {"late_max_ms", 1e3 * late.back()}}
                   .dump()
            << std::endl;
  return 0;
}

// Spins `cores` cores' worth of CPU for `seconds`: ceil(cores) threads, each busy for its
// share of every period at its start and asleep for the rest (what a replica's push work costs
// its cores, in bursts as the pushes come, without the pushes: push_under_load.py's bound).
int Burn(double cores, double seconds, double period_ms) {
  const int threads = std::max(1, int(std::ceil(cores)));
  const double duty = std::min(1.0, cores / threads);
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(period_ms));
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  std::vector<std::thread> spinners;
  for (int t = 0; t < threads; ++t) {
    spinners.emplace_back([&] {
      for (Clock::time_point start = Clock::now(); start < end; start += period) {
        const Clock::time_point busy_until =
            start + std::chrono::duration_cast<Clock::duration>(period * duty);
        while (Clock::now() < busy_until) {
        }
        std::this_thread::sleep_until(start + period);
      }
    });
  }
  for (std::thread& t : spinners) t.join();
  std::cout << nlohmann::ordered_json{{"cores", cores}, {"seconds", seconds},
                                      {"period_ms", period_ms}}
                   .dump()
            << std::endl;
  return 0;
}

// Both servers' probabilities for every example of `data`, 100 examples a request: how far
// apart they are (a peer serving the same weights should agree to float rounding).
int Agree(const std::string& target, const std::string& other, const std::string& data) {
  std::ifstream in(data);
  const auto lines = std::count(std::istreambuf_iterator<char>(in), {}, '\n');
  const std::vector<PredictRequest> requests = Requests(data, 100, int((lines + 99) / 100));
  if (requests.empty()) return 2;
  auto a = evoscale::v1::PredictionService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  auto b = evoscale::v1::PredictionService::NewStub(
      grpc::CreateChannel(other, grpc::InsecureChannelCredentials()));
  double max_diff = 0, sum_diff = 0;
  int64_t examples = 0;
  for (const PredictRequest& request : requests) {
    PredictResponse ra, rb;
    grpc::ClientContext ca, cb;
    const grpc::Status sa = a->Predict(&ca, request, &ra), sb = b->Predict(&cb, request, &rb);
    if (!sa.ok() || !sb.ok() || ra.probabilities_size() != rb.probabilities_size()) {
      std::cerr << "serve_load agree: " << (sa.ok() ? sb : sa).error_message() << "\n";
      return 1;
    }
    for (int i = 0; i < ra.probabilities_size(); ++i) {
      const double d = std::abs(double(ra.probabilities(i)) - double(rb.probabilities(i)));
      max_diff = std::max(max_diff, d);
      sum_diff += d;
      ++examples;
    }
  }
  std::cout << nlohmann::json{{"examples", examples},
                              {"max_abs_diff", max_diff},
                              {"mean_abs_diff", sum_diff / double(std::max<int64_t>(1, examples))}}
                   .dump()
            << std::endl;
  return 0;
}

// The transport floor: evoscale-serve's own server (PredictServer) answering one fixed
// probability per example, without a model.
int Null(const std::string& address, int threads) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as evoscale-serve
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto server = evoscale::serve::PredictServer::Start(
      address,
      [](const PredictRequest& request, PredictResponse* response) {
        response->mutable_probabilities()->Resize(request.examples_size(), 0.5f);
        return grpc::Status::OK;
      },
      threads, 64 << 20);
  if (!server.ok()) return 1;
  std::cout << nlohmann::json{{"event", "listening"},
                              {"grpc", address.substr(0, address.rfind(':') + 1) +
                                           std::to_string((*server)->port())}}
                   .dump()
            << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("serve_load: open-loop load for PredictionService, and a null server");
  app.require_subcommand(1);
  std::string target, data, address = "127.0.0.1:0";
  double qps = 1000, seconds = 5;
  int batch = 1, channels = 4, threads = 2;
  CLI::App* load = app.add_subcommand("load", "send requests on a schedule, report latency");
  load->add_option("--target", target)->required();
  load->add_option("--data", data, "a Criteo file")->required();
  load->add_option("--qps", qps)->check(CLI::PositiveNumber);
  load->add_option("--seconds", seconds)->check(CLI::PositiveNumber);
  load->add_option("--batch", batch)->check(CLI::Range(1, 100000));
  load->add_option("--channels", channels)->check(CLI::Range(1, 64));
  double rows_per_s = 1e6;
  int dim = 16, part_rows = 0;
  CLI::App* push = app.add_subcommand("push", "push rows to a replica on a schedule");
  push->add_option("--target", target)->required();
  push->add_option("--rows-per-s", rows_per_s)->check(CLI::PositiveNumber);
  push->add_option("--batch", batch)->check(CLI::Range(1, 1000000));
  push->add_option("--seconds", seconds)->check(CLI::PositiveNumber);
  push->add_option("--dim", dim)->check(CLI::Range(1, 1024));
  push->add_option("--part-rows", part_rows, "send each version in parts of this many rows")
      ->check(CLI::Range(0, 1000000));
  int pid = 0, warmup = 3, pushes = 20, interval_ms = 100;
  std::string sizes = "429,256,128,1";
  CLI::App* dense = app.add_subcommand("dense", "push dense MLPs, report the replica's peak RSS");
  dense->add_option("--target", target)->required();
  dense->add_option("--pid", pid, "the replica's pid (its /proc status)")->required();
  dense->add_option("--sizes", sizes, "the served MLP's widths (default: the trainer's)");
  dense->add_option("--warmup", warmup)->check(CLI::Range(0, 1000));
  dense->add_option("--pushes", pushes)->check(CLI::Range(1, 100000));
  dense->add_option("--interval-ms", interval_ms)->check(CLI::Range(0, 600000));
  CLI::App* live = app.add_subcommand("live", "load over a changing set of replicas (stdin)");
  live->add_option("--data", data, "a Criteo file")->required();
  live->add_option("--batch", batch)->check(CLI::Range(1, 100000));
  std::string other;
  CLI::App* agree = app.add_subcommand("agree", "compare two servers' answers on a file");
  agree->add_option("--target", target)->required();
  agree->add_option("--other", other)->required();
  agree->add_option("--data", data, "a Criteo file")->required();
  int sleeps = 20000;
  CLI::App* wake = app.add_subcommand("wake", "how late this machine wakes a sleeping thread");
  CLI::App* burn = app.add_subcommand("burn", "spins a given number of cores' worth of CPU");
  double cores = 0.5;
  burn->add_option("--cores", cores)->check(CLI::Range(0.01, 64.0));
  burn->add_option("--seconds", seconds)->check(CLI::PositiveNumber);
  double period_ms = 1;
  burn->add_option("--period-ms", period_ms)->check(CLI::Range(0.1, 10000.0));
  wake->add_option("--sleeps", sleeps)->check(CLI::Range(1, 10000000));
  CLI::App* null = app.add_subcommand("null", "serve Predict without a model");
  null->add_option("--grpc", address);
  null->add_option("--threads", threads)->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  if (*load) return Load(target, data, qps, seconds, batch, channels);
  if (*push) return Push(target, rows_per_s, batch, seconds, dim, part_rows);
  if (*wake) return Wake(sleeps);
  if (*burn) return Burn(cores, seconds, period_ms);
  if (*dense) return Dense(target, pid, sizes, warmup, pushes, interval_ms);
  if (*live) return Live(data, batch);
  if (*agree) return Agree(target, other, data);
  return Null(address, threads);
}
