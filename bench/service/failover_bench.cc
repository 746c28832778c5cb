// failover_bench (issue 30, must-show 2): two evoscaled replicas on one throwaway PostgreSQL
// (fsync on, --durability power) under a closed-loop ask/tell load; the replica owning the study
// is killed with SIGKILL N times (started again each time, so two serve at every kill), then
// hung with SIGSTOP once, then PostgreSQL is restarted with pg_ctl -m immediate. Clients talk to
// both replicas (each keeps a preferred one and moves to the other on UNAVAILABLE) and keep a
// ledger of what was acknowledged; at the end the ledger is checked against the database.
//
//   failover_bench [--kills 20] [--clients 8] [--lease_seconds 2] [--preload N]
//                  [--algorithm RANDOM|GENETIC|...]
//
// Reports the time from each kill until the survivor hands a new client a trial of the study
// (median, p99): the takeover, the study read back and its designer brought up to date; the
// same after SIGSTOP, and the ledger's checks: every acknowledged completion stored
// with its value, no trial handed to two clients, no trial number repeated.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/support/postgres_server.h"

ABSL_FLAG(int, kills, 20, "SIGKILLs of the owning replica");
ABSL_FLAG(int, clients, 8, "closed-loop ask/tell clients");
ABSL_FLAG(double, lease_seconds, 2, "the replicas' --lease-seconds");
ABSL_FLAG(std::string, algorithm, "RANDOM",
          "the study's algorithm (a takeover rebuilds its designer)");
ABSL_FLAG(int, preload, 0,
          "completed trials created before the first kill (a takeover then reads them all)");

namespace {

namespace v1 = ::evoscale::v1;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::PostgresServer;
using SteadyClock = std::chrono::steady_clock;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The replicas in service, by slot (0, 1); a slot's replica is replaced after a kill.
class Fleet {
 public:
  Fleet(std::string uri, std::string dir, double lease) : uri_(uri), dir_(dir), lease_(lease) {}
  bool Start(int slot) {
    auto p = EvoscaledProcess::Start(
        uri_, {"--durability", "power", "--lease-seconds", absl::StrCat(lease_), "--telemetry-db",
               absl::StrCat(dir_, "/t", slot, "-", ++started_, ".db")});
    if (!p.ok()) {
      std::fprintf(stderr, "failover_bench: %s\n", p.status().ToString().c_str());
      return false;
    }
    absl::MutexLock lock(&mu_);
    stubs_[slot] = v1::StudyService::NewStub(
        grpc::CreateChannel((*p)->grpc_address(), grpc::InsecureChannelCredentials()));
    procs_[slot] = *std::move(p);
    return true;
  }
  std::shared_ptr<v1::StudyService::Stub> Stub(int slot) {
    absl::MutexLock lock(&mu_);
    return stubs_[slot];
  }
  EvoscaledProcess& Process(int slot) { return *procs_[slot]; }

