// service_bench: a closed-loop gRPC load generator for evoscale's StudyService.
//
// Starts build/bin/evoscaled as a child process on a temporary database (or uses --server),
// creates a 10-D study, preloads it with completed trials, then for each client count runs a
// closed loop per client thread: SuggestTrials(1) followed by CompleteTrial(sphere loss).
// Reports pairs per second and p50/p99 latency of the pair and of each RPC. See
// bench/README.md for how to run it and the figures measured.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/evoscaled_process.h"
#include "tests/support/postgres_server.h"

ABSL_FLAG(std::string, server, "",
          "HOST:PORT of a running evoscaled; empty: start build/bin/evoscaled as a child on a "
          "temporary database");
ABSL_FLAG(std::string, durability, "process",
          "process|power: passed to the child evoscaled (with --server: only reported)");
ABSL_FLAG(std::string, db_dir, "",
          "directory for the child's database (default: a fresh directory under $TMPDIR)");
ABSL_FLAG(int, optuna_workers, 0,
          "with --postgres: then run Optuna's RDBStorage on the same PostgreSQL server with this "
          "many worker processes for --seconds (bench/service/optuna_rdb_peer.py, Debian's "
          "python3-optuna and python3-psycopg2) and print the ratio to the last round");
ABSL_FLAG(bool, postgres, false,
          "the child's studies in a throwaway PostgreSQL server started for the run (Debian's "
          "binaries, fsync on, tests/support/postgres_server.h) instead of SQLite; telemetry "
          "stays in an SQLite file in the db dir");
ABSL_FLAG(int, replicas, 1,
          "with --postgres: start this many evoscaled replicas on the one database; client i "
          "talks to replica i % N (its channel's), and study k is created through replica k % N "
          "(which then owns it)");
ABSL_FLAG(int, studies, 1,
          "studies the clients share: client i works on study i % K (the preload goes to the "
          "first); with --replicas N and K = N each replica's clients work on its own study, "
          "with K = 1 the other replicas' calls are forwarded to the owner");
ABSL_FLAG(std::string, clients, "1,16,64", "comma-separated client counts, one round each");
ABSL_FLAG(double, rate, 0,
          "pairs per second offered by all clients together, paced (open loop): each client "
          "starts its pairs on a fixed schedule and latency counts from the scheduled start, so "
          "a late generator cannot hide queueing; 0 = closed loop as fast as possible. Needs "
          "the async driver (--client_threads > 0)");
ABSL_FLAG(double, seconds, 5, "measured seconds per round");
ABSL_FLAG(double, warmup, 0.5, "unmeasured seconds at the start of each round");
ABSL_FLAG(int, preload, 10000, "completed trials created before the first round");
ABSL_FLAG(int, preload_threads, 16, "threads issuing the preload CreateTrial calls");
ABSL_FLAG(int, connections, 0,
          "gRPC channels (TCP connections) the clients share round-robin; 0: one per client");
ABSL_FLAG(int, client_threads, 1,
          "N > 0: N threads drive the clients through the asynchronous API (the server sees the "
          "same closed loops; the generator takes less of a small machine's CPU); 0: one thread "
          "per client with the synchronous API");
ABSL_FLAG(std::string, server_http, "",
          "with --server: its HTTP HOST:PORT, to read handler latency from /metrics");
ABSL_FLAG(bool, json, false,
          "print one JSON object per row on stdout (human-readable text goes to stderr)");

namespace {

namespace v1 = ::evoscale::v1;
using Clock = std::chrono::steady_clock;

constexpr int kDim = 10;
constexpr auto kRpcDeadline = std::chrono::seconds(30);

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
int64_t Nanos(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// A channel of its own: a distinct argument and a local subchannel pool keep gRPC from
// sharing one TCP connection between channels to the same address.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int index) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("evoscale.bench.channel", index);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
}

double Sphere(const google::protobuf::RepeatedPtrField<v1::Parameter>& params) {
  double s = 0;
  for (const v1::Parameter& p : params) s += p.double_value() * p.double_value();
  return s;
}

// Nearest-rank percentile of `sorted` (ascending), in milliseconds.
double PercentileMs(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return NAN;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1e6;
}

// CPU seconds (user + system) a process has used; nullopt when unreadable.
std::optional<double> ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may contain spaces.
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 > line.size()) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(line.substr(paren + 2), ' ');
  // utime and stime are fields 14 and 15 of stat(5); f[0] is field 3.
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return std::nullopt;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The fields of /proc/PID/stat after the command name: f[0] is stat(5)'s field 3 (state).
std::optional<std::vector<std::string>> StatFields(const std::string& pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 > line.size()) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(line.substr(paren + 2), ' ');
  if (f.size() < 15) return std::nullopt;
  return f;
}

// CPU seconds used by the process `root` and every live descendant, plus what its reaped
// children used (cutime + cstime): for PostgreSQL, the postmaster, its backends and its
// background workers. nullopt when `root` is unreadable.
std::optional<double> TreeCpuSeconds(pid_t root) {
  std::unordered_map<int64_t, std::vector<int64_t>> children;
  std::unordered_map<int64_t, double> own;
  double root_reaped = 0;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    int64_t pid = 0, ppid = 0, utime = 0, stime = 0, cutime = 0, cstime = 0;
    if (!absl::SimpleAtoi(name, &pid)) continue;
    std::optional<std::vector<std::string>> f = StatFields(name);
    if (!f || !absl::SimpleAtoi((*f)[1], &ppid) || !absl::SimpleAtoi((*f)[11], &utime) ||
        !absl::SimpleAtoi((*f)[12], &stime) || !absl::SimpleAtoi((*f)[13], &cutime) ||
        !absl::SimpleAtoi((*f)[14], &cstime)) {
      continue;
    }
    children[ppid].push_back(pid);
    own[pid] = static_cast<double>(utime + stime) / tick;
    if (pid == root) root_reaped = static_cast<double>(cutime + cstime) / tick;
  }
  if (!own.contains(root)) return std::nullopt;
  double total = root_reaped;
  std::vector<int64_t> todo = {root};
  while (!todo.empty()) {
    const int64_t pid = todo.back();
    todo.pop_back();
    total += own[pid];
    for (int64_t child : children[pid]) todo.push_back(child);
  }
  return total;
}

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

