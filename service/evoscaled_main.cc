// evoscaled: the evoscale server. Flags are parsed here; everything else lives in server.cc.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service/server.h"

namespace {

constexpr char kUsage[] =
    "usage: evoscaled [--db PATH] [--grpc HOST:PORT] [--http HOST:PORT]\n"
    "                 [--auth-tokens FILE] [--durability process|power]\n"
    "                 [--max-running-trials N] [--gpus N]\n"
    "  --db           SQLite database file (default evoscale.db)\n"
    "  --grpc         gRPC address (default 127.0.0.1:50051; port 0 picks a free port)\n"
    "  --http         HTTP address for /healthz, /metrics, /api/v1 (default 127.0.0.1:8080)\n"
    "  --auth-tokens  file of \"TOKEN ROLE\" lines (admin|writer|reader); required to listen\n"
    "                 on a non-loopback address\n"
    "  --durability   process (default): an acknowledged write survives the process being\n"
    "                 killed; power: it also survives power loss (fsync on every commit)\n"
    "  --max-running-trials N  trials of managed studies (a trial template with a command)\n"
    "                 run at once as local processes (default: the number of CPUs; 0: none)\n"
    "  --gpus N       GPUs lent to managed trials, ids 0..N-1 (default 0)\n";

int Fail(const std::string& msg) {
  std::cerr << "evoscaled: " << msg << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds absl with the mutex deadlock detector on; it costs ~2% of the hot path and
  // our lock order is fixed (study -> store, service -> watcher -> core).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  evoscale::service::ServerOptions options;
  options.scheduler.max_running_trials =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Fail(absl::StrCat(arg, ": missing value\n", kUsage));
    }
    if (arg == "--db") {
      options.db_path = value;
    } else if (arg == "--grpc") {
      options.grpc_address = value;
    } else if (arg == "--http") {
      options.http_address = value;
    } else if (arg == "--auth-tokens") {
      options.auth_tokens_path = value;
    } else if (arg == "--durability") {
      if (value == "process") {
        options.durability = evoscale::service::Durability::kProcessCrash;
      } else if (value == "power") {
        options.durability = evoscale::service::Durability::kPowerLoss;
      } else {
        return Fail(absl::StrCat("--durability \"", value, "\": want process or power"));
      }
    } else if (arg == "--max-running-trials" || arg == "--gpus") {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 0 || n > 100000) {
        return Fail(absl::StrCat(arg, " \"", value, "\": want an integer >= 0"));
      }
      (arg == "--gpus" ? options.scheduler.gpus : options.scheduler.max_running_trials) = n;
    } else {
      return Fail(absl::StrCat("unknown flag \"", arg, "\"\n", kUsage));
    }
  }

  // Block the shutdown signals before any thread starts, and wait for them on one thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = evoscale::service::Server::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  const std::string host = options.grpc_address.substr(0, options.grpc_address.rfind(':'));
  const std::string http_host = options.http_address.substr(0, options.http_address.rfind(':'));
  // One structured line that scripts and tests read to find the ports.
  std::printf("{\"event\":\"listening\",\"grpc\":\"%s:%d\",\"http\":\"%s:%d\",\"db\":\"%s\"}\n",
              host.c_str(), (*server)->grpc_port(), http_host.c_str(), (*server)->http_port(),
              options.db_path.c_str());
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  server->reset();
  std::printf("{\"event\":\"stopped\"}\n");
  return 0;
}
