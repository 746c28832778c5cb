// evoscale-serve --evoscaled ADDR --workload NS/NAME: every period, one telemetry sample of this
// replica (CPU cores used, resident memory, Predict calls per second and their mean latency, and
// the sparse and dense versions it serves) to
// evoscaled's AutoscalerService.ReportTelemetry, so that the autoscaler sizes the serving fleet
// from what it serves. The workload is created (kind SERVING) when evoscaled does not know it.
// A report that fails is logged once until one succeeds again; serving never waits for it.
#ifndef EVOSCALE_SERVE_TELEMETRY_REPORTER_H_
#define EVOSCALE_SERVE_TELEMETRY_REPORTER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "serve/serve_metrics.h"

namespace evoscale::serve {

struct ReporterOptions {
  std::string evoscaled;  // HOST:PORT of evoscaled's gRPC
  std::string workload;   // namespace/name as evoscaled names workloads
  std::string instance;   // this replica (default: host:port of its gRPC)
  std::string token;      // a bearer token when evoscaled has --auth-tokens ("" = none)
  std::chrono::milliseconds period{5000};
  double cpu_request_cores = 0;  // TelemetrySample.cpu_request_cores (0: not sent)
  // What the replica serves now, by name ("sparse", "dense"): TelemetrySample.versions.
  std::function<std::map<std::string, int64_t>()> versions;
};

class TelemetryReporter {
 public:
  // Starts reporting on its own thread; metrics must outlive it.
  TelemetryReporter(ReporterOptions options, ServeMetrics* metrics);
  ~TelemetryReporter();  // stops and joins

  // Reports accepted by evoscaled so far.
  int64_t accepted() const { return accepted_.load(); }

 private:
  void Run();
  // This replica's sample for the period since the last one.
  v1::TelemetrySample Measure();

  const ReporterOptions options_;
  ServeMetrics* const metrics_;
  std::atomic<int64_t> accepted_{0};
  double cpu_seconds_ = 0;  // at the last sample (the reporter's thread only)
  std::chrono::steady_clock::time_point wall_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_TELEMETRY_REPORTER_H_