absl::Status FromGrpc(const grpc::Status& st, absl::string_view what) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                      absl::StrCat(what, ": ", st.error_message()));
}

absl::StatusOr<std::string> CreateBenchStudy(v1::StudyService::Stub& stub,
                                             const std::string& display_name = "service_bench") {
  v1::CreateStudyRequest req;
  v1::Study* study = req.mutable_study();
  study->set_display_name(display_name);
  v1::StudySpec* spec = study->mutable_spec();
  v1::MetricSpec* metric = spec->add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  for (int i = 0; i < kDim; ++i) {
    v1::ParameterSpec* p = spec->add_parameters();
    p->set_name(absl::StrCat("x", i));
    p->mutable_double_spec()->set_min(-5);
    p->mutable_double_spec()->set_max(5);
  }
  spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  spec->set_max_trials(0);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::Study out;
  if (grpc::Status st = stub.CreateStudy(&ctx, req, &out); !st.ok()) {
    return FromGrpc(st, "CreateStudy");
  }
  return out.name();
}

absl::StatusOr<v1::Study> GetStudy(v1::StudyService::Stub& stub, const std::string& name) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetStudyRequest req;
  req.set_name(name);
  v1::Study out;
  if (grpc::Status st = stub.GetStudy(&ctx, req, &out); !st.ok()) return FromGrpc(st, "GetStudy");
  return out;
}

