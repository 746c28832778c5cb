// evoscaled: the evoscale server. Flags are parsed here, with CLI11; everything else lives in
// server.cc.
#include <algorithm>
#include <csignal>
#include <iostream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "service/server.h"

namespace {

using evoscale::service::Durability;
using evoscale::service::ServerOptions;

constexpr int kBadUsage = 2;

// The most --max-running-trials and --gpus accept.
constexpr int kMaxCount = 100000;

// Declares evoscaled's flags on `app`, bound to `options` and, for --durability, to
// `durability` ("process" or "power").
void DefineFlags(CLI::App& app, ServerOptions& options, std::string& durability,
                 std::string& capacity) {
  app.add_option("--db", options.db_path,
                 "SQLite database file (default evoscale.db), or a PostgreSQL URI "
                 "postgresql://USER@HOST:PORT/DB (password from ~/.pgpass or PGPASSWORD)")
      ->type_name("PATH|URI");
  app.add_option("--telemetry-db", options.telemetry_db_path,
                 "SQLite file for telemetry (default: beside --db, x.db -> x.telemetry.db; "
                 "with a PostgreSQL --db, that database, shared by the replicas)")
      ->type_name("PATH");
  app.add_option("--advertise", options.advertise_address,
                 "PostgreSQL --db, several replicas: the gRPC address other replicas forward "
                 "this one's studies to (default: --grpc's host and port)")
      ->type_name("HOST:PORT");
  app.add_option_function<double>(
         "--lease-seconds",
         [&options](double seconds) { options.lease = absl::Seconds(seconds); },
         "PostgreSQL --db: how long a hung replica keeps its studies (default 5)")
      ->check(CLI::Range(0.3, 3600.0))
      ->type_name("SECONDS");
  app.add_option("--grpc", options.grpc_address,
                 "gRPC address (default 127.0.0.1:50051; port 0 picks a free port)")
      ->type_name("HOST:PORT");
  app.add_option("--http", options.http_address,
                 "HTTP address for /healthz, /metrics, /api/v1 (default 127.0.0.1:8080)")
      ->type_name("HOST:PORT");
  app.add_option("--auth-tokens", options.auth_tokens_path,
                 "file of \"TOKEN ROLE\" lines (admin|writer|reader); required, with TLS, to "
                 "listen on a non-loopback address")
      ->type_name("FILE");
  app.add_option("--tls-cert", options.tls_cert_path,
                 "PEM certificate (chain) for TLS on --grpc and --http; with --tls-key")
      ->type_name("FILE");
  app.add_option("--tls-key", options.tls_key_path, "PEM private key of --tls-cert")
      ->type_name("FILE");
  app.add_option("--tls-client-ca", options.tls_client_ca_path,
                 "mutual TLS: clients must show a certificate this PEM CA signed")
      ->type_name("FILE");
  app.add_option("--tls-peer-ca", options.tls_peer_ca_path,
                 "several replicas with TLS: the PEM CA of the other replicas' certificates; "
                 "calls on their studies are forwarded to them over TLS (this replica's "
                 "certificate is its client certificate under --tls-client-ca)")
      ->type_name("FILE");
  app.add_flag("--insecure-plaintext", options.insecure_plaintext,
               "serve tokens in plaintext beyond loopback (refused without it when there is no "
               "TLS); for networks something else encrypts");
  app.add_option("--durability", durability,
                 "process (default): an acknowledged write survives the process being killed; "
                 "power: it also survives power loss (fsync on every commit)")
      ->type_name("process|power")
      ->check(CLI::IsMember({"process", "power"}));
  app.add_flag("--accept-damaged-wal", options.accept_damaged_wal,
               "open a database whose write-ahead log is damaged as of its last commit before "
               "the damage (evoscaled refuses to start otherwise, naming the damage)");
  app.add_option("--max-running-trials", options.scheduler.max_running_trials,
                 "trials of managed studies (a trial template with a command) run at once as "
                 "local processes (default: the number of CPUs; 0: none)")
      ->type_name("N")
      ->check(CLI::Range(0, kMaxCount));
  app.add_option("--gpus", options.scheduler.gpus,
                 "GPUs lent to managed trials, ids 0..N-1 (default 0)")
      ->type_name("N")
      ->check(CLI::Range(0, kMaxCount));
  app.add_option("--capacity", capacity,
                 "what managed trials may request together, e.g. cpu=8,memory=32Gi,gpus=1: a "
                 "trial starts when its request fits beside those running (default: this "
                 "machine's cores, 80% of its memory, --gpus); gpus= sets --gpus")
      ->type_name("cpu=N,memory=SIZE,gpus=N");
  app.add_option("--slurm-conf", options.scheduler.slurm_conf,
                 "slurm.conf of the cluster that runs the trials of studies whose "
                 "trial_template.runner is \"slurm\" (default: Slurm's own, $SLURM_CONF or "
                 "/etc/slurm/slurm.conf)")
      ->type_name("PATH");
  app.add_option("--katib-grpc", options.katib_grpc_address,
                 "serve Katib's Suggestion API (api.v1.beta1.Suggestion, algorithms "
                 "evoscale-genetic, -regularized-evolution, -nsga2, -random) and gRPC health "
                 "here, e.g. 0.0.0.0:6789 as Katib's suggestion image (default: off); plaintext, "
                 "no tokens, as Katib dials")
      ->type_name("HOST:PORT");
}

// `address` as given ("127.0.0.1:0") with the port it got.
std::string WithPort(const std::string& address, int port) {
  return address.substr(0, address.rfind(':')) + ":" + std::to_string(port);
}

int Fail(const std::string& message) {
  std::cerr << "evoscaled: " << message << "\n";
  return kBadUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds absl with the mutex deadlock detector on; it costs ~2% of the hot path and
  // our lock order is fixed (study -> store, service -> watcher -> core).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ServerOptions options;
  options.scheduler.max_running_trials =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::string durability = "process";
  std::string capacity;
  CLI::App app("evoscaled: the evoscale server", "evoscaled");
  DefineFlags(app, options, durability, capacity);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ExtrasError&) {
    // evoscaled takes no arguments, only flags: name the first thing it did not know.
    const std::string first = app.remaining().front();
    return Fail((first[0] == '-' ? "unknown flag " : "unexpected argument ") + first +
                " (see evoscaled --help)");
  } catch (const CLI::ParseError& error) {
    return Fail(std::string(error.what()) + " (see evoscaled --help)");
  }
  options.durability = durability == "power" ? Durability::kPowerLoss : Durability::kProcessCrash;
  if (absl::Status st = evoscale::service::ParseCapacity(capacity, &options.scheduler); !st.ok()) {
    return Fail(std::string(st.message()) + " (see evoscaled --help)");
  }

  // Block the shutdown signals before any thread starts, and wait for them on one thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = evoscale::service::Server::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  // One structured line that scripts and tests read to find the ports. A database path that
  // is not UTF-8 is shown with U+FFFD in place of its bad bytes, so the line is always JSON.
  nlohmann::ordered_json listening = {
      {"event", "listening"},
      {"grpc", WithPort(options.grpc_address, (*server)->grpc_port())},
      {"http", WithPort(options.http_address, (*server)->http_port())},
      {"db", options.db_path}};
  if (!options.katib_grpc_address.empty()) {
    listening["katib"] = WithPort(options.katib_grpc_address, (*server)->katib_grpc_port());
  }
  std::cout << listening.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                              nlohmann::json::error_handler_t::replace)
            << std::endl;

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  server->reset();
  std::cout << nlohmann::json{{"event", "stopped"}}.dump() << std::endl;
  return 0;
}
