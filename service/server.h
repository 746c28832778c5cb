// evoscaled assembled: the store, the study core, the gRPC server (StudyService, health,
// reflection), the HTTP server and, when asked, Katib's Suggestion API on a gRPC server of its
// own. Used by evoscaled's main() and by in-process tests.
#ifndef EVOSCALE_SERVICE_SERVER_H_
#define EVOSCALE_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "service/admin_service.h"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/autoscaler_service.h"
#include "service/common/clock.h"
#include "service/http_server.h"
#include "service/katib/katib_suggestion.h"
#include "service/katib_service.h"
#include "service/metrics.h"
#include "service/scheduler/scheduler.h"
#include "service/store/store.h"
#include "service/store/telemetry_store.h"
#include "service/study/study_core.h"
#include "service/study_service.h"

namespace evoscale::service {

struct ServerOptions {
  std::string db_path = "evoscale.db";
  std::string grpc_address = "127.0.0.1:50051";
  std::string http_address = "127.0.0.1:8080";
  // Telemetry's database (an SQLite file or a PostgreSQL URI). Empty: an SQLite file beside
  // db_path ("x.db" -> "x.telemetry.db"), or db_path itself when that is PostgreSQL.
  std::string telemetry_db_path;
  std::string auth_tokens_path;  // empty: no auth, loopback addresses only
  // TLS on the gRPC and HTTP listeners (PEM files): the certificate and its key, and for
  // mutual TLS the CA clients' certificates must chain to. Beyond loopback evoscaled needs
  // tokens and TLS, unless insecure_plaintext (it then says so on stderr).
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_client_ca_path;
  // Several replicas with TLS: the CA of the other replicas' certificates, to forward calls
  // to them over TLS (empty: with TLS, calls on their studies answer UNAVAILABLE naming them).
  std::string tls_peer_ca_path;
  bool insecure_plaintext = false;
  // Katib's Suggestion API (api.v1.beta1.Suggestion) and gRPC health, on a gRPC server of its
  // own; empty: off. Katib dials it in plaintext and sends no token, so it takes none.
  std::string katib_grpc_address;
  Durability durability = Durability::kProcessCrash;
  // PostgreSQL: the gRPC address the other replicas forward this one's studies to (empty:
  // --grpc's, with the port it got), and how long a hung replica keeps its studies.
  std::string advertise_address;
  absl::Duration lease = absl::Seconds(5);
  // Open a database whose WAL is damaged as of its last commit before the damage, dropping the
  // commits after it (otherwise evoscaled refuses to start; see internal::OpenDatabase).
  bool accept_damaged_wal = false;
  int http_threads = 2;
  int max_message_bytes = 4 << 20;
  Clock* clock = nullptr;  // null: the real clock
  // Managed studies (a trial template with a command): how many of their trials run at once
  // as local processes (0: none; such studies then wait), and the rest of the scheduler's
  // settings.
  SchedulerOptions scheduler;
};

class Server {
 public:
  // Opens the database, loads every study and starts serving. Fails (and serves nothing) on a
  // bad option, an unreadable database or a port in use.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();  // Shutdown()

  // Stops the gRPC server first (finishing calls in flight), then HTTP. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() is called from another thread.
  void Wait();

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  int katib_grpc_port() const { return katib_grpc_port_; }  // 0 when --katib-grpc is off
  StudyCore* core() { return core_.get(); }
  AutoscalerCore* autoscaler() { return autoscaler_.get(); }
  Scheduler* scheduler() { return scheduler_.get(); }

 private:
  Server() = default;
  // The stores and the cores over them (study, autoscaler).
  absl::Status OpenCores(const ServerOptions& options);
  // The gRPC server, the HTTP server and, with --katib-grpc, Katib's.
  absl::Status StartListeners(const ServerOptions& options, const TlsConfig& tls);
  // Managed trials (after the listeners: its gauges are on /metrics).
  absl::Status StartScheduler(const ServerOptions& options);
  // Every 500 ms: the store's health as gRPC health (NOT_SERVING while the database is lost
  // or the store stopped), logged when it changes. Runs until Shutdown().
  void WatchStoreHealth();
  // Starts Katib's Suggestion API on options.katib_grpc_address (after the study core).
  absl::Status StartKatib(const ServerOptions& options);
  std::unique_ptr<TokenAuth> auth_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StudyCore> core_;
  // PostgreSQL: this replica's study leases (before core_ goes, they are let go) and the
  // forwarder of calls on studies other replicas own (null without TLS only).
  std::unique_ptr<StudyLeases> leases_;
  std::unique_ptr<internal::StudyForwarder> forwarder_;
  std::unique_ptr<Scheduler> scheduler_;  // after core_: destroyed (trials stopped) first
  std::unique_ptr<ServiceMetrics> metrics_;
  std::unique_ptr<StudyServiceImpl> service_;
  std::string telemetry_path_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<AutoscalerCore> autoscaler_;
  std::unique_ptr<AutoscalerServiceImpl> autoscaler_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<HttpServer> http_;
  // With --katib-grpc: the Katib Suggestion API and its server (stopped before core_ goes).
  std::unique_ptr<KatibSuggestion> katib_;
  std::unique_ptr<KatibSuggestionServiceImpl> katib_service_;
  std::unique_ptr<grpc::Server> katib_grpc_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  int katib_grpc_port_ = 0;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::thread health_;  // WatchStoreHealth; joined by the destructor
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_SERVER_H_
