#include "serve/telemetry_reporter.h"

#include <sys/resource.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "service/common/log.h"
#include "trainer/metrics.h"

namespace evoscale::serve {
namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void Authorize(grpc::ClientContext& ctx, const std::string& token) {
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace

TelemetryReporter::TelemetryReporter(ReporterOptions options, ServeMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics), thread_([this] { Run(); }) {}

TelemetryReporter::~TelemetryReporter() {
  stop_.Notify();
  thread_.join();
}

v1::TelemetrySample TelemetryReporter::Measure() {
  const double cpu_now = CpuSeconds();
  const auto wall_now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(wall_now - wall_).count();
  const ServeMetrics::Period period = metrics_->TakePeriod();
  v1::TelemetrySample sample;
  sample.set_workload(options_.workload);
  sample.set_instance(options_.instance);
  *sample.mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
  sample.set_cpu_cores(seconds > 0 ? (cpu_now - cpu_seconds_) / seconds : 0);
  sample.set_memory_bytes(double(trainer::CurrentRssBytes()));
  sample.set_qps(seconds > 0 ? double(period.calls) / seconds : 0);
  sample.set_latency_seconds(period.calls > 0 ? period.seconds / double(period.calls) : 0);
  sample.set_cpu_request_cores(options_.cpu_request_cores);
  if (options_.versions) {
    for (const auto& [name, version] : options_.versions()) {
      (*sample.mutable_versions())[name] = version;
    }
  }
  cpu_seconds_ = cpu_now;
  wall_ = wall_now;
  return sample;
}

void TelemetryReporter::Run() {
  auto channel = grpc::CreateChannel(options_.evoscaled, grpc::InsecureChannelCredentials());
  auto stub = v1::AutoscalerService::NewStub(channel);
  bool known = false;  // the workload exists in evoscaled
  std::string failing;  // the failure logged last ("" while reports succeed)
  auto fail = [&](const std::string& what) {
    if (what != failing) {
      service::LogEvent("warning", {{"what", "telemetry report failed"},
                                    {"evoscaled", options_.evoscaled},
                                    {"workload", options_.workload},
                                    {"error", what}});
    }
    failing = what;
  };
  cpu_seconds_ = CpuSeconds();
  wall_ = std::chrono::steady_clock::now();
  metrics_->TakePeriod();
  while (!stop_.WaitForNotificationWithTimeout(absl::FromChrono(options_.period))) {
    const v1::TelemetrySample sample = Measure();
    if (!known) {
      grpc::ClientContext get;
      Authorize(get, options_.token);
      v1::GetWorkloadRequest request;
      request.set_name(options_.workload);
      v1::Workload workload;
      grpc::Status st = stub->GetWorkload(&get, request, &workload);
      if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
        grpc::ClientContext put;
        Authorize(put, options_.token);
        v1::PutWorkloadRequest create;
        create.mutable_workload()->set_name(options_.workload);
        create.mutable_workload()->set_kind(v1::Workload::SERVING);
        st = stub->PutWorkload(&put, create, &workload);
      }
      if (!st.ok()) {
        fail(absl::StrCat("workload ", options_.workload, ": ", st.error_message()));
        continue;
      }
      known = true;
    }
    grpc::ClientContext ctx;
    Authorize(ctx, options_.token);
    v1::ReportTelemetryResponse response;
    auto writer = stub->ReportTelemetry(&ctx, &response);
    v1::TelemetryBatch batch;
    *batch.add_samples() = sample;
    writer->Write(batch);
    writer->WritesDone();
    const grpc::Status st = writer->Finish();
    if (!st.ok()) {
      fail(st.error_message());
    } else if (response.rejected() > 0) {
      fail(response.errors_size() > 0 ? response.errors(0) : "sample rejected");
      // A workload deleted meanwhile is created again at the next report.
      if (response.rejected_by_reason().contains("unknown_workload")) known = false;
    } else {
      accepted_.fetch_add(response.accepted());
      if (!failing.empty()) {
        service::LogEvent("telemetry", {{"what", "reports recovered"},
                                        {"evoscaled", options_.evoscaled}});
      }
      failing.clear();
    }
  }
}

}  // namespace evoscale::serve
