// soak_bench: many clients for a long time against one evoscaled, every kind of work at once.
//
// Starts build/bin/evoscaled as a child on a temporary database (or uses --server) and runs
// --clients threads, each with its own channel, for --duration_s:
//   - about 3/4 ask and tell on 8 shared GENETIC studies: SuggestTrials, one or two
//     AddTrialMeasurement, CompleteTrial; every 50th trial also a ListTrials page and GetStudy;
//   - 1/8 stream telemetry of a workload each (ReportTelemetry) and ask for its
//     recommendation every few batches;
//   - 1/8 poll one managed study, whose trials evoscaled runs itself as short /bin/sh processes.
// Every --sample_s it prints a line to stderr: ops, p50/p99 per class of call, the server's RSS
// and the errors so far. At the end: a table of the windows, the RSS growth, the p99 of the
// last third of the run against the middle third, the trials completed and every error. Exits
// 1 if any call failed, any telemetry sample was rejected, any managed trial failed or
// evoscaled did not stop cleanly; else 0.
#include <sys/types.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
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
#include <numbers>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
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
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/http_get.h"

ABSL_FLAG(int, clients, 64,
          "client threads, each with its own channel: 1/8 stream telemetry, 1/8 watch the "
          "managed study, the rest ask and tell (at least 3 in all)");
ABSL_FLAG(double, duration_s, 600, "seconds of load");
ABSL_FLAG(double, sample_s, 30, "seconds per window: one progress line and one row each");
ABSL_FLAG(std::string, server, "",
          "HOST:PORT of a running evoscaled; empty: start build/bin/evoscaled as a child on a "
          "temporary database, with --max-running-trials 2");
ABSL_FLAG(int, server_pid, 0, "with --server: its pid, to report its RSS; 0: no RSS");
ABSL_FLAG(std::string, csv, "", "write the windows here as CSV");
ABSL_FLAG(std::string, json, "", "write a JSON summary here");

namespace {

namespace v1 = ::evoscale::v1;
using ::google::protobuf::util::TimeUtil;
using Clock = std::chrono::steady_clock;

constexpr auto kRpcDeadline = std::chrono::seconds(30);
// Ask/tell clients share this many studies; every kReadEvery-th trial they also read.
constexpr int kAskTellStudies = 8;
// Each ask/tell study ends after this many trials and its clients move to a new one, so the
// data evoscaled holds stays bounded (at most three generations per slot: the live study, the
// one just ended, whose last trials may still be completing, and none older) and its memory
// must level off unless something leaks.
constexpr int kTrialsPerStudy = 3000;
constexpr int kReadEvery = 50;
constexpr int kPageSize = 100;
// A telemetry batch holds kSamplesPerInstance samples of each of kInstances instances.
constexpr int kInstances = 5;
constexpr int kSamplesPerInstance = 10;
// Per sender: telemetry arrives on a schedule, as from a scraper, not as fast as possible.
constexpr double kBatchesPerSecond = 2;
constexpr int kRecommendEvery = 4;  // batches per GetRecommendation
// Watchers poll the managed study as a dashboard would.
constexpr absl::Duration kWatchInterval = absl::Milliseconds(250);
// After a failure a client waits this long, so that a failing server is not spun on.
constexpr absl::Duration kErrorPause = absl::Milliseconds(100);

// The classes latencies are grouped by. write: SuggestTrials, AddTrialMeasurement,
// CompleteTrial; read: GetStudy, ListTrials; telemetry: a ReportTelemetry stream of one
// batch; recommend: GetRecommendation.
enum OpClass { kWrite, kRead, kTelemetry, kRecommend, kNumClasses };
constexpr std::array<const char*, kNumClasses> kClassNames = {"write", "read", "telemetry",
                                                              "recommend"};
using Latencies = std::array<std::vector<int64_t>, kNumClasses>;  // nanoseconds

// Nearest-rank percentile of `sorted` (ascending, ns), in milliseconds; NaN when empty.
double PercentileMs(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return NAN;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1e6;
}

// `v` with `decimals` decimals, or "-" when there is no figure (NaN).
std::string Figure(double v, int decimals = 3) {
  return std::isnan(v) ? "-" : absl::StrFormat("%.*f", decimals, v);
}

// `v` rounded for JSON; null when there is no figure.
nlohmann::ordered_json Rounded(double v, int decimals = 4) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

// The resident set of a process in MiB: all of it (VmRSS), its anonymous memory (RssAnon:
// the heap, what a leak grows) and its file-backed pages (RssFile: SQLite's memory-mapped
// database files, which grow with the data stored).
struct Rss {
  double total = 0, anon = 0, file = 0;
};

// Process `pid`'s Rss; nullopt when unreadable.
std::optional<Rss> ReadRss(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  Rss rss;
  int found = 0;
  for (std::string line; std::getline(in, line);) {
    double* into = absl::StartsWith(line, "VmRSS:")     ? &rss.total
                   : absl::StartsWith(line, "RssAnon:") ? &rss.anon
                   : absl::StartsWith(line, "RssFile:") ? &rss.file
                                                        : nullptr;
    if (into == nullptr) continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t kib = 0;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &kib)) return std::nullopt;
    *into = static_cast<double>(kib) / 1024;
    ++found;
  }
  if (found != 3) return std::nullopt;
  return rss;
}

// evoscale_sqlite_memory_bytes from evoscaled's /metrics, in MiB; nullopt when unreadable.
std::optional<double> SqliteMib(const std::string& http_address) {
  const evoscale::testing::HttpResult r = evoscale::testing::HttpGet(http_address, "/metrics");
  if (r.status != 200) return std::nullopt;
  constexpr absl::string_view kName = "evoscale_sqlite_memory_bytes ";
  for (absl::string_view line : absl::StrSplit(r.body, '\n')) {
    double bytes = 0;
    if (absl::ConsumePrefix(&line, kName) && absl::SimpleAtod(line, &bytes))
      return bytes / (1 << 20);
  }
  return std::nullopt;
}

double UnixNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

