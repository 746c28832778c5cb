#include "load_model/replica_load_window.h"

#include <cmath>

namespace evoscale::load_model {

std::optional<LoadSample> ReplicaLoadWindow::Add(
    const InstanceSample& s, absl::FunctionRef<double(absl::Time)> cpu_request) {
  std::optional<LoadSample> closed;
  const double start = std::floor(s.timestamp / width_) * width_;
  if (start > start_) {
    if (samples_ > 0) closed = Close(cpu_request);
    start_ = start;
    instances_.clear();
    reports_.clear();
    gpu_utilization_ = cpu_ = qps_ = latency_ = requested_cpu_ = requested_ = 0;
    samples_ = gpu_samples_ = latency_samples_ = 0;
  }
  instances_.insert(s.instance);
  reports_.emplace(s.instance, s.timestamp);
  ++samples_;
  cpu_ += s.cpu_cores;
  qps_ += s.qps;
  if (s.cpu_request_cores > 0) {
    requested_cpu_ += s.cpu_cores;
    requested_ += s.cpu_request_cores;
  }
  if (s.gpu_utilization > 0) {
    gpu_utilization_ += s.gpu_utilization;
    ++gpu_samples_;
  }
  if (s.latency_ms > 0) {
    latency_ += s.latency_ms;
    ++latency_samples_;
  }
  return closed;
}

LoadSample ReplicaLoadWindow::Close(absl::FunctionRef<double(absl::Time)> cpu_request) const {
  const int n = static_cast<int>(instances_.size());
  const double reports = static_cast<double>(reports_.size());
  LoadSample ls;
  ls.time = absl::UnixEpoch() + absl::Seconds(start_ + width_);
  ls.replicas = n;
  if (gpu_samples_ > 0) {
    ls.utilization = gpu_utilization_ / gpu_samples_;
  } else if (requested_ > 0) {
    ls.utilization = requested_cpu_ / requested_;
  } else {
    const double request = cpu_request(ls.time);
    ls.utilization = request > 0 ? cpu_ / reports / request : 0;
  }
  ls.qps = qps_ / reports * n;
  ls.latency_ms = latency_samples_ > 0 ? latency_ / latency_samples_ : -1;
  return ls;
}

}  // namespace evoscale::load_model
