// Turns per-instance serving telemetry into replica-load observations for a
// ReplicaRecommender: every sample of every instance within one fixed window of time
// [k * width, (k + 1) * width) makes one LoadSample, stamped at the window's end.
#ifndef EVOSCALE_LOAD_MODEL_REPLICA_LOAD_WINDOW_H_
#define EVOSCALE_LOAD_MODEL_REPLICA_LOAD_WINDOW_H_

#include <cstdint>
#include <optional>
#include <set>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "load_model/recommender.h"

namespace evoscale::load_model {

// One instance's sample, as the window needs it. An instance of several containers sends one
// sample per container, all with the same timestamp.
struct InstanceSample {
  int64_t instance = 0;
  double timestamp = 0;        // unix seconds
  double cpu_cores = 0;
  double qps = 0;              // requests per second (this container's share of its instance's)
  double gpu_utilization = 0;  // 0..1; 0: none reported
  double latency_ms = 0;       // 0: none reported
  double cpu_request_cores = 0;  // the container's request as its pod spec sets it; 0: unknown
};

// Not thread-safe. Samples should arrive in time order; one older than the open window counts
// in the open window.
class ReplicaLoadWindow {
 public:
  explicit ReplicaLoadWindow(double width_seconds = 60) : width_(width_seconds) {}

  // Adds `s`. When `s` opens a later window, the open one is closed first and returned:
  //  - replicas: the distinct instances that reported in it;
  //  - utilization: the mean GPU utilisation when any sample had one; else, when samples
  //    reported their CPU request, their CPU summed over their requests summed (the
  //    HorizontalPodAutoscaler's utilisation of the pods' own requests); else the mean CPU per
  //    instance (its containers' samples at one time summed) over `cpu_request(end)`, the
  //    instance's recommended request (0 when that request is 0): CPU-bound serving;
  //  - qps: the instances' mean QPS (summed likewise) summed over instances (the offered load);
  //  - latency_ms: the mean of the reported latencies, -1 when none.
  std::optional<LoadSample> Add(const InstanceSample& s,
                                absl::FunctionRef<double(absl::Time)> cpu_request);

 private:
  LoadSample Close(absl::FunctionRef<double(absl::Time)> cpu_request) const;

  const double width_;
  double start_ = -1;  // the open window's start; -1: none yet
  std::set<int64_t> instances_;
  // The (instance, timestamp) pairs seen: one per instance per report, however many
  // containers it has. Sums per instance are divided by their count.
  std::set<std::pair<int64_t, double>> reports_;
  double gpu_utilization_ = 0, cpu_ = 0, qps_ = 0, latency_ = 0;  // sums
  double requested_cpu_ = 0, requested_ = 0;  // over the samples that reported a request
  int samples_ = 0, gpu_samples_ = 0, latency_samples_ = 0;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_REPLICA_LOAD_WINDOW_H_