// Failures by kind ("CompleteTrial: UNAVAILABLE", "ReportTelemetry: rejected duplicate"), each
// with its first message. Thread-safe.
class ErrorLog {
 public:
  struct Kind {
    int64_t count = 0;
    std::string first_message;
  };

  void Add(const std::string& kind, absl::string_view message, int64_t count = 1) {
    absl::MutexLock lock(&mu_);
    Kind& k = kinds_[kind];
    if (k.count == 0) k.first_message = std::string(message);
    k.count += count;
    total_ += count;
  }

  void AddRpc(absl::string_view method, const grpc::Status& st) {
    Add(absl::StrCat(method, ": ",
                     absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code()))),
        st.error_message());
  }

  int64_t total() const {
    absl::MutexLock lock(&mu_);
    return total_;
  }

  std::map<std::string, Kind> kinds() const {
    absl::MutexLock lock(&mu_);
    return kinds_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

// One client's latencies since the sampler last took them. Thread-safe: the client records,
// the sampler takes, each under the log's own lock, so clients never wait for each other.
class LatencyLog {
 public:
  void Record(OpClass c, Clock::duration d) {
    absl::MutexLock lock(&mu_);
    pending_[c].push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

  // Appends what was recorded to `out` and forgets it.
  void TakeInto(Latencies* out) {
    absl::MutexLock lock(&mu_);
    for (int c = 0; c < kNumClasses; ++c) {
      (*out)[c].insert((*out)[c].end(), pending_[c].begin(), pending_[c].end());
      pending_[c].clear();
    }
  }

 private:
  absl::Mutex mu_;
  Latencies pending_ ABSL_GUARDED_BY(mu_);
};

// Runs `rpc(&ctx)` with the bench's deadline.
template <typename Rpc>
grpc::Status CallWithDeadline(Rpc&& rpc) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  return rpc(&ctx);
}

absl::Status FromGrpc(const grpc::Status& st, absl::string_view what) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                      absl::StrCat(what, ": ", st.error_message()));
}

// What a client thread works through: its timed calls go to its LatencyLog, its failures to
// the shared ErrorLog, and it sees the stop.
class Caller {
 public:
  Caller(LatencyLog* latencies, ErrorLog* errors, const absl::Notification* stop)
      : latencies_(latencies), errors_(errors), stop_(stop) {}

  // Calls `rpc(&ctx)`. On success records its latency under `c`; else records the error
  // under `method` and pauses. Returns whether it succeeded.
  template <typename Rpc>
  bool Call(OpClass c, absl::string_view method, Rpc&& rpc) {
    const Clock::time_point t0 = Clock::now();
    const grpc::Status st = CallWithDeadline(std::forward<Rpc>(rpc));
    if (st.ok()) {
      latencies_->Record(c, Clock::now() - t0);
      return true;
    }
    errors_->AddRpc(method, st);
    Pause(kErrorPause);
    return false;
  }

  // A failure that is not a failed call (an answer that is wrong).
  void Fail(const std::string& kind, absl::string_view message, int64_t count = 1) {
    errors_->Add(kind, message, count);
    Pause(kErrorPause);
  }

  bool stopped() const { return stop_->HasBeenNotified(); }
  // Waits `d`, or less if the stop comes first.
  void Pause(absl::Duration d) const { stop_->WaitForNotificationWithTimeout(d); }

 private:
  LatencyLog* const latencies_;
  ErrorLog* const errors_;
  const absl::Notification* const stop_;
};

// ---- The studies and workloads -------------------------------------------------------------

v1::Study AskTellStudy(int index) {
  v1::Study study;
  study.set_display_name(absl::StrCat("soak-", index));
  v1::StudySpec* spec = study.mutable_spec();
  v1::MetricSpec* metric = spec->add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  v1::ParameterSpec* x = spec->add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_min(-5);
  x->mutable_double_spec()->set_max(5);
  v1::ParameterSpec* layers = spec->add_parameters();
  layers->set_name("layers");
  layers->mutable_integer_spec()->set_min(1);
  layers->mutable_integer_spec()->set_max(10);
  v1::ParameterSpec* activation = spec->add_parameters();
  activation->set_name("activation");
  for (const char* a : {"relu", "tanh", "gelu"}) {
    activation->mutable_categorical_spec()->add_values(a);
  }
  spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::GENETIC);
  spec->mutable_algorithm()->set_seed(index + 1);
  spec->set_max_trials(kTrialsPerStudy);
  return study;
}

// The loss an ask/tell client reports for a trial of AskTellStudy: a fixed function of its
// parameters, least at x = 0, layers = 4, activation = relu.
double Loss(const google::protobuf::RepeatedPtrField<v1::Parameter>& params) {
  double loss = 0;
  for (const v1::Parameter& p : params) {
    if (p.name() == "x") {
      loss += p.double_value() * p.double_value();
    } else if (p.name() == "layers") {
      loss += 0.1 * std::pow(static_cast<double>(p.int_value() - 4), 2);
    } else if (p.name() == "activation") {
      loss += p.string_value() == "relu" ? 0 : p.string_value() == "tanh" ? 0.5 : 0.2;
    }
  }
  return loss;
}