// Creates `total` SUCCEEDED trials (random parameters, sphere loss) from `threads` threads.
absl::Status Preload(const std::vector<std::unique_ptr<v1::StudyService::Stub>>& stubs,
                     const std::string& study, int total, int threads) {
  std::atomic<int> next{0};
  absl::Mutex mu;
  absl::Status first_error;
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      v1::StudyService::Stub& stub = *stubs[w % stubs.size()];
      std::mt19937_64 rng(1234 + w);
      std::uniform_real_distribution<double> uniform(-5, 5);
      while (next.fetch_add(1) < total) {
        v1::CreateTrialRequest req;
        req.set_parent(study);
        v1::Trial* t = req.mutable_trial();
        double loss = 0;
        for (int i = 0; i < kDim; ++i) {
          v1::Parameter* p = t->add_parameters();
          p->set_name(absl::StrCat("x", i));
          const double x = uniform(rng);
          p->set_double_value(x);
          loss += x * x;
        }
        (*t->mutable_final_measurement()->mutable_metrics())["loss"] = loss;
        grpc::ClientContext ctx;
        SetDeadline(&ctx);
        v1::Trial out;
        if (grpc::Status st = stub.CreateTrial(&ctx, req, &out); !st.ok()) {
          absl::MutexLock lock(&mu);
          if (first_error.ok()) first_error = FromGrpc(st, "CreateTrial");
          return;
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  return first_error;
}

// What the clients of one thread measured: latencies (ns) of the pairs and RPCs that ended
// within the measured window.
struct ClientLog {
  std::vector<int64_t> pair, suggest, complete;
  int64_t errors = 0;
  std::string first_error;

  void Fail(const grpc::Status& st, const char* rpc) {
    ++errors;
    if (first_error.empty()) {
      first_error = absl::StrCat(rpc, ": code ", st.error_code(), ": ", st.error_message());
    }
  }
};

// The measured window of a round, fixed before the clients start.
struct Window {
  Clock::time_point from;  // warm-up ends
  Clock::time_point stop;  // no call starts after this
  bool Contains(Clock::time_point t) const { return t >= from && t < stop; }
};

void FillComplete(const v1::Trial& trial, v1::CompleteTrialRequest* req) {
  req->set_name(trial.name());
  (*req->mutable_final_measurement()->mutable_metrics())["loss"] = Sphere(trial.parameters());
}

// Records a finished SuggestTrials; returns whether a trial came back to complete.
bool OnSuggested(const grpc::Status& st, const v1::SuggestTrialsResponse& resp,
                 Clock::time_point t0, Clock::time_point t1, const Window& w, ClientLog* log) {
  const bool ok = st.ok() && resp.trials_size() == 1;
  if (w.Contains(t1)) {
    if (ok) {
      log->suggest.push_back(Nanos(t1 - t0));
    } else {
      log->Fail(st.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN, "no trial suggested") : st,
                "SuggestTrials");
    }
  }
  return ok;
}

void OnCompleted(const grpc::Status& st, Clock::time_point t0, Clock::time_point t1,
                 Clock::time_point t2, const Window& w, ClientLog* log) {
  if (!w.Contains(t2)) return;
  if (!st.ok()) {
    log->Fail(st, "CompleteTrial");
    return;
  }
  log->complete.push_back(Nanos(t2 - t1));
  log->pair.push_back(Nanos(t2 - t0));
}

v1::SuggestTrialsRequest SuggestRequest(const std::string& study, const std::string& client_id) {
  v1::SuggestTrialsRequest req;
  req.set_parent(study);
  req.set_suggestion_count(1);
  req.set_client_id(client_id);
  return req;
}

// One client on its own thread with the synchronous API: SuggestTrials(1), then
// CompleteTrial, until the window closes.
void RunSyncClient(v1::StudyService::Stub* stub, const std::string& study,
                   const std::string& client_id, const absl::Notification* go,
                   const Window* w, ClientLog* log) {
  go->WaitForNotification();
  const v1::SuggestTrialsRequest sreq = SuggestRequest(study, client_id);
  while (true) {
    const Clock::time_point t0 = Clock::now();
    if (t0 >= w->stop) break;
    v1::SuggestTrialsResponse sresp;
    grpc::Status st;
    {
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      st = stub->SuggestTrials(&ctx, sreq, &sresp);
    }
    const Clock::time_point t1 = Clock::now();
    if (!OnSuggested(st, sresp, t0, t1, *w, log)) continue;
    v1::CompleteTrialRequest creq;
    FillComplete(sresp.trials(0), &creq);
    v1::Trial cresp;
    {
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      st = stub->CompleteTrial(&ctx, creq, &cresp);
    }
    OnCompleted(st, t0, t1, Clock::now(), *w, log);
  }
}

// Several clients driven by one thread through the asynchronous API and a completion queue:
// the server sees the same closed loops (each client on its own channel), but the load
// generator spends less of the shared CPUs on threads and context switches.
class AsyncDriver {
 public:
  // `rate` > 0: all `total_clients` clients together offer `rate` pairs/s, paced.
  AsyncDriver(const std::string* study, const Window* w, ClientLog* log, double rate = 0,
              int total_clients = 1)
      : study_(study), w_(w), log_(log), rate_(rate), total_clients_(total_clients) {}

  // `index` is the client's number among all clients (staggers the paced schedules).
  // `study`: the client's own (null: the driver's).
  void AddClient(v1::StudyService::Stub* stub, const std::string& client_id, int index = 0,
                 const std::string* study = nullptr) {
    auto c = std::make_unique<Client>();
    c->stub = stub;
    c->sreq = SuggestRequest(study != nullptr ? *study : *study_, client_id);
    c->index = index;
    clients_.push_back(std::move(c));
  }

  void Run(const absl::Notification* go) {
    go->WaitForNotification();
    size_t running = 0;
    const Clock::time_point start = Clock::now();
    for (auto& c : clients_) {
      if (rate_ > 0) {
        const Clock::duration interval = Interval();
        c->next = start + interval * c->index / total_clients_;
        running += Schedule(c.get()) ? 1 : 0;
      } else {
        running += StartSuggest(c.get(), start) ? 1 : 0;
      }
    }
    void* tag = nullptr;
    bool ok = false;
    while (running > 0 && cq_.Next(&tag, &ok)) {
      Client* c = static_cast<Client*>(tag);
      const Clock::time_point now = Clock::now();
      bool more = false;
      if (c->phase == Phase::kWait) {
        more = StartSuggest(c, c->next);
      } else if (c->phase == Phase::kSuggest) {
        c->t1 = now;
        if (OnSuggested(c->status, c->sresp, c->t0, c->t1, *w_, log_)) {
          more = StartComplete(c);
        } else {
          more = Next(c, now);
        }
      } else {
        OnCompleted(c->status, c->t0, c->t1, now, *w_, log_);
        more = Next(c, now);
      }
      if (!more) --running;
    }
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) {
    }
  }

 private:
  enum class Phase { kWait, kSuggest, kComplete };
  struct Client {
    v1::StudyService::Stub* stub = nullptr;
    int index = 0;
    Clock::time_point next;  // paced: the scheduled start of the next pair
    grpc::Alarm alarm;
    v1::SuggestTrialsRequest sreq;
    Phase phase = Phase::kSuggest;
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::SuggestTrialsResponse>> sreader;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::Trial>> creader;
    v1::SuggestTrialsResponse sresp;
    v1::CompleteTrialRequest creq;
    v1::Trial cresp;
    grpc::Status status;
    Clock::time_point t0, t1;
  };

  Clock::duration Interval() const {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(total_clients_ / rate_));
  }

  // After a pair: the next one at once (closed loop) or at its scheduled time (paced).
  bool Next(Client* c, Clock::time_point now) {
    if (rate_ <= 0) return StartSuggest(c, now);
    c->next += Interval();
    return Schedule(c);
  }

  // Paced: starts the pair now if its time has come (its latency still counts from the
  // schedule), else sets an alarm for it.
  bool Schedule(Client* c) {
    const Clock::time_point now = Clock::now();
    if (c->next >= w_->stop) return false;
    if (c->next <= now) return StartSuggest(c, c->next);
    c->phase = Phase::kWait;
    c->alarm.Set(&cq_,
                 std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::system_clock::duration>(c->next - now),
                 c);
    return true;
  }

  // Starts the pair that began (or was scheduled) at `now` unless the window has closed;
  // returns whether a call is in flight.
  bool StartSuggest(Client* c, Clock::time_point now) {
    if (now >= w_->stop) return false;
    c->phase = Phase::kSuggest;
    c->t0 = now;
    c->ctx = std::make_unique<grpc::ClientContext>();
    SetDeadline(c->ctx.get());
    c->sresp.Clear();
    c->sreader = c->stub->PrepareAsyncSuggestTrials(c->ctx.get(), c->sreq, &cq_);
    c->sreader->StartCall();
    c->sreader->Finish(&c->sresp, &c->status, c);
    return true;
  }

  bool StartComplete(Client* c) {
    c->phase = Phase::kComplete;
    c->creq.Clear();
    FillComplete(c->sresp.trials(0), &c->creq);
    c->ctx = std::make_unique<grpc::ClientContext>();
    SetDeadline(c->ctx.get());
    c->creader = c->stub->PrepareAsyncCompleteTrial(c->ctx.get(), c->creq, &cq_);
    c->creader->StartCall();
    c->creader->Finish(&c->cresp, &c->status, c);
    return true;
  }

  const std::string* const study_;
  const Window* const w_;
  ClientLog* const log_;
  const double rate_;
  const int total_clients_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Client>> clients_;
};

// Server-side handler latency per method, from evoscaled's /metrics histogram
// (evoscale_rpc_latency_seconds): the time inside StudyServiceImpl, lock waits and the SQLite
// commit included, gRPC transport and scheduling excluded.
struct HandlerHistogram {
  std::vector<double> bounds;   // upper bounds, seconds; the last is +Inf
  std::vector<double> counts;   // cumulative
  double sum = 0;
};
using HandlerHistograms = std::map<std::string, HandlerHistogram>;

