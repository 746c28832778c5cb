#include "service/server.h"

#include <algorithm>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/common/log.h"
#include "service/common/paths.h"
#include "service/internal/tls.h"

namespace evoscale::service {
namespace {

// The largest GetSuggestionsRequest the Katib server takes: about 100,000 trials.
constexpr int kKatibMaxMessageBytes = 64 << 20;

// Beyond loopback, tokens travel over the network: they need TLS around them (or the operator's
// word that something else encrypts it, which is logged).
absl::Status CheckExposure(const ServerOptions& options, bool tls) {
  for (const auto& [flag, address] :
       {std::pair{"--grpc", &options.grpc_address}, std::pair{"--http", &options.http_address}}) {
    if (IsLoopbackAddress(*address) || options.auth_tokens_path.empty() || tls) continue;
    if (!options.insecure_plaintext) {
      return absl::FailedPreconditionError(absl::StrCat(
          flag, " \"", *address,
          "\" is not a loopback address and there is no TLS: tokens and studies would cross the "
          "network in the clear; give --tls-cert and --tls-key (or --insecure-plaintext, if "
          "something else encrypts the network)"));
    }
    LogEvent("warning", {{"message", absl::StrCat("INSECURE: ", flag, " ", *address,
                                                  " serves tokens and data in plaintext "
                                                  "(--insecure-plaintext)")}});
  }
  return absl::OkStatus();
}

// The token file's roles; without one, evoscaled serves only this machine.
absl::StatusOr<std::unique_ptr<TokenAuth>> LoadAuth(const ServerOptions& options) {
  if (!options.auth_tokens_path.empty()) return TokenAuth::FromFile(options.auth_tokens_path);
  for (const auto& [flag, address] :
       {std::pair{"--grpc", &options.grpc_address}, std::pair{"--http", &options.http_address}}) {
    if (!IsLoopbackAddress(*address)) {
      return absl::FailedPreconditionError(absl::StrCat(
          flag, " \"", *address,
          "\" is not a loopback address: without --auth-tokens evoscaled serves only this "
          "machine; give --auth-tokens FILE to listen on other addresses"));
    }
  }
  return std::make_unique<TokenAuth>();
}

// "127.0.0.1:0" -> "127.0.0.1", "[::1]:0" -> "[::1]"; a wildcard host is this machine's
// loopback (other replicas on this machine reach it there; elsewhere, give --advertise).
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "[::]") return "[::1]";
  return host;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server);
  absl::StatusOr<TlsConfig> tls = LoadServerTls(options.tls_cert_path, options.tls_key_path,
                                                options.tls_client_ca_path);
  if (!tls.ok()) return tls.status();
  if (absl::Status st = CheckExposure(options, tls->enabled()); !st.ok()) return st;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> peer =
      PeerChannelCredentials(*tls, options.tls_peer_ca_path);
  if (!peer.ok()) return peer.status();
  absl::StatusOr<std::unique_ptr<TokenAuth>> auth = LoadAuth(options);
  if (!auth.ok()) return auth.status();
  s->auth_ = *std::move(auth);
  if (absl::Status st = s->OpenCores(options); !st.ok()) return st;
  s->metrics_ = std::make_unique<ServiceMetrics>();
  s->autoscaler_service_ = std::make_unique<AutoscalerServiceImpl>(
      s->autoscaler_.get(), s->auth_.get(), s->metrics_.get());
  // Calls on a study another replica owns are forwarded there: plaintext, or TLS with
  // --tls-peer-ca; with TLS and no peer CA they are answered UNAVAILABLE naming the owner's
  // address (the client goes there itself).
  if (s->leases_ != nullptr && *peer != nullptr) {
    s->forwarder_ = std::make_unique<internal::StudyForwarder>(*std::move(peer));
  }
  s->service_ = std::make_unique<StudyServiceImpl>(
      s->core_.get(), s->auth_.get(), s->metrics_.get(), s->forwarder_.get(),
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options.lease)));
  s->admin_service_ = std::make_unique<AdminServiceImpl>(
      options.db_path, s->telemetry_path_, s->auth_.get(), s->metrics_.get());
  absl::Status st = s->StartListeners(options, *tls);
  if (st.ok()) st = s->StartScheduler(options);
  if (!st.ok()) {
    if (s->grpc_) s->grpc_->Shutdown();
    s->http_.reset();
    return st;
  }
  return s;
}

