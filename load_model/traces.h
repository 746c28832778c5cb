// Readers for the public traces under ../shared/data/traces/ (see its README): Bitbrains
// GWA-T-12 VM usage, Alibaba cluster-trace-v2026-GenAI serving telemetry, and the Azure LLM
// inference arrivals. Lines that do not parse are skipped and counted, never guessed at.
#ifndef EVOSCALE_LOAD_MODEL_TRACES_H_
#define EVOSCALE_LOAD_MODEL_TRACES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace evoscale::load_model {

// One 5-minute sample of one VM.
struct VmSample {
  absl::Time time;
  double cpu_cores = 0;           // CPU usage [MHz] / (capacity [MHz] / cores).
  double cpu_capacity_cores = 0;  // Cores provisioned.
  double memory_bytes = 0;        // Memory usage [KB] x 1024.
  double memory_capacity_bytes = 0;
};

struct VmTrace {
  std::string name;  // File name without extension, e.g. "1".
  std::vector<VmSample> samples;  // In time order.
  int64_t skipped_lines = 0;      // Malformed or out-of-order lines.
};

// Parses one Bitbrains VM file's content (";" + tab separated, a header line first).
// INVALID_ARGUMENT when no line parses.
absl::StatusOr<VmTrace> ParseBitbrainsVm(std::string_view content, std::string name);
// Reads one VM file, or every *.csv in a directory (ordered by numeric name: 1, 2, ..., 10).
// NOT_FOUND for a missing path or a directory without .csv files.
absl::StatusOr<std::vector<VmTrace>> ReadBitbrains(const std::string& path);

// One step of a replicated workload: demand is in replica-equivalents (the number of fully
// busy replicas that would serve the step's load).
struct ReplicaStep {
  absl::Time time;
  int observed_replicas = 0;  // Replicas that reported in the source trace.
  double demand = 0;
  double qps = 0;             // Requests per second offered.
  double latency_ms = -1;     // Mean queueing latency reported; -1 if none.
  double gpu_memory_bytes = 0;  // Summed over replicas; 0 if unknown.
};

struct ReplicaTrace {
  std::string name;
  std::vector<ReplicaStep> steps;  // In time order, one per distinct timestamp.
  int64_t skipped_lines = 0;
};

// Alibaba GenAI: `dir` holds pod_gpu_duty_cycle_anon.csv (required), qps.csv,
// pod_gpu_memory_used_bytes_anon.csv and queue_rt_raw_anon.csv (optional). Columns are found
// by header name. Per-pod rows join on (container_ip, timestamp); demand is the sum of GPU
// duty cycles / 100 over pods, QPS the sum over pods (including rows without a pod, which
// are workload-level). QPS rows between duty-cycle timestamps go to the next step.
absl::StatusOr<ReplicaTrace> ReadAlibabaGenAi(const std::string& dir);

// Per-file parsers, for tests: rows of (timestamp, container_ip, value) from a CSV with a
// header naming at least `timestamp_anon`, `value`, `container_ip` in any order.
struct PodValue {
  double timestamp = 0;
  std::string container_ip;
  double value = 0;
};
struct PodValues {
  std::vector<PodValue> rows;
  int64_t skipped_lines = 0;
};
absl::StatusOr<PodValues> ParseAlibabaPodCsv(std::string_view content, std::string_view file);

struct AzureLlmOptions {
  absl::Duration step = absl::Minutes(1);
  // Service cost of a request on one replica: context / prefill + generated / decode
  // seconds (batched throughputs of one replica, tokens per second).
  double prefill_tokens_per_s = 10000;
  double decode_tokens_per_s = 400;
};
// Azure LLM inference arrivals (TIMESTAMP, ContextTokens, GeneratedTokens), bucketed into
// steps; demand is the replica-seconds of work arriving per second.
absl::StatusOr<ReplicaTrace> ParseAzureLlm(std::string_view content,
                                           const AzureLlmOptions& options);
absl::StatusOr<ReplicaTrace> ReadAzureLlm(const std::string& path,
                                          const AzureLlmOptions& options);

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_TRACES_H_
