#include "service/server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/common/paths.h"

namespace evoscale::service {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server);
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
  builder.AddListeningPort(options.grpc_address, grpc::InsecureServerCredentials(), &s->grpc_port_);
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
                        s->metrics_.get(), s->auth_.get(), options.http_threads);
  if (!http.ok()) {
    s->grpc_->Shutdown();
    return http.status();
  }
  s->http_ = *std::move(http);
  s->http_port_ = s->http_->port();
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
  s->scheduler_ = std::make_unique<Scheduler>(s->core_.get(), std::move(scheduler));
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
}

}  // namespace evoscale::service