// A managed study that runs until stopped (max_trials 0): evoscaled runs each trial as
// /bin/sh, which speaks the trainer protocol (trainer_adapter/trial_event.h): one progress
// line, 0.2 s of sleep, then the final line with loss = the trial's x ($1).
v1::Study ManagedStudy() {
  v1::Study study;
  study.set_display_name("soak-managed");
  v1::StudySpec* spec = study.mutable_spec();
  v1::MetricSpec* metric = spec->add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  v1::ParameterSpec* x = spec->add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_min(0);
  x->mutable_double_spec()->set_max(1);
  spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  spec->set_max_trials(0);
  v1::TrialTemplate* t = spec->mutable_trial_template();
  t->set_command("/bin/sh");
  t->add_args("-c");
  t->add_args(R"(echo '{"event":"progress","step":1,"metrics":{"loss":1}}'; sleep 0.2; )"
              R"(echo "{\"event\":\"final\",\"metrics\":{\"loss\":$1}}")");
  t->add_args("trial");  // $0
  t->add_args("${x}");   // $1
  t->mutable_resources()->set_cpu_cores(0.5);
  t->mutable_resources()->set_memory_bytes(64 << 20);
  // Right-sizing would shrink the request to sh's few MiB; the soak is not about that.
  t->set_fixed_resources(true);
  t->set_parallel_trials(2);
  return study;
}

// How the clients split: 1/8 telemetry, 1/8 watchers, the rest ask/tell.
struct Roles {
  int ask_tell = 0;
  int telemetry = 0;
  int watch = 0;
};

Roles SplitClients(int clients) {
  const int eighth = std::max(1, clients / 8);
  return {clients - 2 * eighth, eighth, eighth};
}

// What the clients work on, made before they start.
class StudyRing;

struct Targets {
  std::vector<std::string> studies;  // ask/tell, as created
  std::shared_ptr<v1::StudyService::Stub> ring_stub;
  std::shared_ptr<StudyRing> ring;  // the ask/tell studies as they rotate
  std::string managed_study;
  std::vector<std::string> workloads;  // one per telemetry client
};

absl::StatusOr<std::string> CreateStudy(v1::StudyService::Stub& stub, const v1::Study& study) {
  v1::CreateStudyRequest req;
  *req.mutable_study() = study;
  v1::Study out;
  const grpc::Status st =
      CallWithDeadline([&](grpc::ClientContext* ctx) { return stub.CreateStudy(ctx, req, &out); });
  if (!st.ok()) return FromGrpc(st, absl::StrCat("CreateStudy ", study.display_name()));
  return out.name();
}

// The ask/tell studies, one per slot. When a slot's study ends (max_trials), the first client
// to see it makes the next one and deletes the one before the study that ended.
class StudyRing {
 public:
  StudyRing(std::vector<std::string> studies, v1::StudyService::Stub* stub)
      : live_(std::move(studies)), ended_(live_.size()), stub_(stub) {}

  size_t size() const { return live_.size(); }
  std::string Current(size_t slot) {
    absl::MutexLock lock(&mu_);
    return live_[slot];
  }
  int64_t rotations() {
    absl::MutexLock lock(&mu_);
    return rotations_;
  }
  void CountCompleted() { completed_.fetch_add(1, std::memory_order_relaxed); }
  int64_t completed() const { return completed_.load(); }

  // Called when `study` (of `slot`) answered no trial because it ended.
  absl::Status Rotate(size_t slot, const std::string& study, int generation) {
    absl::MutexLock lock(&mu_);
    if (live_[slot] != study) return absl::OkStatus();  // another client rotated it
    absl::StatusOr<std::string> next = CreateStudy(*stub_, AskTellStudy(generation));
    if (!next.ok()) return next.status();
    if (!ended_[slot].empty()) {
      v1::DeleteStudyRequest req;
      req.set_name(ended_[slot]);
      v1::DeleteStudyResponse out;
      const grpc::Status st = CallWithDeadline(
          [&](grpc::ClientContext* ctx) { return stub_->DeleteStudy(ctx, req, &out); });
      if (!st.ok()) return FromGrpc(st, absl::StrCat("DeleteStudy ", ended_[slot]));
    }
    ended_[slot] = study;
    live_[slot] = *std::move(next);
    ++rotations_;
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> live_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> ended_ ABSL_GUARDED_BY(mu_);
  int64_t rotations_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> completed_{0};
  v1::StudyService::Stub* const stub_;  // serialised by mu_
};

absl::StatusOr<Targets> SetUp(const std::shared_ptr<grpc::Channel>& channel, const Roles& roles) {
  std::unique_ptr<v1::StudyService::Stub> studies = v1::StudyService::NewStub(channel);
  std::unique_ptr<v1::AutoscalerService::Stub> autoscaler = v1::AutoscalerService::NewStub(channel);
  Targets targets;
  for (int i = 0; i < std::min(kAskTellStudies, roles.ask_tell); ++i) {
    absl::StatusOr<std::string> name = CreateStudy(*studies, AskTellStudy(i));
    if (!name.ok()) return name.status();
    targets.studies.push_back(*std::move(name));
  }
  targets.ring_stub = v1::StudyService::NewStub(channel);
  targets.ring = std::make_shared<StudyRing>(targets.studies, targets.ring_stub.get());
  absl::StatusOr<std::string> managed = CreateStudy(*studies, ManagedStudy());
  if (!managed.ok()) return managed.status();
  targets.managed_study = *std::move(managed);
  for (int i = 0; i < roles.telemetry; ++i) {
    v1::PutWorkloadRequest req;
    v1::Workload* w = req.mutable_workload();
    w->set_name(absl::StrCat("soak/w", i));
    w->set_kind(v1::Workload::SERVING);
    w->set_target_utilization(0.7);
    w->set_min_replicas(1);
    w->set_max_replicas(20);
    v1::Workload out;
    const grpc::Status st = CallWithDeadline(
        [&](grpc::ClientContext* ctx) { return autoscaler->PutWorkload(ctx, req, &out); });
    if (!st.ok()) return FromGrpc(st, absl::StrCat("PutWorkload ", w->name()));
    targets.workloads.push_back(w->name());
  }
  return targets;
}

// ---- The clients -----------------------------------------------------------------------------

// One page of the study's trials, walking on from `*page_token` (back to the first page after
// the last), and the study itself.
void ReadStudy(v1::StudyService::Stub& stub, const std::string& study, std::string* page_token,
               Caller* caller) {
  v1::ListTrialsRequest list;
  list.set_parent(study);
  list.set_page_size(kPageSize);
  list.set_page_token(*page_token);
  v1::ListTrialsResponse page;
  if (caller->Call(kRead, "ListTrials",
                   [&](grpc::ClientContext* ctx) { return stub.ListTrials(ctx, list, &page); })) {
    *page_token = page.next_page_token();
  }
  v1::GetStudyRequest get;
  get.set_name(study);
  v1::Study out;
  caller->Call(kRead, "GetStudy",
               [&](grpc::ClientContext* ctx) { return stub.GetStudy(ctx, get, &out); });
}

// Asks and tells on slot `slot`'s study until the stop: SuggestTrials(1), one or two
// measurements, CompleteTrial with the trial's Loss; every kReadEvery-th trial also reads.
void RunAskTellClient(v1::StudyService::Stub& stub, StudyRing& ring, size_t slot,
                      const std::string& client_id, Caller* caller) {
  v1::SuggestTrialsRequest suggest;
  suggest.set_suggestion_count(1);
  suggest.set_client_id(client_id);
  std::string page_token;
  for (int64_t n = 1; !caller->stopped(); ++n) {
    const std::string study = ring.Current(slot);
    suggest.set_parent(study);
    v1::SuggestTrialsResponse suggested;
    if (!caller->Call(kWrite, "SuggestTrials", [&](grpc::ClientContext* ctx) {
          return stub.SuggestTrials(ctx, suggest, &suggested);
        })) {
      continue;
    }
    if (suggested.trials_size() != 1 && suggested.study_state() == v1::Study::COMPLETED) {
      const int generation = static_cast<int>(ring.size() * (ring.rotations() + 1) + slot);
      if (absl::Status st = ring.Rotate(slot, study, generation); !st.ok()) {
        caller->Fail("rotate study", st.message());
      }
      page_token.clear();
      continue;
    }
    if (suggested.trials_size() != 1) {
      caller->Fail("SuggestTrials: no trial",
                   absl::StrCat(study, " is ", v1::Study::State_Name(suggested.study_state())));
      continue;
    }
    const v1::Trial& trial = suggested.trials(0);
    const double loss = Loss(trial.parameters());
    bool measured = true;
    for (int step = 1; measured && step <= 1 + n % 2; ++step) {
      v1::AddTrialMeasurementRequest req;
      req.set_trial_name(trial.name());
      req.mutable_measurement()->set_step(step);
      (*req.mutable_measurement()->mutable_metrics())["loss"] = loss + 1.0 / step;
      v1::Trial out;
      measured = caller->Call(kWrite, "AddTrialMeasurement", [&](grpc::ClientContext* ctx) {
        return stub.AddTrialMeasurement(ctx, req, &out);
      });
    }
    if (!measured) continue;  // the next SuggestTrials hands this client the same trial
    v1::CompleteTrialRequest complete;
    complete.set_name(trial.name());
    (*complete.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    v1::Trial completed;
    if (caller->Call(kWrite, "CompleteTrial", [&](grpc::ClientContext* ctx) {
          return stub.CompleteTrial(ctx, complete, &completed);
        })) {
      ring.CountCompleted();
    }
    if (n % kReadEvery == 0) ReadStudy(stub, study, &page_token, caller);
  }
}

// Adds kSamplesPerInstance samples of each instance of `workload`, evenly spaced in
// (from, to] (unix seconds): a 10-minute wave of load, shifted per instance.
void AddSamples(const std::string& workload, double from, double to, v1::TelemetryBatch* batch) {
  for (int i = 0; i < kInstances; ++i) {
    for (int k = 1; k <= kSamplesPerInstance; ++k) {
      const double t = from + (to - from) * k / kSamplesPerInstance;
      const double wave = std::sin(t * 2 * std::numbers::pi / 600 + i);
      v1::TelemetrySample* s = batch->add_samples();
      s->set_workload(workload);
      s->set_instance(absl::StrCat("pod-", i));
      *s->mutable_time() = TimeUtil::NanosecondsToTimestamp(std::llround(t * 1e9));
      s->set_cpu_cores(1.0 + 0.5 * wave);
      s->set_memory_bytes((1.5 + 0.25 * wave) * (1 << 30));
      s->set_qps(200 + 100 * wave);
      s->set_latency_seconds(0.025 + 0.010 * wave);
    }
  }
}

// Reports telemetry of `workload` until the stop, kBatchesPerSecond batches a second, and
// every kRecommendEvery-th batch asks for its recommendation. Each batch has a
// ReportTelemetry stream of its own: Write() returns once a batch is queued, so only the
// stream's answer tells when it is stored, and that is the latency recorded. Samples are
// stamped `lag_s` in the past, so they never run ahead of the server's clock however long the
// run; rejected samples count as errors.
void RunTelemetryClient(v1::AutoscalerService::Stub& stub, const std::string& workload,
                        double lag_s, Caller* caller) {
  const absl::Duration interval = absl::Seconds(1 / kBatchesPerSecond);
  double stamped = UnixNow() - lag_s - absl::ToDoubleSeconds(interval);  // the newest sample
  absl::Time next = absl::Now();
  for (int64_t n = 1; !caller->stopped(); ++n) {
    caller->Pause(next - absl::Now());
    if (caller->stopped()) break;
    next = std::max(next + interval, absl::Now());  // when late, no burst to catch up
    // At least 1 ms between samples, so that their timestamps stay distinct.
    const double to = std::max(UnixNow() - lag_s, stamped + kSamplesPerInstance * 1e-3);
    v1::TelemetryBatch batch;
    AddSamples(workload, stamped, to, &batch);
    stamped = to;
    v1::ReportTelemetryResponse report;
    const bool stored = caller->Call(kTelemetry, "ReportTelemetry", [&](grpc::ClientContext* ctx) {
      std::unique_ptr<grpc::ClientWriter<v1::TelemetryBatch>> writer =
          stub.ReportTelemetry(ctx, &report);
      writer->WriteLast(batch, grpc::WriteOptions());  // a failed write shows in Finish()
      return writer->Finish();
    });
    if (stored) {
      for (const auto& [reason, count] : report.rejected_by_reason()) {
        caller->Fail(absl::StrCat("ReportTelemetry: rejected ", reason),
                     report.errors_size() > 0 ? report.errors(0) : "", count);
      }
    }
    if (n % kRecommendEvery == 0) {
      v1::GetRecommendationRequest req;
      req.set_workload(workload);
      v1::Recommendation recommendation;
      caller->Call(kRecommend, "GetRecommendation", [&](grpc::ClientContext* ctx) {
        return stub.GetRecommendation(ctx, req, &recommendation);
      });
    }
  }
}

// Polls the managed study every kWatchInterval until the stop.
void RunWatchClient(v1::StudyService::Stub& stub, const std::string& study, Caller* caller) {
  std::string page_token;
  while (!caller->stopped()) {
    ReadStudy(stub, study, &page_token, caller);
    caller->Pause(kWatchInterval);
  }
}

// Client `index`'s role by Roles: ask/tell first, then telemetry, then watchers.
void RunClient(int index, const Roles& roles, const Targets& targets,
               const std::shared_ptr<grpc::Channel>& channel, double lag_s, Caller* caller) {
  if (index < roles.ask_tell) {
    std::unique_ptr<v1::StudyService::Stub> stub = v1::StudyService::NewStub(channel);
    RunAskTellClient(*stub, *targets.ring, index % targets.ring->size(),
                     absl::StrCat("soak-", index), caller);
  } else if (index < roles.ask_tell + roles.telemetry) {
    std::unique_ptr<v1::AutoscalerService::Stub> stub = v1::AutoscalerService::NewStub(channel);
    RunTelemetryClient(*stub, targets.workloads[index - roles.ask_tell], lag_s, caller);
  } else {
    std::unique_ptr<v1::StudyService::Stub> stub = v1::StudyService::NewStub(channel);
    RunWatchClient(*stub, targets.managed_study, caller);
  }
}

// A channel of its own: a distinct argument and a local subchannel pool keep gRPC from
// sharing one TCP connection between channels to the same address.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int index) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("evoscale.bench.channel", index);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// ---- The run ---------------------------------------------------------------------------------

// One window of the run: what the clients did in it and the server's RSS at its end.
struct Window {
  double end_s = 0;  // since the clients started
  double seconds = 0;
  std::optional<double> rss_mib;
  std::optional<double> rss_anon_mib, rss_file_mib;
  std::optional<double> sqlite_mib;  // SQLite's heap (part of the anonymous RSS), from /metrics
  Latencies latencies;               // of the calls that succeeded, sorted
  int64_t errors = 0;                // so far

  int64_t ops() const {
    int64_t n = 0;
    for (const std::vector<int64_t>& l : latencies) n += static_cast<int64_t>(l.size());
    return n;
  }
};

void PrintProgress(const Window& w) {
  std::string line = absl::StrFormat("[%5.0fs] ops %7d (%6.0f/s)", w.end_s, w.ops(),
                                     static_cast<double>(w.ops()) / w.seconds);
  for (int c = 0; c < kNumClasses; ++c) {
    absl::StrAppend(&line, " | ", kClassNames[c], " ", Figure(PercentileMs(w.latencies[c], 0.5), 2),
                    "/", Figure(PercentileMs(w.latencies[c], 0.99), 2));
  }
  absl::StrAppend(&line, " ms p50/p99 | rss ",
                  w.rss_mib
                      ? absl::StrFormat("%.1f MiB (anon %.1f of which sqlite %.1f, file %.1f)",
                                        *w.rss_mib, w.rss_anon_mib.value_or(NAN),
                                        w.sqlite_mib.value_or(NAN), w.rss_file_mib.value_or(NAN))
                      : "-",
                  " | errors ", w.errors);
  std::fprintf(stderr, "%s\n", line.c_str());
}

struct LoadConfig {
  std::string address;
  std::string http_address;  // for SQLite's memory in /metrics; empty: not read
  pid_t server_pid = 0;      // for RSS; 0: none
  int clients = 0;
  double duration_s = 0;
  double sample_s = 0;
};

// Runs the clients for the duration on `channels` (one each), takes a window every sample_s,
// then stops them; returns the windows.
std::vector<Window> RunLoad(const LoadConfig& cfg, const Roles& roles, const Targets& targets,
                            const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                            ErrorLog* errors) {
  std::vector<LatencyLog> logs(cfg.clients);
  absl::Notification go, stop;
  std::vector<std::thread> threads;
  for (int i = 0; i < cfg.clients; ++i) {
    threads.emplace_back([&, i] {
      Caller caller(&logs[i], errors, &stop);
      go.WaitForNotification();
      RunClient(i, roles, targets, channels[i], cfg.duration_s, &caller);
    });
  }
  const Clock::time_point start = Clock::now();
  go.Notify();
  std::vector<Window> windows;
  // Less a hair, so that floating-point noise does not add an empty last window.
  const int count = static_cast<int>(std::ceil(cfg.duration_s / cfg.sample_s - 1e-9));
  double previous_end = 0;
  for (int w = 1; w <= count; ++w) {
    Window window;
    window.end_s = std::min(w * cfg.sample_s, cfg.duration_s);
    window.seconds = window.end_s - previous_end;
    previous_end = window.end_s;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(window.end_s)));
    for (LatencyLog& log : logs) log.TakeInto(&window.latencies);
    for (std::vector<int64_t>& l : window.latencies) std::sort(l.begin(), l.end());
    if (!cfg.http_address.empty()) window.sqlite_mib = SqliteMib(cfg.http_address);
    if (cfg.server_pid > 0) {
      if (std::optional<Rss> rss = ReadRss(cfg.server_pid)) {
        window.rss_mib = rss->total;
        window.rss_anon_mib = rss->anon;
        window.rss_file_mib = rss->file;
      }
    }
    window.errors = errors->total();
    PrintProgress(window);
    windows.push_back(std::move(window));
  }
  stop.Notify();
  for (std::thread& t : threads) t.join();
  return windows;
}

// After the load: pauses the managed study (a --server would otherwise run its trials on) and
// counts its trials by state. A trial that failed or was infeasible is an error.
std::map<std::string, int64_t> ManagedTrialStates(v1::StudyService::Stub& stub,
                                                  const std::string& study, ErrorLog* errors) {
  v1::SetStudyStateRequest pause;
  pause.set_name(study);
  pause.set_state(v1::Study::INACTIVE);
  v1::Study paused;
  if (grpc::Status st = CallWithDeadline(
          [&](grpc::ClientContext* ctx) { return stub.SetStudyState(ctx, pause, &paused); });
      !st.ok()) {
    errors->AddRpc("SetStudyState", st);
  }
  std::map<std::string, int64_t> states;
  v1::ListTrialsRequest list;
  list.set_parent(study);
  list.set_page_size(1000);
  do {
    v1::ListTrialsResponse page;
    if (grpc::Status st = CallWithDeadline(
            [&](grpc::ClientContext* ctx) { return stub.ListTrials(ctx, list, &page); });
        !st.ok()) {
      errors->AddRpc("ListTrials", st);
      break;
    }
    for (const v1::Trial& t : page.trials()) {
      const std::string state = v1::Trial::State_Name(t.state());
      ++states[state];
      if (t.state() == v1::Trial::INFEASIBLE || t.state() == v1::Trial::FAILED) {
        errors->Add(absl::StrCat("managed trial ", state), t.infeasible_reason());
      }
    }
    list.set_page_token(page.next_page_token());
  } while (!list.page_token().empty());
  return states;
}

// ---- The report ------------------------------------------------------------------------------

// Latencies of class `c` over windows [from, to), sorted.
std::vector<int64_t> Merged(const std::vector<Window>& windows, size_t from, size_t to, int c) {
  std::vector<int64_t> all;
  for (size_t w = from; w < to; ++w) {
    all.insert(all.end(), windows[w].latencies[c].begin(), windows[w].latencies[c].end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

struct ClassSummary {
  int64_t count = 0;
  double p50_ms = NAN, p99_ms = NAN;              // the whole run
  double middle_p99_ms = NAN, last_p99_ms = NAN;  // its middle and last thirds
};

struct Summary {
  std::string server;
  Roles roles;
  double duration_s = 0;
  std::vector<Window> windows;
  std::array<ClassSummary, kNumClasses> classes;
  // The RSS at a third of the run and at its end, when both were read.
  struct RssSpan {
    double from_s, from_mib, to_s, to_mib;
    double from_anon_mib, to_anon_mib;
  };
  std::optional<RssSpan> rss_span;
  size_t ask_tell_studies = 0;
  int64_t ask_tell_completed = 0;
  int64_t ask_tell_rotations = 0;  // studies that reached kTrialsPerStudy and were replaced
  std::string managed_study;
  std::map<std::string, int64_t> managed_states;
  std::string server_exit;     // empty with --server
  std::string database_files;  // the child's database sizes at the end; empty with --server
  std::map<std::string, ErrorLog::Kind> errors;
  int64_t error_count = 0;
};

void Summarize(Summary* s) {
  const size_t n = s->windows.size();
  for (int c = 0; c < kNumClasses; ++c) {
    ClassSummary& cs = s->classes[c];
    const std::vector<int64_t> all = Merged(s->windows, 0, n, c);
    cs.count = static_cast<int64_t>(all.size());
    cs.p50_ms = PercentileMs(all, 0.5);
    cs.p99_ms = PercentileMs(all, 0.99);
    cs.middle_p99_ms = PercentileMs(Merged(s->windows, n / 3, 2 * n / 3, c), 0.99);
    cs.last_p99_ms = PercentileMs(Merged(s->windows, 2 * n / 3, n, c), 0.99);
  }
  if (n >= 2 && s->windows[n / 3].rss_mib && s->windows[n - 1].rss_mib) {
    const Window& from = s->windows[n / 3];
    const Window& to = s->windows[n - 1];
    s->rss_span = Summary::RssSpan{from.end_s,
                                   *from.rss_mib,
                                   to.end_s,
                                   *to.rss_mib,
                                   from.rss_anon_mib.value_or(NAN),
                                   to.rss_anon_mib.value_or(NAN)};
  }
}

void PrintSummary(const Summary& s) {
  std::printf(
      "\nsoak: %d clients (%d ask/tell on %zu studies, %d telemetry, %d managed-study "
      "watchers) for %.0f s against %s\n",
      s.roles.ask_tell + s.roles.telemetry + s.roles.watch, s.roles.ask_tell, s.ask_tell_studies,
      s.roles.telemetry, s.roles.watch, s.duration_s, s.server.c_str());
  std::printf("%7s %9s %9s %9s %9s %9s", "t_s", "rss_mib", "anon_mib", "sqlite", "file_mib",
              "ops/s");
  for (const char* name : kClassNames) std::printf(" %13s", absl::StrCat(name, "_p99").c_str());
  std::printf(" %7s\n", "errors");
  for (const Window& w : s.windows) {
    std::printf("%7.0f %9s %9s %9s %9s %9.0f", w.end_s, Figure(w.rss_mib.value_or(NAN), 1).c_str(),
                Figure(w.rss_anon_mib.value_or(NAN), 1).c_str(),
                Figure(w.sqlite_mib.value_or(NAN), 1).c_str(),
                Figure(w.rss_file_mib.value_or(NAN), 1).c_str(),
                static_cast<double>(w.ops()) / w.seconds);
    for (const std::vector<int64_t>& l : w.latencies) {
      std::printf(" %13s", Figure(PercentileMs(l, 0.99)).c_str());
    }
    std::printf(" %7" PRId64 "\n", w.errors);
  }
  std::printf(
      "\nper class (ms): calls, p50 and p99 of the whole run, p99 of the last third / "
      "the middle third\n");
  for (int c = 0; c < kNumClasses; ++c) {
    const ClassSummary& cs = s.classes[c];
    std::printf("  %-10s %10" PRId64 "  p50 %8s  p99 %8s  last/middle %s (%s / %s)\n",
                kClassNames[c], cs.count, Figure(cs.p50_ms).c_str(), Figure(cs.p99_ms).c_str(),
                Figure(cs.last_p99_ms / cs.middle_p99_ms, 2).c_str(),
                Figure(cs.last_p99_ms).c_str(), Figure(cs.middle_p99_ms).c_str());
  }
  if (s.rss_span) {
    const Summary::RssSpan& r = *s.rss_span;
    std::printf("RSS: %.1f MiB at %.0f s -> %.1f MiB at %.0f s: %+.1f MiB (%+.1f%%)\n", r.from_mib,
                r.from_s, r.to_mib, r.to_s, r.to_mib - r.from_mib,
                100 * (r.to_mib / r.from_mib - 1));
    std::printf("  anonymous (heap): %.1f -> %.1f MiB: %+.1f MiB; the rest is file-backed\n",
                r.from_anon_mib, r.to_anon_mib, r.to_anon_mib - r.from_anon_mib);
  } else {
    std::printf(
        "RSS: no growth figure: not read at a third of the run and at its end (with "
        "--server, give --server_pid)\n");
  }
  std::string managed;
  for (const auto& [state, count] : s.managed_states) {
    absl::StrAppend(&managed, " ", state, " ", count);
  }
  std::printf("trials: %" PRId64 " ask/tell completed (%" PRId64
              " studies ended at %d trials and were replaced); managed study %s:%s\n",
              s.ask_tell_completed, s.ask_tell_rotations, kTrialsPerStudy, s.managed_study.c_str(),
              managed.empty() ? " none" : managed.c_str());
  if (!s.server_exit.empty()) std::printf("evoscaled: %s\n", s.server_exit.c_str());
  if (!s.database_files.empty()) {
    std::printf("databases at the end: %s\n", s.database_files.c_str());
  }
  std::printf("errors: %" PRId64 "\n", s.error_count);
  for (const auto& [kind, k] : s.errors) {
    std::printf("  %s: %" PRId64 " (first: %s)\n", kind.c_str(), k.count, k.first_message.c_str());
  }
}

void WriteCsv(const Summary& s, std::ostream& out) {
  out << "t_s,seconds,rss_mib,rss_anon_mib,sqlite_mib,rss_file_mib,ops,ops_per_s,errors";
  for (const char* name : kClassNames) {
    out << "," << name << "_count," << name << "_p50_ms," << name << "_p99_ms";
  }
  out << "\n";
  // An empty field where there is no figure.
  auto field = [](double v, int decimals) {
    return std::isnan(v) ? std::string() : absl::StrFormat("%.*f", decimals, v);
  };
  for (const Window& w : s.windows) {
    out << field(w.end_s, 1) << "," << field(w.seconds, 3) << ","
        << field(w.rss_mib.value_or(NAN), 2) << "," << field(w.rss_anon_mib.value_or(NAN), 2) << ","
        << field(w.sqlite_mib.value_or(NAN), 2) << "," << field(w.rss_file_mib.value_or(NAN), 2)
        << "," << w.ops() << "," << field(static_cast<double>(w.ops()) / w.seconds, 1) << ","
        << w.errors;
    for (const std::vector<int64_t>& l : w.latencies) {
      out << "," << l.size() << "," << field(PercentileMs(l, 0.5), 4) << ","
          << field(PercentileMs(l, 0.99), 4);
    }
    out << "\n";
  }
}

nlohmann::ordered_json ToJson(const Summary& s) {
  nlohmann::ordered_json windows = nlohmann::ordered_json::array();
  for (const Window& w : s.windows) {
    nlohmann::ordered_json row = {
        {"t_s", Rounded(w.end_s, 1)},
        {"seconds", Rounded(w.seconds, 3)},
        {"rss_mib", Rounded(w.rss_mib.value_or(NAN), 2)},
        {"rss_anon_mib", Rounded(w.rss_anon_mib.value_or(NAN), 2)},
        {"sqlite_mib", Rounded(w.sqlite_mib.value_or(NAN), 2)},
        {"rss_file_mib", Rounded(w.rss_file_mib.value_or(NAN), 2)},
        {"ops", w.ops()},
        {"ops_per_s", Rounded(static_cast<double>(w.ops()) / w.seconds, 1)},
        {"errors", w.errors}};
    for (int c = 0; c < kNumClasses; ++c) {
      row[kClassNames[c]] = {{"count", w.latencies[c].size()},
                             {"p50_ms", Rounded(PercentileMs(w.latencies[c], 0.5))},
                             {"p99_ms", Rounded(PercentileMs(w.latencies[c], 0.99))}};
    }
    windows.push_back(std::move(row));
  }
  nlohmann::ordered_json classes;
  for (int c = 0; c < kNumClasses; ++c) {
    const ClassSummary& cs = s.classes[c];
    classes[kClassNames[c]] = {
        {"count", cs.count},
        {"p50_ms", Rounded(cs.p50_ms)},
        {"p99_ms", Rounded(cs.p99_ms)},
        {"middle_third_p99_ms", Rounded(cs.middle_p99_ms)},
        {"last_third_p99_ms", Rounded(cs.last_p99_ms)},
        {"p99_last_over_middle", Rounded(cs.last_p99_ms / cs.middle_p99_ms)}};
  }
  nlohmann::ordered_json rss = nullptr;
  if (s.rss_span) {
    const Summary::RssSpan& r = *s.rss_span;
    rss = {{"from_t_s", Rounded(r.from_s, 1)},
           {"from_mib", Rounded(r.from_mib, 2)},
           {"to_t_s", Rounded(r.to_s, 1)},
           {"to_mib", Rounded(r.to_mib, 2)},
           {"growth_mib", Rounded(r.to_mib - r.from_mib, 2)},
           {"anon_from_mib", Rounded(r.from_anon_mib, 2)},
           {"anon_to_mib", Rounded(r.to_anon_mib, 2)},
           {"anon_growth_mib", Rounded(r.to_anon_mib - r.from_anon_mib, 2)}};
  }
  nlohmann::ordered_json errors = nlohmann::ordered_json::object();
  for (const auto& [kind, k] : s.errors) {
    errors[kind] = {{"count", k.count}, {"first_message", k.first_message}};
  }
  return {{"server", s.server},
          {"clients",
           {{"ask_tell", s.roles.ask_tell},
            {"telemetry", s.roles.telemetry},
            {"watch", s.roles.watch}}},
          {"duration_s", s.duration_s},
          {"windows", std::move(windows)},
          {"classes", std::move(classes)},
          {"rss", std::move(rss)},
          {"ask_tell_trials_completed", s.ask_tell_completed},
          {"ask_tell_studies_replaced", s.ask_tell_rotations},
          {"database_files", s.database_files},
          {"managed_study", s.managed_study},
          {"managed_trials", s.managed_states},
          {"server_exit", s.server_exit},
          {"error_count", s.error_count},
          {"errors", std::move(errors)}};
}

// "exit code 0", "killed by signal 9": how a process with wait status `status` ended.
std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

// The server under load: a child evoscaled on a fresh database, or --server.
struct Server {
  std::unique_ptr<evoscale::testing::TempDir> dir;
  std::unique_ptr<evoscale::testing::EvoscaledProcess> child;  // killed before dir goes
  std::string address;
  pid_t pid = 0;  // for RSS; 0: unknown
};

absl::StatusOr<Server> StartServer() {
  Server server;
  server.address = absl::GetFlag(FLAGS_server);
  if (!server.address.empty()) {
    server.pid = absl::GetFlag(FLAGS_server_pid);
    return server;
  }
  server.dir = std::make_unique<evoscale::testing::TempDir>();
  // Two managed trials at a time, whatever the machine: the soak is about the service.
  absl::StatusOr<std::unique_ptr<evoscale::testing::EvoscaledProcess>> child =
      evoscale::testing::EvoscaledProcess::Start(server.dir->path() + "/soak.db",
                                                 {"--max-running-trials", "2"});
  if (!child.ok()) return child.status();
  server.child = *std::move(child);
  server.address = server.child->grpc_address();
  server.pid = server.child->pid();
  return server;
}

// Opens `path` ("": none) for writing now, so that a bad path fails before the run.
bool OpenOutput(const std::string& path, std::unique_ptr<std::ofstream>* out) {
  if (path.empty()) return true;
  *out = std::make_unique<std::ofstream>(path);
  if (**out) return true;
  std::fprintf(stderr, "soak_bench: cannot write %s\n", path.c_str());
  return false;
}

int Run() {
  LoadConfig cfg;
  cfg.clients = absl::GetFlag(FLAGS_clients);
  cfg.duration_s = absl::GetFlag(FLAGS_duration_s);
  cfg.sample_s = absl::GetFlag(FLAGS_sample_s);
  if (cfg.clients < 3 || !(cfg.duration_s > 0) || !(cfg.sample_s > 0)) {
    std::fprintf(stderr, "soak_bench: want --clients >= 3, --duration_s > 0, --sample_s > 0\n");
    return 2;
  }
  std::unique_ptr<std::ofstream> csv, json;
  if (!OpenOutput(absl::GetFlag(FLAGS_csv), &csv) ||
      !OpenOutput(absl::GetFlag(FLAGS_json), &json)) {
    return 2;
  }
  absl::StatusOr<Server> server = StartServer();
  if (!server.ok()) {
    std::fprintf(stderr, "soak_bench: starting evoscaled: %s\n",
                 server.status().ToString().c_str());
    return 1;
  }
  cfg.address = server->address;
  cfg.server_pid = server->pid;
  if (server->child) cfg.http_address = server->child->http_address();

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < cfg.clients; ++i) {
    channels.push_back(NewChannel(cfg.address, i));
    if (!channels.back()->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(10))) {
      std::fprintf(stderr, "soak_bench: cannot connect to %s\n", cfg.address.c_str());
      return 1;
    }
  }
  const Roles roles = SplitClients(cfg.clients);
  absl::StatusOr<Targets> targets = SetUp(channels[0], roles);
  if (!targets.ok()) {
    std::fprintf(stderr, "soak_bench: setting up: %s\n", targets.status().ToString().c_str());
    return 1;
  }
  Summary summary;
  summary.server = server->child
                       ? absl::StrCat("child evoscaled (pid ", server->pid, ") at ", cfg.address)
                       : absl::StrCat("evoscaled at ", cfg.address);
  summary.roles = roles;
  summary.duration_s = cfg.duration_s;
  summary.ask_tell_studies = targets->studies.size();
  summary.managed_study = targets->managed_study;
  std::fprintf(stderr, "soak: %d clients for %.0f s against %s\n", cfg.clients, cfg.duration_s,
               summary.server.c_str());

  ErrorLog errors;
  summary.windows = RunLoad(cfg, roles, *targets, channels, &errors);
  std::unique_ptr<v1::StudyService::Stub> stub = v1::StudyService::NewStub(channels[0]);
  summary.ask_tell_completed = targets->ring->completed();
  summary.ask_tell_rotations = targets->ring->rotations();
  summary.managed_states = ManagedTrialStates(*stub, targets->managed_study, &errors);
  if (server->dir) {
    // What the databases hold at the end (with their WALs): the file-backed part of the RSS
    // is their pages, memory-mapped.
    for (const auto& [name, prefix] :
         {std::pair{"studies", "soak.db"}, std::pair{"telemetry", "soak.telemetry.db"}}) {
      uintmax_t bytes = 0;
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(server->dir->path(), ec)) {
        const std::string file = entry.path().filename().string();
        if (absl::StartsWith(file, prefix) && !absl::EndsWith(file, ".lock")) {
          bytes += entry.file_size(ec);
        }
      }
      absl::StrAppend(&summary.database_files, summary.database_files.empty() ? "" : ", ", name,
                      " ", absl::StrFormat("%.1f", static_cast<double>(bytes) / (1 << 20)), " MiB");
    }
  }
  if (server->child) {
    const int status = server->child->Stop(SIGTERM);
    summary.server_exit = DescribeExit(status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      errors.Add("evoscaled did not stop cleanly", summary.server_exit);
    }
  }
  summary.errors = errors.kinds();
  summary.error_count = errors.total();
  Summarize(&summary);
  PrintSummary(summary);
  if (csv) WriteCsv(summary, *csv);
  if (json) *json << ToJson(summary).dump(2) << "\n";
  if ((csv && !csv->flush()) || (json && !json->flush())) {
    std::fprintf(stderr, "soak_bench: writing --csv or --json failed\n");
    return 1;
  }
  return summary.error_count > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a soak of evoscaled: ask/tell studies, telemetry and a managed study at once.\n"
      "  soak_bench [--clients 64] [--duration_s 600] [--sample_s 30]\n"
      "             [--server HOST:PORT [--server_pid PID]] [--csv PATH] [--json PATH]");
  absl::ParseCommandLine(argc, argv);
  return Run();
}
