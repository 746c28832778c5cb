// The service's Prometheus metrics: RPCs by method and code, latency histograms, and studies
// and trials by state (refreshed at scrape time).
#ifndef EVOSCALE_SERVICE_METRICS_H_
#define EVOSCALE_SERVICE_METRICS_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace evoscale::service {

class StudyCore;
class AutoscalerCore;
class Scheduler;

// Thread-safe.
class ServiceMetrics {
 public:
  ServiceMetrics();

  // Counts one finished RPC and its latency. `code` is the gRPC code name ("OK", ...).
  void RecordRpc(const std::string& method, const std::string& code, double seconds);

  // Refreshes the state gauges from `core` and the recommendation gauges from `autoscaler`,
  // and renders every metric in Prometheus' text format. Either may be null.
  //   evoscale_recommendation{workload,resource,bound}  resource: cpu_cores, memory_bytes,
  //       gpu_memory_bytes; bound: target, lower_bound, upper_bound
  //   evoscale_recommended_replicas{workload}
  //   evoscale_telemetry_samples_total{result}  result: accepted or the rejection reason
  //   evoscale_store_operations_total{op}  op: write, commit (writes / commits = group commit)
  //   evoscale_sqlite_memory_bytes          SQLite's heap (page caches, statements)
  std::string Scrape(StudyCore* core, AutoscalerCore* autoscaler = nullptr);

  // evoscale_trial_enforcement{mode} 1: how managed trials are contained (set once).
  void SetTrialEnforcement(const std::string& mode);
  // From now on Scrape also renders the scheduler's gauges (nullptr: no more; call it so before
  // the scheduler goes away):
  //   evoscale_capacity{resource}            cpu_cores, memory_bytes, gpus (--capacity)
  //   evoscale_capacity_requested{resource}  the running managed trials' requests, summed
  //   evoscale_studies_waiting               managed studies waiting for capacity
  void AttachScheduler(Scheduler* scheduler);

  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Family<prometheus::Gauge>& studies_;
  prometheus::Family<prometheus::Gauge>& recommendation_;
  prometheus::Family<prometheus::Gauge>& replicas_;
  prometheus::Family<prometheus::Gauge>& samples_;
  prometheus::Family<prometheus::Gauge>& store_;
  prometheus::Family<prometheus::Gauge>& enforcement_;
  prometheus::Family<prometheus::Gauge>& capacity_;
  prometheus::Family<prometheus::Gauge>& capacity_requested_;
  prometheus::Family<prometheus::Gauge>& studies_waiting_;
  prometheus::Gauge& sqlite_memory_;

  absl::Mutex scheduler_mu_;
  Scheduler* scheduler_ ABSL_GUARDED_BY(scheduler_mu_) = nullptr;
  absl::Mutex mu_;
  // Label lookups are cached: prometheus-cpp's Add() hashes the label map each time.
  absl::flat_hash_map<std::string, prometheus::Histogram*> latency_by_method_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Counter*> rpcs_by_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_METRICS_H_