std::optional<std::string> HttpGet(const std::string& host_port, const std::string& path) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return std::nullopt;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string req =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", host_port, "\r\nConnection: close\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

// What one read of evoscaled's /metrics gives the bench: the handler histograms and the
// store's write and commit counts (NaN if absent).
struct ServerScrape {
  HandlerHistograms handlers;
  double store_writes = NAN;
  double store_commits = NAN;
};

ServerScrape ScrapeMetrics(const std::string& http_address) {
  ServerScrape out;
  std::optional<std::string> body = HttpGet(http_address, "/metrics");
  if (!body) return out;
  auto label = [](absl::string_view line, absl::string_view key) -> std::string {
    const std::string k = absl::StrCat(key, "=\"");
    size_t b = line.find(k);
    if (b == absl::string_view::npos) return "";
    b += k.size();
    return std::string(line.substr(b, line.find('"', b) - b));
  };
  for (absl::string_view line : absl::StrSplit(*body, '\n')) {
    double value = 0;
    if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) continue;
    if (absl::StartsWith(line, "evoscale_store_operations_total{op=\"write\"}")) {
      out.store_writes = value;
      continue;
    }
    if (absl::StartsWith(line, "evoscale_store_operations_total{op=\"commit\"}")) {
      out.store_commits = value;
      continue;
    }
    const bool bucket = absl::StartsWith(line, "evoscale_rpc_latency_seconds_bucket{");
    const bool sum = absl::StartsWith(line, "evoscale_rpc_latency_seconds_sum{");
    if (!bucket && !sum) continue;
    HandlerHistogram& m = out.handlers[label(line, "method")];
    if (sum) {
      m.sum = value;
      continue;
    }
    const std::string le = label(line, "le");
    double bound = 0;
    if (le == "+Inf") {
      bound = INFINITY;
    } else if (!absl::SimpleAtod(le, &bound)) {
      continue;
    }
    m.bounds.push_back(bound);
    m.counts.push_back(value);
  }
  return out;
}

struct HandlerStats {
  double mean_ms = NAN;
  double p50_ms = NAN;  // interpolated within the histogram's buckets
  double p99_ms = NAN;
};

HandlerStats HandlerDelta(const HandlerHistograms& before, const HandlerHistograms& after,
                          const std::string& method) {
  HandlerStats s;
  auto a = after.find(method);
  if (a == after.end() || a->second.counts.empty()) return s;
  std::vector<double> counts = a->second.counts;
  double sum = a->second.sum;
  if (auto b = before.find(method); b != before.end() && b->second.counts.size() == counts.size()) {
    for (size_t i = 0; i < counts.size(); ++i) counts[i] -= b->second.counts[i];
    sum -= b->second.sum;
  }
  const double n = counts.back();
  if (n <= 0) return s;
  s.mean_ms = sum / n * 1e3;
  auto quantile = [&](double q) {
    const double target = q * n;
    double lo = 0, below = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] >= target) {
        const double hi = a->second.bounds[i];
        if (std::isinf(hi)) return lo * 1e3;
        const double in = counts[i] - below;
        return (lo + (hi - lo) * (in > 0 ? (target - below) / in : 1)) * 1e3;
      }
      lo = a->second.bounds[i];
      below = counts[i];
    }
    return lo * 1e3;
  };
  s.p50_ms = quantile(0.5);
  s.p99_ms = quantile(0.99);
  return s;
}

struct RoundResult {
  int clients = 0;
  int connections = 0;
  int client_threads = 0;  // 0: one synchronous thread per client
  double seconds = 0;
  int64_t pairs = 0;
  int64_t errors = 0;
  std::string first_error;
  std::vector<int64_t> pair, suggest, complete;  // sorted, ns
  std::optional<double> server_cpu_s;
  double client_cpu_s = 0;
  // With replica_pids / postgres_pid: every replica's CPU, and PostgreSQL's (all its processes).
  std::optional<double> replicas_cpu_s, postgres_cpu_s;
  int64_t study_trials_before = 0;
  HandlerStats handler_suggest, handler_complete;
  double store_writes = NAN, store_commits = NAN;  // during the round (warm-up included)
};

struct RoundConfig {
  std::string study;
  std::vector<std::string> studies;  // client i works on studies[i % size] (empty: study)
  int clients = 1;
  int client_threads = 0;
  double seconds = 5;
  double warmup = 0.5;
  double rate = 0;           // > 0: paced, pairs/s over all clients
  pid_t server_pid = -1;     // > 0: sample its CPU use
  std::vector<pid_t> replica_pids;  // every evoscaled replica started here (CPU per pair)
  pid_t postgres_pid = -1;          // > 0: PostgreSQL's postmaster (CPU of its whole tree)
  std::string http_address;  // non-empty: scrape its /metrics
};

const std::string* StudyOf(const RoundConfig& cfg, int client) {
  return cfg.studies.empty() ? &cfg.study : &cfg.studies[client % cfg.studies.size()];
}

