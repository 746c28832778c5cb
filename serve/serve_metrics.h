// evoscale-serve's Prometheus metrics (/metrics) and the figures its telemetry reports:
//   evoscale_serve_requests_total{code}      Predict calls by gRPC status code name
//   evoscale_serve_examples_total            examples answered
//   evoscale_serve_request_seconds           histogram of a call's time in the server
//   evoscale_serve_qps                       calls per second over the last 10 s
//   evoscale_serve_sparse_version, evoscale_serve_dense_version   the versions answering now
//   evoscale_serve_rows                      embedding rows held
//   evoscale_serve_rows_applied_total        rows applied (loaded from checkpoints, pushed)
//   evoscale_serve_staleness_seconds         now minus when the newest version applied was made
//   evoscale_serve_model_bytes               what the table and the MLP hold
//   evoscale_serve_pushes_total{kind,result} pushes from trainers: kind rows or dense, result
//                                            applied, stale (an older version, refused) or
//                                            invalid
// Thread-safe.
#ifndef EVOSCALE_SERVE_SERVE_METRICS_H_
#define EVOSCALE_SERVE_SERVE_METRICS_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace evoscale::serve {

class ServeMetrics {
 public:
  ServeMetrics();

  // One Predict call: its status code name ("OK", "INVALID_ARGUMENT", ...), examples answered
  // and seconds in the server.
  void RecordRequest(const std::string& code, int examples, double seconds);
  // The model now answering: its versions, rows and bytes, `applied` rows more applied, made
  // at `made` (system clock: the checkpoint's or the push's time).
  void SetModel(int64_t sparse_version, int64_t dense_version, size_t rows, size_t bytes,
                size_t applied, std::chrono::system_clock::time_point made);

  // One push: kind "rows", "dense" or "reload", result "applied", "stale" or "invalid".
  void RecordPush(const std::string& kind, const std::string& result);

  // Calls per second over the last 10 whole seconds (fewer since the start).
  double Qps() const;
  // The calls and their summed seconds since the previous call (for telemetry reports).
  struct Period {
    int64_t calls = 0;
    double seconds = 0;
  };
  Period TakePeriod();
  // Every metric in Prometheus' text format.
  std::string Scrape();

 private:
  static constexpr int kWindow = 10;
  using Clock = std::chrono::steady_clock;
  int64_t Second(Clock::time_point t) const;

  const Clock::time_point start_ = Clock::now();
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Counter& examples_;
  prometheus::Histogram& latency_;
  prometheus::Gauge& qps_;
  prometheus::Gauge& sparse_version_;
  prometheus::Gauge& dense_version_;
  prometheus::Gauge& rows_;
  prometheus::Counter& rows_applied_;
  prometheus::Gauge& staleness_;
  prometheus::Gauge& model_bytes_;
  prometheus::Family<prometheus::Counter>& pushes_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, prometheus::Counter*> by_code_ ABSL_GUARDED_BY(mu_);
  // Calls in each of the last seconds: ring[s % size] holds second s when stamp[...] == s.
  std::array<int64_t, kWindow + 1> ring_ ABSL_GUARDED_BY(mu_) = {};
  std::array<int64_t, kWindow + 1> stamp_ ABSL_GUARDED_BY(mu_) = {};
  std::chrono::system_clock::time_point made_ ABSL_GUARDED_BY(mu_);
  Period period_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_SERVE_METRICS_H_
