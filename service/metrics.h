// The service's Prometheus metrics: RPCs by method and code, latency histograms, and studies
// and trials by state (refreshed at scrape time).
//
// Names follow Prometheus' conventions: the unit is in the name (_seconds, _bytes, _cores),
// _total is on counters only, and one name holds one resource. Workloads are labelled
// namespace="ns", workload="name" as Kubernetes names them (service/common/kubernetes_name.h),
// so they join with kube-state-metrics (e.g. its deployment label).
#ifndef EVOSCALE_SERVICE_METRICS_H_
#define EVOSCALE_SERVICE_METRICS_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.pb.h"
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
  //   evoscale_recommendation_cpu_cores{namespace,workload,container,bound}
  //   evoscale_recommendation_memory_bytes{namespace,workload,container,bound}
  //   evoscale_recommendation_gpu_memory_bytes{namespace,workload,container,bound}
  //       one series per container (no container label for samples that name none; sum by
  //       workload for the pod); bound: target (the request), lower_bound, upper_bound,
  //       limit. A container that drops out of the recommendation drops out of the gauges.
  //   evoscale_recommended_replicas{namespace,workload}
  //   evoscale_telemetry_samples_total{result}  counter; result: accepted or the rejection
  //       reason
  //   evoscale_telemetry_series             series (instance, container) held; those silent
  //       past the bucket retention are forgotten (AutoscalerCore::Compact)
  //   evoscale_leader                       1 while this replica runs the telemetry chores
  //       (compaction) for the replicas sharing its PostgreSQL database, else 0, as of its
  //       last ask (at start and before each compaction); 1 on SQLite
  //   evoscale_store_operations_total{op}  counter; op: write, commit (writes / commits =
  //       group commit)
  //   evoscale_sqlite_memory_bytes          SQLite's heap (page caches, statements)
  //   evoscale_store_checkpoint_failures_total{database}  counter; database: study,
  //       telemetry. A failed WAL checkpoint loses nothing, but the log grows until one
  //       succeeds (the log says "checkpoint failed" / "checkpoint recovered")
  // Scrapes are serialised.
  std::string Scrape(StudyCore* core, AutoscalerCore* autoscaler = nullptr);

  // evoscale_trial_enforcement{mode} 1: how managed trials are contained (set once).
  void SetTrialEnforcement(const std::string& mode);
  // From now on Scrape also renders the scheduler's gauges (nullptr: no more; call it so before
  // the scheduler goes away):
  //   evoscale_capacity_cpu_cores, evoscale_capacity_memory_bytes, evoscale_capacity_gpus
  //       what managed trials may request together (--capacity)
  //   evoscale_capacity_requested_cpu_cores, evoscale_capacity_requested_memory_bytes,
  //   evoscale_capacity_requested_gpus       the running managed trials' requests, summed
  //   evoscale_studies_waiting               managed studies waiting for capacity
  void AttachScheduler(Scheduler* scheduler);
  // The attached scheduler's capacity (--capacity), for the dashboard; nullopt when none.
  std::optional<v1::ResourceRequest> SchedulerCapacity();

  prometheus::Registry& registry() { return *registry_; }

 private:
  // The cpu_cores, memory_bytes and gpus gauges of one of the scheduler's figures (each
  // without labels, added once a scheduler is attached).
  struct ResourceGauges {
    prometheus::Family<prometheus::Gauge>& cpu_cores;
    prometheus::Family<prometheus::Gauge>& memory_bytes;
    prometheus::Family<prometheus::Gauge>& gpus;
  };
  ResourceGauges AddResourceGauges(const std::string& prefix, const std::string& help);
  void ScrapeRecommendations(AutoscalerCore& autoscaler) ABSL_EXCLUSIVE_LOCKS_REQUIRED(scrape_mu_);

  // Constant after construction (the families and gauges themselves are thread-safe).
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Family<prometheus::Gauge>& studies_;
  prometheus::Family<prometheus::Gauge>& recommendation_cpu_;
  prometheus::Family<prometheus::Gauge>& recommendation_memory_;
  prometheus::Family<prometheus::Gauge>& recommendation_gpu_memory_;
  prometheus::Family<prometheus::Gauge>& replicas_;
  prometheus::Family<prometheus::Counter>& samples_;
  prometheus::Counter& trial_usage_errors_;
  prometheus::Gauge& series_;
  prometheus::Gauge& leader_;
  prometheus::Family<prometheus::Counter>& store_;
  prometheus::Family<prometheus::Counter>& checkpoint_failures_;
  prometheus::Family<prometheus::Gauge>& enforcement_;
  const ResourceGauges capacity_;
  const ResourceGauges capacity_requested_;
  prometheus::Family<prometheus::Gauge>& studies_waiting_;
  prometheus::Gauge& sqlite_memory_;

  // Held for a whole Scrape: the counters are advanced to totals kept elsewhere.
  absl::Mutex scrape_mu_ ABSL_ACQUIRED_BEFORE(scheduler_mu_);
  // The recommendation gauges the last scrape set, to remove those it does not set again.
  std::vector<std::pair<prometheus::Family<prometheus::Gauge>*, prometheus::Gauge*>>
      recommendation_gauges_ ABSL_GUARDED_BY(scrape_mu_);
  absl::Mutex scheduler_mu_;
  Scheduler* scheduler_ ABSL_GUARDED_BY(scheduler_mu_) = nullptr;
  absl::Mutex mu_;
  // Label lookups are cached: prometheus-cpp's Add() hashes the label map each time.
  absl::flat_hash_map<std::string, prometheus::Histogram*> latency_by_method_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Counter*> rpcs_by_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_METRICS_H_