absl::Status Server::OpenCores(const ServerOptions& options) {
  Clock* clock = options.clock ? options.clock : Clock::Real();
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(options.db_path, options.durability, options.accept_damaged_wal);
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  absl::StatusOr<std::unique_ptr<StudyCore>> core;
  if (Store::IsPostgres(options.db_path)) {
    // Any number of replicas may share the database: each study is served by the one holding
    // its lease.
    absl::StatusOr<std::unique_ptr<StudyLeases>> leases = StudyLeases::Open(
        options.db_path, LeaseOptions{.address = options.advertise_address, .lease = options.lease});
    if (!leases.ok()) return leases.status();
    leases_ = *std::move(leases);
    core = StudyCore::CreateWithLeases(store_.get(), clock, leases_.get());
  } else {
    core = StudyCore::Create(store_.get(), clock);
  }
  if (!core.ok()) return core.status();
  core_ = *std::move(core);
  // Telemetry goes where the studies are: the same PostgreSQL database (shared by the
  // replicas), or an SQLite file beside the study file; --telemetry-db names another.
  telemetry_path_ = !options.telemetry_db_path.empty()  ? options.telemetry_db_path
                    : Store::IsPostgres(options.db_path) ? options.db_path
                                                         : TelemetryPathFor(options.db_path);
  absl::StatusOr<std::unique_ptr<TelemetryStore>> telemetry =
      TelemetryStore::Open(telemetry_path_, options.durability, options.accept_damaged_wal);
  if (!telemetry.ok()) return telemetry.status();
  telemetry_ = *std::move(telemetry);
  absl::StatusOr<std::unique_ptr<AutoscalerCore>> autoscaler =
      AutoscalerCore::Create(telemetry_.get(), clock);
  if (!autoscaler.ok()) return autoscaler.status();
  autoscaler_ = *std::move(autoscaler);
  return absl::OkStatus();
}

absl::Status Server::StartListeners(const ServerOptions& options, const TlsConfig& tls) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind the same port and take
  // half of the connections: bind exclusively, so a port in use fails to start instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.grpc_address, GrpcServerCredentials(tls), &grpc_port_);
  builder.RegisterService(service_.get());
  builder.RegisterService(autoscaler_service_.get());
  builder.RegisterService(admin_service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  grpc_ = builder.BuildAndStart();
  if (grpc_ == nullptr || grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--grpc \"", options.grpc_address,
                                               "\": cannot listen (in use or bad address)"));
  }
  grpc_->GetHealthCheckService()->SetServingStatus("evoscale.v1.StudyService", true);
  if (leases_ != nullptr && options.advertise_address.empty()) {
    const std::string address = absl::StrCat(HostOf(options.grpc_address), ":", grpc_port_);
    if (absl::Status st = leases_->SetAddress(address); !st.ok()) return st;
  }
  grpc_->GetHealthCheckService()->SetServingStatus("evoscale.v1.AutoscalerService", true);
  health_ = std::thread(&Server::WatchStoreHealth, this);
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      HttpServer::Start(options.http_address, core_.get(), autoscaler_.get(), metrics_.get(),
                        auth_.get(), options.http_threads, tls);
  if (!http.ok()) return http.status();
  http_ = *std::move(http);
  http_port_ = http_->port();
  if (!options.katib_grpc_address.empty()) return StartKatib(options);
  return absl::OkStatus();
}