RoundResult RunRound(const std::vector<std::unique_ptr<v1::StudyService::Stub>>& stubs,
                     const RoundConfig& cfg) {
  RoundResult r;
  r.clients = cfg.clients;
  r.connections = static_cast<int>(std::min<size_t>(stubs.size(), cfg.clients));
  r.client_threads = cfg.client_threads > 0 ? std::min(cfg.client_threads, cfg.clients) : 0;
  r.seconds = cfg.seconds;
  if (absl::StatusOr<v1::Study> s = GetStudy(*stubs[0], cfg.study); s.ok()) {
    r.study_trials_before = s->trial_count();
  }
  const int threads = r.client_threads > 0 ? r.client_threads : cfg.clients;
  std::vector<ClientLog> logs(threads);
  std::vector<std::unique_ptr<AsyncDriver>> drivers;
  absl::Notification go;
  Window w;
  std::vector<std::thread> workers;
  workers.reserve(threads);
  if (r.client_threads > 0) {
    for (int t = 0; t < threads; ++t) {
      drivers.push_back(
          std::make_unique<AsyncDriver>(&cfg.study, &w, &logs[t], cfg.rate, cfg.clients));
    }
    for (int i = 0; i < cfg.clients; ++i) {
      drivers[i % threads]->AddClient(stubs[i % stubs.size()].get(),
                                      absl::StrCat("bench-", cfg.clients, "-", i), i,
                                      StudyOf(cfg, i));
    }
    for (auto& d : drivers) workers.emplace_back(&AsyncDriver::Run, d.get(), &go);
  } else {
    for (int i = 0; i < cfg.clients; ++i) {
      workers.emplace_back(RunSyncClient, stubs[i % stubs.size()].get(), std::cref(*StudyOf(cfg, i)),
                           absl::StrCat("bench-", cfg.clients, "-", i), &go, &w, &logs[i]);
    }
  }
  const ServerScrape before =
      cfg.http_address.empty() ? ServerScrape() : ScrapeMetrics(cfg.http_address);
  auto duration = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const auto start = Clock::now();
  w.from = start + duration(cfg.warmup);
  w.stop = w.from + duration(cfg.seconds);
  // CPU use is sampled around the whole round (warm-up included) and scaled to the window.
  const std::optional<double> server_cpu0 =
      cfg.server_pid > 0 ? ProcessCpuSeconds(cfg.server_pid) : std::nullopt;
  const double client_cpu0 = SelfCpuSeconds();
  auto replicas_cpu = [&cfg]() -> std::optional<double> {
    if (cfg.replica_pids.empty()) return std::nullopt;
    double total = 0;
    for (pid_t pid : cfg.replica_pids) {
      std::optional<double> cpu = ProcessCpuSeconds(pid);
      if (!cpu) return std::nullopt;
      total += *cpu;
    }
    return total;
  };
  const std::optional<double> replicas_cpu0 = replicas_cpu();
  const std::optional<double> postgres_cpu0 =
      cfg.postgres_pid > 0 ? TreeCpuSeconds(cfg.postgres_pid) : std::nullopt;
  go.Notify();
  for (std::thread& t : workers) t.join();
  const double scale = cfg.seconds / Seconds(Clock::now() - start);
  if (cfg.server_pid > 0) {
    std::optional<double> server_cpu1 = ProcessCpuSeconds(cfg.server_pid);
    if (server_cpu0 && server_cpu1) r.server_cpu_s = (*server_cpu1 - *server_cpu0) * scale;
  }
  r.client_cpu_s = (SelfCpuSeconds() - client_cpu0) * scale;
  if (std::optional<double> replicas_cpu1 = replicas_cpu(); replicas_cpu0 && replicas_cpu1) {
    r.replicas_cpu_s = (*replicas_cpu1 - *replicas_cpu0) * scale;
  }
  if (postgres_cpu0) {
    if (std::optional<double> pg1 = TreeCpuSeconds(cfg.postgres_pid)) {
      r.postgres_cpu_s = (*pg1 - *postgres_cpu0) * scale;
    }
  }
  if (!cfg.http_address.empty()) {
    // Includes the warm-up's calls: a close enough picture of where the time goes.
    const ServerScrape after = ScrapeMetrics(cfg.http_address);
    r.handler_suggest = HandlerDelta(before.handlers, after.handlers, "SuggestTrials");
    r.handler_complete = HandlerDelta(before.handlers, after.handlers, "CompleteTrial");
    r.store_writes = after.store_writes - before.store_writes;
    r.store_commits = after.store_commits - before.store_commits;
  }
  for (ClientLog& log : logs) {
    r.pair.insert(r.pair.end(), log.pair.begin(), log.pair.end());
    r.suggest.insert(r.suggest.end(), log.suggest.begin(), log.suggest.end());
    r.complete.insert(r.complete.end(), log.complete.begin(), log.complete.end());
    r.errors += log.errors;
    if (r.first_error.empty()) r.first_error = log.first_error;
  }
  std::sort(r.pair.begin(), r.pair.end());
  std::sort(r.suggest.begin(), r.suggest.end());
  std::sort(r.complete.begin(), r.complete.end());
  r.pairs = static_cast<int64_t>(r.pair.size());
  return r;
}

// `v` rounded to `digits` decimals; null when it is not finite (no figure).
nlohmann::ordered_json Rounded(double v, int digits = 4) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

// One round as a JSON row; bench/run_service_bench.sh reads these fields.
nlohmann::ordered_json JsonRow(const RoundResult& r, const std::string& durability,
                               const std::string& mode) {
  const double n = static_cast<double>(r.pairs);
  const double server_us = r.server_cpu_s && n > 0 ? *r.server_cpu_s / n * 1e6 : NAN;
  const double client_us = n > 0 ? r.client_cpu_s / n * 1e6 : NAN;
  return {{"kind", "load"},
          {"server", mode},
          {"durability", durability},
          {"clients", r.clients},
          {"connections", r.connections},
          {"client_threads", r.client_threads},
          {"seconds", Rounded(r.seconds, 2)},
          {"study_trials_before", r.study_trials_before},
          {"pairs", r.pairs},
          {"pairs_per_s", Rounded(n / r.seconds, 1)},
          {"pair_p50_ms", Rounded(PercentileMs(r.pair, 0.50))},
          {"pair_p99_ms", Rounded(PercentileMs(r.pair, 0.99))},
          {"suggest_p50_ms", Rounded(PercentileMs(r.suggest, 0.50))},
          {"suggest_p99_ms", Rounded(PercentileMs(r.suggest, 0.99))},
          {"complete_p50_ms", Rounded(PercentileMs(r.complete, 0.50))},
          {"complete_p99_ms", Rounded(PercentileMs(r.complete, 0.99))},
          {"errors", r.errors},
          {"server_cpu_us_per_pair", Rounded(server_us, 1)},
          {"client_cpu_us_per_pair", Rounded(client_us, 1)},
          {"replicas_cpu_us_per_pair",
           Rounded(r.replicas_cpu_s && n > 0 ? *r.replicas_cpu_s / n * 1e6 : NAN, 1)},
          {"postgres_cpu_us_per_pair",
           Rounded(r.postgres_cpu_s && n > 0 ? *r.postgres_cpu_s / n * 1e6 : NAN, 1)},
          {"handler_suggest_mean_ms", Rounded(r.handler_suggest.mean_ms)},
          {"handler_suggest_p99_ms", Rounded(r.handler_suggest.p99_ms)},
          {"handler_complete_mean_ms", Rounded(r.handler_complete.mean_ms)},
          {"handler_complete_p99_ms", Rounded(r.handler_complete.p99_ms)}};
}

