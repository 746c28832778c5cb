#include "service/server.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "openssl/pem.h"
#include "openssl/x509.h"
#include "nlohmann/json.hpp"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/common/paths.h"
#include "service/common/pem.h"

namespace evoscale::service {
namespace {

// The largest GetSuggestionsRequest the Katib server takes: about 100,000 trials.
constexpr int kKatibMaxMessageBytes = 64 << 20;

// Reads the PEM files of --tls-cert, --tls-key and --tls-client-ca; errors name the flag.
absl::StatusOr<TlsConfig> LoadTls(const ServerOptions& options) {
  TlsConfig tls;
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both");
  }
  if (!options.tls_client_ca_path.empty() && options.tls_cert_path.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key");
  }
  for (const auto& [flag, path, pem] :
       {std::tuple{"--tls-cert", &options.tls_cert_path, &tls.cert_pem},
        std::tuple{"--tls-key", &options.tls_key_path, &tls.key_pem},
        std::tuple{"--tls-client-ca", &options.tls_client_ca_path, &tls.client_ca_pem}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> text = ReadPemFile(flag, *path);
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  if (tls.enabled()) {
    // Checked here, so that a wrong key names its flag (gRPC would only fail to listen).
    std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
        BIO_new_mem_buf(tls.cert_pem.data(), static_cast<int>(tls.cert_pem.size())), BIO_free);
    std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(
        BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size())), BIO_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(
        PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), X509_free);
    if (cert == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-cert \"", options.tls_cert_path, "\": no readable certificate"));
    }
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
        PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
    if (key == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-key \"", options.tls_key_path, "\": no readable private key (unencrypted PEM)"));
    }
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--tls-key \"", options.tls_key_path,
                                                     "\" is not the key of --tls-cert \"",
                                                     options.tls_cert_path, "\""));
    }
  }
  return tls;
}

