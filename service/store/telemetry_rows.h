// What the telemetry store (telemetry_store.h) keeps: sample rows, the instances (series) and
// workloads they belong to, and how long it keeps them.
#ifndef EVOSCALE_SERVICE_STORE_TELEMETRY_ROWS_H_
#define EVOSCALE_SERVICE_STORE_TELEMETRY_ROWS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "evoscale/v1/autoscaler.pb.h"

namespace evoscale::service {

// One validated sample as stored.
struct TelemetryRow {
  int64_t instance_id = 0;
  double timestamp = 0;  // unix seconds
  double cpu_cores = 0;
  double memory_bytes = 0;
  double gpu_utilization = 0;
  double gpu_memory_bytes = 0;
  double qps = 0;
  double latency_ms = 0;  // TelemetrySample.latency_seconds, in milliseconds as stored
  bool oom = false;
  double cpu_request_cores = 0;  // 0: not reported
  // TelemetrySample.versions, in memory only: not stored (rows read back have none).
  std::vector<std::pair<std::string, int64_t>> versions;
  int32_t resolution = 0;  // 0 = raw; else the bucket width in seconds
};

// One container of one instance: samples are ordered, and models kept, per such row.
struct StoredInstance {
  int64_t id = 0;
  int64_t workload_id = 0;
  std::string name;       // TelemetrySample.instance
  std::string container;  // TelemetrySample.container; "" when the samples name none
};

struct StoredWorkload {
  int64_t id = 0;
  v1::Workload workload;
};

struct RetentionPolicy {
  double raw_retention_seconds = 2 * 86400.0;
  double bucket_seconds = 300;
  double bucket_retention_seconds = 35 * 86400.0;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_TELEMETRY_ROWS_H_