absl::Status Server::StartScheduler(const ServerOptions& options) {
  SchedulerOptions scheduler = options.scheduler;
  // Checkpoints of managed trials live beside the database ("x.db" -> "x.db.checkpoints/"),
  // or beside the telemetry file when the studies are in PostgreSQL; when both are, in the
  // scheduler's temporary folder.
  const std::string& local_file =
      Store::IsPostgres(options.db_path) ? telemetry_path_ : options.db_path;
  if (scheduler.checkpoint_root.empty() && options.db_path != ":memory:" &&
      !Store::IsPostgres(local_file)) {
    scheduler.checkpoint_root = local_file + ".checkpoints";
  }
  // Managed trials' usage, once a second each, goes to the telemetry store as a TRAINING
  // workload named after the study (made on its first sample), one instance per trial; what
  // the store does not take is counted (evoscale_trial_usage_errors_total) and the first such
  // failure logged.
  scheduler.usage_sink = [autoscaler = autoscaler_.get()](const v1::TelemetrySample& sample) {
    absl::Status st = autoscaler->IngestTrialUsage(sample);
    if (!st.ok() && autoscaler->trial_usage_errors_total() == 1) {
      LogEvent("scheduler", {{"what", "trial usage not recorded"},
                             {"trial", sample.instance()},
                             {"detail", std::string(st.message())}});
    }
  };
  if (scheduler.clock == nullptr) scheduler.clock = options.clock;
  absl::StatusOr<std::unique_ptr<Scheduler>> made =
      Scheduler::Create(core_.get(), std::move(scheduler));
  if (!made.ok()) return made.status();
  scheduler_ = *std::move(made);
  metrics_->SetTrialEnforcement(scheduler_->enforcement());
  metrics_->AttachScheduler(scheduler_.get());
  return absl::OkStatus();
}

void Server::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (metrics_) metrics_->AttachScheduler(nullptr);
  scheduler_.reset();  // stops managed trials; they stay ACTIVE and run again after a restart
  if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (katib_grpc_) {
    katib_grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  http_.reset();
  if (autoscaler_service_) autoscaler_service_->Shutdown();
}

void Server::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&shut_down_));
}

void Server::WatchStoreHealth() {
  bool serving = true;
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&shut_down_), absl::Milliseconds(500))) {
    mu_.Unlock();
    const absl::Status st = store_->Health();
    if (st.ok() != serving) {
      serving = st.ok();
      // The study service and the server as a whole ("") follow the study store.
      for (const char* service : {"", "evoscale.v1.StudyService"}) {
        grpc_->GetHealthCheckService()->SetServingStatus(service, serving);
      }
      LogEvent("store",
               {{"what", serving ? "database answers again" : "database lost"},
                {"message", serving ? std::string("serving") : std::string(st.message())}});
    }
    mu_.Lock();
  }
}

Server::~Server() {
  Shutdown();
  if (health_.joinable()) health_.join();
  if (grpc_) grpc_->Wait();
  if (katib_grpc_) katib_grpc_->Wait();
}

absl::Status Server::StartKatib(const ServerOptions& options) {
  const std::string& address = options.katib_grpc_address;
  if (!IsLoopbackAddress(address)) {
    // Katib's controller dials plaintext and sends no token: say so where operators look.
    LogEvent("warning",
             {{"message", absl::StrCat("--katib-grpc \"", address,
                                       "\" is not a loopback address: Katib's Suggestion API "
                                       "answers there without tokens or TLS (it reaches only "
                                       "katib/ studies)")}});
  }
  katib_ = std::make_unique<KatibSuggestion>(core_.get());
  katib_service_ = std::make_unique<KatibSuggestionServiceImpl>(katib_.get(), metrics_.get());
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &katib_grpc_port_);
  builder.RegisterService(katib_service_.get());
  // Katib sends every trial of the experiment on every call: allow long experiments.
  builder.SetMaxReceiveMessageSize(std::max(options.max_message_bytes, kKatibMaxMessageBytes));
  katib_grpc_ = builder.BuildAndStart();  // with the default health service (enabled above)
  if (katib_grpc_ == nullptr || katib_grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--katib-grpc \"", address, "\": cannot listen (in use or bad address)"));
  }
  // Katib's suggestion Deployment probes "manager.v1beta1.Suggestion" (its
  // consts.DefaultGRPCService); the service's own name answers too.
  for (const char* service : {"api.v1.beta1.Suggestion", "manager.v1beta1.Suggestion"}) {
    katib_grpc_->GetHealthCheckService()->SetServingStatus(service, true);
  }
  return absl::OkStatus();
}

}  // namespace evoscale::service