std::shared_ptr<grpc::ServerCredentials> GrpcCredentials(const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls.client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server);
  absl::StatusOr<TlsConfig> tls = LoadTls(options);
  if (!tls.ok()) return tls.status();
  // Beyond loopback, tokens travel over the network: they need TLS around them.
  for (const auto& [flag, address] :
       {std::pair{"--grpc", &options.grpc_address}, std::pair{"--http", &options.http_address}}) {
    if (IsLoopbackAddress(*address) || options.auth_tokens_path.empty() || tls->enabled()) {
      continue;
    }
    if (!options.insecure_plaintext) {
      return absl::FailedPreconditionError(absl::StrCat(
          flag, " \"", *address,
          "\" is not a loopback address and there is no TLS: tokens and studies would cross the "
          "network in the clear; give --tls-cert and --tls-key (or --insecure-plaintext, if "
          "something else encrypts the network)"));
    }
    std::cerr << nlohmann::json{{"event", "warning"},
                                {"message", absl::StrCat("INSECURE: ", flag, " ", *address,
                                                         " serves tokens and data in plaintext "
                                                         "(--insecure-plaintext)")}}
                     .dump()
              << std::endl;
  }
  if (options.auth_tokens_path.empty()) {
    s->auth_ = std::make_unique<TokenAuth>();
    for (const auto& [flag, address] :
         {std::pair{"--grpc", &options.grpc_address}, std::pair{"--http", &options.http_address}}) {
      if (!IsLoopbackAddress(*address)) {
        return absl::FailedPreconditionError(absl::StrCat(
            flag, " \"", *address,
            "\" is not a loopback address: without --auth-tokens evoscaled serves only this "
            "machine; give --auth-tokens FILE to listen on other addresses"));
      }
    }
  } else {
    absl::StatusOr<std::unique_ptr<TokenAuth>> auth = TokenAuth::FromFile(options.auth_tokens_path);
    if (!auth.ok()) return auth.status();
    s->auth_ = *std::move(auth);
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(options.db_path, options.durability, options.accept_damaged_wal);
  if (!store.ok()) return store.status();
  s->store_ = *std::move(store);
  absl::StatusOr<std::unique_ptr<StudyCore>> core =
      StudyCore::Create(s->store_.get(), options.clock ? options.clock : Clock::Real());
  if (!core.ok()) return core.status();
  s->core_ = *std::move(core);
  const std::string telemetry_path = options.telemetry_db_path.empty()
                                         ? TelemetryPathFor(options.db_path)
                                         : options.telemetry_db_path;
  absl::StatusOr<std::unique_ptr<TelemetryStore>> telemetry =
      TelemetryStore::Open(telemetry_path, options.durability, options.accept_damaged_wal);
  if (!telemetry.ok()) return telemetry.status();
  s->telemetry_ = *std::move(telemetry);
  absl::StatusOr<std::unique_ptr<AutoscalerCore>> autoscaler =
      AutoscalerCore::Create(s->telemetry_.get(), options.clock ? options.clock : Clock::Real());
  if (!autoscaler.ok()) return autoscaler.status();
  s->autoscaler_ = *std::move(autoscaler);
  s->metrics_ = std::make_unique<ServiceMetrics>();
  s->autoscaler_service_ = std::make_unique<AutoscalerServiceImpl>(
      s->autoscaler_.get(), s->auth_.get(), s->metrics_.get());
  s->service_ =
      std::make_unique<StudyServiceImpl>(s->core_.get(), s->auth_.get(), s->metrics_.get());
  s->admin_service_ = std::make_unique<AdminServiceImpl>(options.db_path, telemetry_path,
                                                         s->auth_.get(), s->metrics_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind the same port and take
  // half of the connections: bind exclusively, so a port in use fails to start instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.grpc_address, GrpcCredentials(*tls), &s->grpc_port_);
  builder.RegisterService(s->service_.get());
  builder.RegisterService(s->autoscaler_service_.get());
  builder.RegisterService(s->admin_service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  s->grpc_ = builder.BuildAndStart();
  if (s->grpc_ == nullptr || s->grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--grpc \"", options.grpc_address,
                                               "\": cannot listen (in use or bad address)"));
  }
  s->grpc_->GetHealthCheckService()->SetServingStatus("evoscale.v1.StudyService", true);
  s->grpc_->GetHealthCheckService()->SetServingStatus("evoscale.v1.AutoscalerService", true);

  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      HttpServer::Start(options.http_address, s->core_.get(), s->autoscaler_.get(),
                        s->metrics_.get(), s->auth_.get(), options.http_threads, *tls);
  if (!http.ok()) {
    s->grpc_->Shutdown();
    return http.status();
  }
  s->http_ = *std::move(http);
  s->http_port_ = s->http_->port();
  if (!options.katib_grpc_address.empty()) {
    if (absl::Status st = s->StartKatib(options); !st.ok()) {
      s->grpc_->Shutdown();
      s->http_.reset();
      return st;
    }
  }
  SchedulerOptions scheduler = options.scheduler;
  // Checkpoints of managed trials live beside the database ("x.db" -> "x.db.checkpoints/").
  if (scheduler.checkpoint_root.empty() && options.db_path != ":memory:") {
    scheduler.checkpoint_root = options.db_path + ".checkpoints";
  }
  // Managed trials' usage, once a second each, goes to the telemetry store as a TRAINING
  // workload named after the study (made on its first sample), one instance per trial.
  scheduler.usage_sink = [autoscaler = s->autoscaler_.get()](const v1::TelemetrySample& sample) {
    v1::GetWorkloadRequest get;
    get.set_name(sample.workload());
    if (absl::IsNotFound(autoscaler->GetWorkload(get).status())) {
      v1::PutWorkloadRequest put;
      put.mutable_workload()->set_name(sample.workload());
      put.mutable_workload()->set_kind(v1::Workload::TRAINING);
      autoscaler->PutWorkload(put).IgnoreError();
    }
    v1::TelemetryBatch batch;
    *batch.add_samples() = sample;
    v1::ReportTelemetryResponse ignored;
    autoscaler->Ingest(batch, &ignored).IgnoreError();
  };
  if (scheduler.clock == nullptr) scheduler.clock = options.clock;
  absl::StatusOr<std::unique_ptr<Scheduler>> made =
      Scheduler::Create(s->core_.get(), std::move(scheduler));
  if (!made.ok()) {
    s->grpc_->Shutdown();
    s->http_.reset();
    return made.status();
  }
  s->scheduler_ = *std::move(made);
  s->metrics_->SetTrialEnforcement(s->scheduler_->enforcement());
  s->metrics_->AttachScheduler(s->scheduler_.get());
  return s;
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

Server::~Server() {
  Shutdown();
  if (grpc_) grpc_->Wait();
  if (katib_grpc_) katib_grpc_->Wait();
}

absl::Status Server::StartKatib(const ServerOptions& options) {
  const std::string& address = options.katib_grpc_address;
  if (!IsLoopbackAddress(address)) {
    // Katib's controller dials plaintext and sends no token: say so where operators look.
    std::fprintf(stderr,
                 "evoscaled: --katib-grpc \"%s\" is not a loopback address: Katib's Suggestion "
                 "API answers there without tokens or TLS (it reaches only katib/ studies)\n",
                 address.c_str());
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