// Prints one JSON row on stdout, at once.
void PrintRow(const nlohmann::ordered_json& row) {
  std::printf("%s\n", row.dump().c_str());
  std::fflush(stdout);
}

// Optuna's RDBStorage on the same server, after evoscaled's rounds (the same session).
int RunOptunaPeer(evoscale::testing::PostgresServer& postgres, int workers, double seconds,
                  double our_rate, int our_clients, FILE* text) {
  absl::StatusOr<std::string> uri = postgres.CreateDatabase("optuna");
  if (!uri.ok()) {
    std::fprintf(stderr, "service_bench: %s\n", uri.status().ToString().c_str());
    return 1;
  }
  const std::string url =
      absl::StrCat("postgresql+psycopg2://postgres@127.0.0.1:", postgres.port(), "/optuna");
  const std::string cmd =
      absl::StrCat("/usr/bin/python3 ", EVOSCALE_SOURCE_DIR, "/bench/service/optuna_rdb_peer.py ",
                   url, " ", workers, " ", seconds);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return 1;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  if (pclose(pipe) != 0) {
    std::fprintf(stderr, "service_bench: the Optuna peer failed: %s\n", out.c_str());
    return 1;
  }
  const nlohmann::json peer = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!peer.is_object() || !peer.contains("trials_per_s")) {
    std::fprintf(stderr, "service_bench: the Optuna peer printed %s\n", out.c_str());
    return 1;
  }
  const double rate = peer["trials_per_s"].get<double>();
  std::fprintf(text,
               "\npeer on the same PostgreSQL: %s, %d workers: %.1f ask+tell pairs/s (%d "
               "errors, pair p99 %s ms); evoscale at %d clients %.0f pairs/s = %.0fx\n",
               peer.value("peer", "optuna").c_str(), workers, rate, peer.value("errors", 0),
               peer["pair_p99_ms"].dump().c_str(), our_clients, our_rate,
               rate > 0 ? our_rate / rate : 0.0);
  std::printf("%s", out.c_str());
  return 0;
}