 private:
  const std::string uri_, dir_;
  const double lease_;
  int started_ = 0;
  absl::Mutex mu_;
  std::shared_ptr<v1::StudyService::Stub> stubs_[2] ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EvoscaledProcess> procs_[2];
};

struct Ledger {
  absl::Mutex mu;
  std::map<int64_t, std::string> handed_to;  // trial id -> the client it was handed to
  std::vector<std::string> shared;           // trials handed to two clients
  std::map<int64_t, double> completed;       // acknowledged CompleteTrial: id -> value
  int64_t errors = 0;
};

grpc::Status Call(Fleet& fleet, int preferred, auto method, const auto& req, auto* resp) {
  grpc::Status st;
  for (int attempt = 0; attempt < 40; ++attempt) {
    const int slot = (preferred + attempt) % 2;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    st = ((*fleet.Stub(slot)).*method)(&ctx, req, resp);
    if (st.ok() || (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
                    st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)) {
      return st;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return st;
}

void Client(Fleet& fleet, const std::string& study, int index, const std::atomic<bool>& stop,
            Ledger& ledger) {
  const std::string client_id = absl::StrCat("client-", index);
  int64_t n = 0;
  while (!stop) {
    v1::SuggestTrialsRequest sreq;
    sreq.set_parent(study);
    sreq.set_client_id(client_id);
    sreq.set_suggestion_count(1);
    v1::SuggestTrialsResponse sresp;
    if (!Call(fleet, index, &v1::StudyService::Stub::SuggestTrials, sreq, &sresp).ok() ||
        sresp.trials().empty()) {
      absl::MutexLock lock(&ledger.mu);
      ++ledger.errors;
      continue;
    }
    const v1::Trial& t = sresp.trials(0);
    {
      absl::MutexLock lock(&ledger.mu);
      auto [it, added] = ledger.handed_to.emplace(t.id(), client_id);
      if (!added && it->second != client_id) ledger.shared.push_back(t.name());
    }
    v1::CompleteTrialRequest creq;
    creq.set_name(t.name());
    const double value = index * 1e6 + static_cast<double>(++n);
    (*creq.mutable_final_measurement()->mutable_metrics())["loss"] = value;
    v1::Trial done;
    grpc::Status st = Call(fleet, index, &v1::StudyService::Stub::CompleteTrial, creq, &done);
    absl::MutexLock lock(&ledger.mu);
    if (st.ok()) {
      ledger.completed[t.id()] = value;
    } else {
      ++ledger.errors;  // e.g. FAILED_PRECONDITION: its first attempt landed, the answer did not
    }
  }
}

// How long until `slot`'s replica hands a new client (`probe`) a trial of `study`: the
// takeover, the study read from the database and its designer brought up to date.
double TimeToServe(Fleet& fleet, int slot, const std::string& study, const std::string& probe,
                   SteadyClock::time_point t0) {
  for (;;) {
    v1::SuggestTrialsRequest req;
    req.set_parent(study);
    req.set_client_id(probe);
    req.set_suggestion_count(1);
    v1::SuggestTrialsResponse out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(2000));
    if (fleet.Stub(slot)->SuggestTrials(&ctx, req, &out).ok()) {
      return Ms(SteadyClock::now() - t0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// `n` completed trials, created through slot 0 by 8 threads.
bool Preload(Fleet& fleet, const std::string& study, int n) {
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        v1::CreateTrialRequest req;
        req.set_parent(study);
        v1::Trial* trial = req.mutable_trial();
        trial->add_parameters()->set_name("x");
        trial->mutable_parameters(0)->set_double_value((i % 1000) / 1000.0);
        trial->set_state(v1::Trial::SUCCEEDED);
        (*trial->mutable_final_measurement()->mutable_metrics())["loss"] = i;
        v1::Trial out;
        if (!Call(fleet, 0, &v1::StudyService::Stub::CreateTrial, req, &out).ok()) ++failed;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed > 0) std::fprintf(stderr, "failover_bench: %d preload calls failed\n", failed.load());
  return failed == 0;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

int Run() {
  auto pg = PostgresServer::Start({.fsync = true});
  if (!pg.ok()) {
    std::fprintf(stderr, "failover_bench: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  auto uri = (*pg)->CreateDatabase("failover");
  if (!uri.ok()) return 1;
  evoscale::testing::TempDir dir;
  const double lease = absl::GetFlag(FLAGS_lease_seconds);
  Fleet fleet(*uri, dir.path(), lease);
  if (!fleet.Start(0) || !fleet.Start(1)) return 1;

  v1::CreateStudyRequest create;
  create.mutable_study()->set_display_name("failover");
  v1::StudySpec* spec = create.mutable_study()->mutable_spec();
  spec->add_metrics()->set_name("loss");
  spec->mutable_metrics(0)->set_goal(v1::MetricSpec::MINIMIZE);
  auto* x = spec->add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_max(1);
  v1::AlgorithmSpec::Algorithm algorithm;
  if (!v1::AlgorithmSpec::Algorithm_Parse(absl::GetFlag(FLAGS_algorithm), &algorithm)) {
    std::fprintf(stderr, "failover_bench: --algorithm: unknown algorithm\n");
    return 2;
  }
  spec->mutable_algorithm()->set_algorithm(algorithm);
  v1::Study study;
  grpc::ClientContext ctx;
  if (!fleet.Stub(0)->CreateStudy(&ctx, create, &study).ok()) return 1;
  int owner = 0;  // created through slot 0, which took its lease
  if (!Preload(fleet, study.name(), absl::GetFlag(FLAGS_preload))) return 1;

  Ledger ledger;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < absl::GetFlag(FLAGS_clients); ++i) {
    clients.emplace_back(Client, std::ref(fleet), study.name(), i, std::cref(stop),
                         std::ref(ledger));
  }
  std::vector<double> kills;
  for (int k = 0; k < absl::GetFlag(FLAGS_kills); ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    const auto t0 = SteadyClock::now();
    fleet.Process(owner).Stop(SIGKILL);
    const int survivor = 1 - owner;
    kills.push_back(TimeToServe(fleet, survivor, study.name(), absl::StrCat("probe-", k), t0));
    std::fprintf(stderr, "kill %d: replica %d's study served by the other after %.0f ms\n", k + 1,
                 owner, kills.back());
    if (!fleet.Start(owner)) return 1;
    owner = survivor;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const auto t0 = SteadyClock::now();
  kill(fleet.Process(owner).pid(), SIGSTOP);
  const double hung = TimeToServe(fleet, 1 - owner, study.name(), "probe-hung", t0);
  kill(fleet.Process(owner).pid(), SIGCONT);
  std::fprintf(stderr, "SIGSTOP: the other served the study after %.0f ms (lease %.1f s)\n", hung,
               lease);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  if (!(*pg)->Stop(/*immediate=*/true).ok() || !(*pg)->Restart().ok()) {
    std::fprintf(stderr, "failover_bench: restarting PostgreSQL failed\n");
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stop = true;
  for (std::thread& t : clients) t.join();

  // The ledger against the database, read through a replica.
  std::map<int64_t, v1::Trial> stored;
  v1::ListTrialsRequest list;
  list.set_parent(study.name());
  list.set_page_size(1000);
  for (;;) {
    v1::ListTrialsResponse page;
    if (!Call(fleet, 0, &v1::StudyService::Stub::ListTrials, list, &page).ok()) return 1;
    for (const v1::Trial& t : page.trials()) stored[t.id()] = t;
    if (page.next_page_token().empty()) break;
    list.set_page_token(page.next_page_token());
  }
  int64_t lost = 0;
  for (const auto& [id, value] : ledger.completed) {
    auto it = stored.find(id);
    if (it == stored.end() || it->second.state() != v1::Trial::SUCCEEDED ||
        it->second.final_measurement().metrics().at("loss") != value) {
      ++lost;
    }
  }
  const bool dense =
      !stored.empty() && stored.rbegin()->first == static_cast<int64_t>(stored.size());
  std::printf(
      "preload: %d completed trials\n"
      "kills: %zu, survivor served the study after median %.0f ms, p99 %.0f ms, max %.0f ms\n"
      "SIGSTOP of the owner: served after %.0f ms (lease %.1f s)\n"
      "ledger: %zu acknowledged completions, %" PRId64
      " missing or different in the database; "
      "%zu trials handed to two clients; %zu trials stored, ids 1..%zu %s; %" PRId64
      " client calls failed (retried)\n",
      absl::GetFlag(FLAGS_preload), kills.size(), Percentile(kills, 0.5), Percentile(kills, 0.99),
      *std::max_element(kills.begin(), kills.end()), hung, lease, ledger.completed.size(), lost,
      ledger.shared.size(), stored.size(), stored.size(),
      dense ? "dense (no number repeats)" : "NOT dense", ledger.errors);
  return lost == 0 && ledger.shared.empty() && dense ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
