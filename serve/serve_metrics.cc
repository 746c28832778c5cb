#include "serve/serve_metrics.h"

#include <algorithm>

#include "prometheus/text_serializer.h"

namespace evoscale::serve {

namespace {

// A metric of one series (no labels), registered in `registry`.
prometheus::Gauge& NewGauge(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}
prometheus::Counter& NewCounter(prometheus::Registry& registry, const char* name,
                                const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

ServeMetrics::ServeMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("evoscale_serve_requests_total")
                    .Help("Predict calls by gRPC status code")
                    .Register(*registry_)),
      examples_(NewCounter(*registry_, "evoscale_serve_examples_total", "Examples answered")),
      latency_(prometheus::BuildHistogram()
                   .Name("evoscale_serve_request_seconds")
                   .Help("A Predict call's time in the server")
                   .Register(*registry_)
                   .Add({}, prometheus::Histogram::BucketBoundaries{0.00005, 0.0001, 0.00025,
                                                                    0.0005, 0.001, 0.0025, 0.005,
                                                                    0.01, 0.025, 0.05, 0.1, 0.25})),
      qps_(NewGauge(*registry_, "evoscale_serve_qps",
                    "Predict calls per second over the last 10 s")),
      sparse_version_(NewGauge(*registry_, "evoscale_serve_sparse_version",
                               "The embedding rows' version answering now (a training step)")),
      dense_version_(NewGauge(*registry_, "evoscale_serve_dense_version",
                              "The MLP's version answering now (a training step)")),
      rows_(NewGauge(*registry_, "evoscale_serve_rows", "Embedding rows held")),
      rows_applied_(NewCounter(*registry_, "evoscale_serve_rows_applied_total",
                               "Embedding rows applied, from checkpoints and pushes")),
      staleness_(NewGauge(*registry_, "evoscale_serve_staleness_seconds",
                          "Seconds since the newest version applied was made")),
      model_bytes_(NewGauge(*registry_, "evoscale_serve_model_bytes",
                            "Bytes the embedding table and the MLP hold")),
      pushes_(prometheus::BuildCounter()
                  .Name("evoscale_serve_pushes_total")
                  .Help("Pushes from trainers by kind (rows, dense) and result (applied, "
                        "stale, invalid)")
                  .Register(*registry_)) {}

void ServeMetrics::RecordPush(const std::string& kind, const std::string& result) {
  absl::MutexLock lock(&mu_);
  pushes_.Add({{"kind", kind}, {"result", result}}).Increment();
}

int64_t ServeMetrics::Second(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::seconds>(t - start_).count();
}

void ServeMetrics::RecordRequest(const std::string& code, int examples, double seconds) {
  latency_.Observe(seconds);
  if (examples > 0) examples_.Increment(examples);
  const int64_t now = Second(Clock::now());
  absl::MutexLock lock(&mu_);
  prometheus::Counter*& counter = by_code_[code];
  if (counter == nullptr) counter = &requests_.Add({{"code", code}});
  counter->Increment();
  ++period_.calls;
  period_.seconds += seconds;
  const size_t i = size_t(now % int64_t(ring_.size()));
  if (stamp_[i] != now) {
    stamp_[i] = now;
    ring_[i] = 0;
  }
  ++ring_[i];
}

void ServeMetrics::SetModel(int64_t sparse_version, int64_t dense_version, size_t rows,
                            size_t bytes, size_t applied,
                            std::chrono::system_clock::time_point made) {
  sparse_version_.Set(double(sparse_version));
  dense_version_.Set(double(dense_version));
  rows_.Set(double(rows));
  model_bytes_.Set(double(bytes));
  if (applied > 0) rows_applied_.Increment(double(applied));
  absl::MutexLock lock(&mu_);
  made_ = made;
}

double ServeMetrics::Qps() const {
  const int64_t now = Second(Clock::now());
  absl::MutexLock lock(&mu_);
  // The whole seconds before this one: up to kWindow of them.
  const int64_t seconds = std::min<int64_t>(kWindow, now);
  if (seconds <= 0) return 0;
  int64_t calls = 0;
  for (int64_t s = now - seconds; s < now; ++s) {
    const size_t i = size_t(s % int64_t(ring_.size()));
    if (stamp_[i] == s) calls += ring_[i];
  }
  return double(calls) / double(seconds);
}

ServeMetrics::Period ServeMetrics::TakePeriod() {
  absl::MutexLock lock(&mu_);
  Period p = period_;
  period_ = Period{};
  return p;
}

std::string ServeMetrics::Scrape() {
  qps_.Set(Qps());
  {
    absl::MutexLock lock(&mu_);
    const double stale =
        std::chrono::duration<double>(std::chrono::system_clock::now() - made_).count();
    staleness_.Set(std::max(0.0, stale));
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace evoscale::serve