int Run() {
  const bool json = absl::GetFlag(FLAGS_json);
  FILE* text = json ? stderr : stdout;
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability != "process" && durability != "power") {
    std::fprintf(stderr, "service_bench: --durability \"%s\": want process or power\n",
                 durability.c_str());
    return 2;
  }
  std::vector<int> client_counts;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(c, &n) || n < 1) {
      std::fprintf(stderr, "service_bench: --clients: \"%s\" is not a positive count\n",
                   std::string(c).c_str());
      return 2;
    }
    client_counts.push_back(n);
  }
  RoundConfig cfg;
  cfg.seconds = absl::GetFlag(FLAGS_seconds);
  cfg.warmup = std::max(0.0, absl::GetFlag(FLAGS_warmup));
  cfg.client_threads = std::max(0, absl::GetFlag(FLAGS_client_threads));
  cfg.rate = absl::GetFlag(FLAGS_rate);
  if (cfg.rate < 0 || (cfg.rate > 0 && cfg.client_threads == 0)) {
    std::fprintf(stderr, "service_bench: --rate must be >= 0 and needs --client_threads > 0\n");
    return 2;
  }
  if (cfg.seconds <= 0) {
    std::fprintf(stderr, "service_bench: --seconds must be > 0\n");
    return 2;
  }
  const int preload_threads = std::max(1, absl::GetFlag(FLAGS_preload_threads));

  // The server: a child evoscaled on a fresh database, or the one given.
  std::unique_ptr<evoscale::testing::TempDir> tmp;
  std::unique_ptr<evoscale::testing::PostgresServer> postgres;  // outlives the child
  std::unique_ptr<evoscale::testing::EvoscaledProcess> child;
  std::vector<std::unique_ptr<evoscale::testing::EvoscaledProcess>> more_replicas;
  std::vector<std::string> addresses;
  const int replicas = std::max(1, absl::GetFlag(FLAGS_replicas));
  if (replicas > 1 && !absl::GetFlag(FLAGS_postgres)) {
    std::fprintf(stderr, "service_bench: --replicas > 1 needs --postgres\n");
    return 2;
  }
  std::string address = absl::GetFlag(FLAGS_server);
  const std::string mode = address.empty() ? "child" : "external";
  if (mode == "child") {
    std::string dir = absl::GetFlag(FLAGS_db_dir);
    if (dir.empty()) {
      tmp = std::make_unique<evoscale::testing::TempDir>();
      dir = tmp->path();
    }
    std::string db = dir + "/service_bench.db";
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
    std::vector<std::string> flags = {"--durability", durability};
    if (absl::GetFlag(FLAGS_postgres)) {
      auto pg = evoscale::testing::PostgresServer::Start({.fsync = true});
      if (!pg.ok()) {
        std::fprintf(stderr, "service_bench: starting PostgreSQL: %s\n",
                     pg.status().ToString().c_str());
        return 1;
      }
      postgres = *std::move(pg);
      absl::StatusOr<std::string> uri = postgres->CreateDatabase("service_bench");
      if (!uri.ok()) {
        std::fprintf(stderr, "service_bench: %s\n", uri.status().ToString().c_str());
        return 1;
      }
      db = *uri;
      flags.insert(flags.end(), {"--telemetry-db", dir + "/service_bench.telemetry.db"});
    }
    auto p = evoscale::testing::EvoscaledProcess::Start(db, flags);
    if (!p.ok()) {
      std::fprintf(stderr, "service_bench: starting evoscaled: %s\n",
                   p.status().ToString().c_str());
      return 1;
    }
    child = *std::move(p);
    address = child->grpc_address();
    addresses.push_back(address);
    for (int r = 1; r < replicas; ++r) {
      std::vector<std::string> replica_flags = flags;
      replica_flags.back() = absl::StrCat(dir, "/service_bench.", r, ".telemetry.db");
      auto more = evoscale::testing::EvoscaledProcess::Start(db, replica_flags);
      if (!more.ok()) {
        std::fprintf(stderr, "service_bench: starting replica %d: %s\n", r,
                     more.status().ToString().c_str());
        return 1;
      }
      addresses.push_back((*more)->grpc_address());
      std::fprintf(text, "replica %d: pid %d at %s\n", r, (*more)->pid(),
                   (*more)->grpc_address().c_str());
      more_replicas.push_back(*std::move(more));
    }
    cfg.server_pid = child->pid();
    cfg.http_address = child->http_address();
    cfg.replica_pids.push_back(child->pid());
    for (const auto& replica : more_replicas) cfg.replica_pids.push_back(replica->pid());
    if (postgres != nullptr) cfg.postgres_pid = postgres->pid();
    std::fprintf(text, "server: child %s/evoscaled (pid %d) at %s, db %s\n",
                 evoscale::testing::BinDir().c_str(), child->pid(), address.c_str(), db.c_str());
  } else {
    cfg.http_address = absl::GetFlag(FLAGS_server_http);
    std::fprintf(text, "server: external at %s\n", address.c_str());
  }
  std::fprintf(
      text, "durability: %s%s\n", durability.c_str(),
      mode != "child" ? " (as configured on the external server; not verified)"
      : postgres != nullptr
          ? (durability == "process"
                 ? " (PostgreSQL, synchronous_commit=off: no WAL flush per commit)"
                 : " (PostgreSQL, synchronous_commit=on, fsync on: WAL flushed per commit)")
      : durability == "process" ? " (SQLite WAL, synchronous=NORMAL: no fsync per commit)"
                                : " (SQLite WAL, synchronous=FULL: fsync per commit)");
  std::fprintf(text, "host: %ld CPUs online, load average %s\n", sysconf(_SC_NPROCESSORS_ONLN),
               LoadAverage().c_str());

  int max_clients = preload_threads;
  for (int c : client_counts) max_clients = std::max(max_clients, c);
  const int connections =
      absl::GetFlag(FLAGS_connections) > 0 ? absl::GetFlag(FLAGS_connections) : max_clients;
  std::vector<std::unique_ptr<v1::StudyService::Stub>> stubs;
  for (int i = 0; i < connections; ++i) {
    std::shared_ptr<grpc::Channel> channel =
        NewChannel(addresses.empty() ? address : addresses[i % addresses.size()], i);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "service_bench: cannot connect to %s\n", address.c_str());
      return 1;
    }
    stubs.push_back(v1::StudyService::NewStub(channel));
  }
  std::fprintf(
      text, "clients: %s, %s\n",
      absl::GetFlag(FLAGS_connections) > 0
          ? absl::StrCat("sharing ", connections, " channels round-robin").c_str()
          : "one channel (TCP connection) each",
      cfg.client_threads > 0
          ? absl::StrCat("driven by ", cfg.client_threads, " thread(s) with the async API").c_str()
          : "one thread each with the synchronous API");
  if (cfg.rate > 0) {
    std::fprintf(text,
                 "load: paced (open loop), %.0f pairs/s offered over all clients; latency counts "
                 "from each pair's scheduled start\n",
                 cfg.rate);
  } else {
    std::fprintf(text, "load: closed loop, each client starts its next pair when one ends\n");
  }

  absl::StatusOr<std::string> study = CreateBenchStudy(*stubs[0]);
  if (!study.ok()) {
    std::fprintf(stderr, "service_bench: %s\n", study.status().ToString().c_str());
    return 1;
  }
  cfg.study = *study;
  const int studies = std::max(1, absl::GetFlag(FLAGS_studies));
  if (studies > 1) {
    cfg.studies.push_back(*study);
    for (int k = 1; k < studies; ++k) {
      // Created through replica k % N (channel k is on it), which then owns it.
      absl::StatusOr<std::string> other =
          CreateBenchStudy(*stubs[k % stubs.size()], absl::StrCat("service-bench-", k));
      if (!other.ok()) {
        std::fprintf(stderr, "service_bench: %s\n", other.status().ToString().c_str());
        return 1;
      }
      cfg.studies.push_back(*other);
    }
    std::fprintf(text, "studies: %d, client i on study i %% %d\n", studies, studies);
  }
  if (replicas > 1) {  // CPU and /metrics of one replica would tell half the story
    cfg.server_pid = -1;
    cfg.http_address.clear();
  }
  const int preload = absl::GetFlag(FLAGS_preload);
  if (preload > 0) {
    const auto t0 = Clock::now();
    if (absl::Status st = Preload(stubs, *study, preload, preload_threads); !st.ok()) {
      std::fprintf(stderr, "service_bench: preload: %s\n", st.ToString().c_str());
      return 1;
    }
    const double dt = Seconds(Clock::now() - t0);
    std::fprintf(text,
                 "preload: %d completed trials (CreateTrial, %d threads) in %.2f s: %.0f/s\n",
                 preload, preload_threads, dt, preload / dt);
    if (json) {
      PrintRow({{"kind", "preload"},
                {"trials", preload},
                {"threads", preload_threads},
                {"seconds", Rounded(dt, 3)},
                {"trials_per_s", Rounded(preload / dt, 1)}});
    }
  }

  std::fprintf(text,
               "study %s, %.1f s per round after %.1f s warm-up; latencies in ms; "
               "us/pr = CPU microseconds per pair\n\n",
               study->c_str(), cfg.seconds, cfg.warmup);
  std::fprintf(text, "%7s %5s %9s %8s %8s %8s %8s %8s %8s %6s %9s %9s\n", "clients", "conns",
               "pairs/s", "pair_p50", "pair_p99", "sug_p50", "sug_p99", "cmp_p50", "cmp_p99",
               "errors", "srv_us/pr", "cli_us/pr");
  std::fflush(text);
  std::string first_error;
  std::vector<std::string> handler_lines;
  std::vector<std::string> cpu_lines;
  double last_rate = 0;
  for (int clients : client_counts) {
    cfg.clients = clients;
    RoundResult r = RunRound(stubs, cfg);
    const double n = static_cast<double>(r.pairs);
    last_rate = n / r.seconds;
    const std::string srv =
        r.server_cpu_s && n > 0 ? absl::StrFormat("%.0f", *r.server_cpu_s / n * 1e6) : "-";
    const std::string cli = n > 0 ? absl::StrFormat("%.0f", r.client_cpu_s / n * 1e6) : "-";
    std::fprintf(text, "%7d %5d %9.0f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6" PRId64 " %9s %9s\n",
                 r.clients, r.connections, n / r.seconds, PercentileMs(r.pair, 0.5),
                 PercentileMs(r.pair, 0.99), PercentileMs(r.suggest, 0.5),
                 PercentileMs(r.suggest, 0.99), PercentileMs(r.complete, 0.5),
                 PercentileMs(r.complete, 0.99), r.errors, srv.c_str(), cli.c_str());
    std::fflush(text);
    if (!std::isnan(r.handler_suggest.mean_ms)) {
      handler_lines.push_back(absl::StrFormat(
          "%7d   SuggestTrials mean %.3f p50~%.3f p99~%.3f   CompleteTrial mean %.3f p50~%.3f "
          "p99~%.3f",
          r.clients, r.handler_suggest.mean_ms, r.handler_suggest.p50_ms,
          r.handler_suggest.p99_ms, r.handler_complete.mean_ms, r.handler_complete.p50_ms,
          r.handler_complete.p99_ms));
      if (r.store_commits > 0) {
        handler_lines.back() +=
            absl::StrFormat("   store: %.0f writes in %.0f commits (%.2f per commit)",
                            r.store_writes, r.store_commits, r.store_writes / r.store_commits);
      }
    }
    if (r.replicas_cpu_s && r.postgres_cpu_s && n > 0) {
      // Where a pair's CPU goes, and the most pairs/s this machine's cores could give at that
      // cost if every core did nothing else: a bound, not a forecast.
      const double all_s = *r.replicas_cpu_s + *r.postgres_cpu_s + r.client_cpu_s;
      const double cores = static_cast<double>(std::thread::hardware_concurrency());
      cpu_lines.push_back(absl::StrFormat(
          "%7d   evoscaled %.0f us + PostgreSQL %.0f us + clients %.0f us = %.0f us a pair; "
          "%.2f of %.0f cores busy; at this cost %.0f cores give at most %.0f pairs/s",
          r.clients, *r.replicas_cpu_s / n * 1e6, *r.postgres_cpu_s / n * 1e6,
          r.client_cpu_s / n * 1e6, all_s / n * 1e6, all_s / r.seconds, cores, cores,
          cores / (all_s / n)));
    }
    if (json) PrintRow(JsonRow(r, durability, mode));
    if (first_error.empty()) first_error = r.first_error;
  }
  if (!handler_lines.empty()) {
    std::fprintf(text,
                 "\ntime inside the server's handlers (ms, from /metrics; ~ interpolated in "
                 "its buckets):\n");
    for (const std::string& line : handler_lines) std::fprintf(text, "%s\n", line.c_str());
  }
  if (!cpu_lines.empty()) {
    std::fprintf(text, "\nCPU per pair (every replica, PostgreSQL's processes, this bench):\n");
    for (const std::string& line : cpu_lines) std::fprintf(text, "%s\n", line.c_str());
  }
  if (!first_error.empty()) std::fprintf(text, "\nfirst error: %s\n", first_error.c_str());

  absl::StatusOr<v1::Study> final_study = GetStudy(*stubs[0], *study);
  if (!final_study.ok()) {
    std::fprintf(stderr, "service_bench: %s\n", final_study.status().ToString().c_str());
    return 1;
  }
  std::fprintf(text,
               "\nstudy %s now holds %" PRId64 " trials (%" PRId64 " completed); "
               "durability %s\n",
               study->c_str(), final_study->trial_count(), final_study->completed_trial_count(),
               durability.c_str());
  if (json) {
    PrintRow({{"kind", "study"},
              {"name", *study},
              {"trial_count", final_study->trial_count()},
              {"completed_trial_count", final_study->completed_trial_count()},
              {"durability", durability}});
  }
  stubs.clear();
  for (auto& replica : more_replicas) replica->Stop(SIGTERM);
  if (child) child->Stop(SIGTERM);
  const int peer_workers = absl::GetFlag(FLAGS_optuna_workers);
  if (postgres != nullptr && peer_workers > 0) {
    return RunOptunaPeer(*postgres, peer_workers, cfg.seconds, last_rate, client_counts.back(),
                         text);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "closed-loop SuggestTrials+CompleteTrial load on evoscale's StudyService.\n"
      "  service_bench [--clients 1,16,64] [--seconds 5] [--durability process|power]\n"
      "                [--server HOST:PORT] [--connections N] [--json]");
  absl::ParseCommandLine(argc, argv);
  return Run();
}
