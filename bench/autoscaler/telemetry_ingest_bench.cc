// Telemetry ingest: samples per second stored by ONE ReportTelemetry client stream into a real
// evoscaled (child process, temporary database), counted from the server's accepted total.
//
//   telemetry_ingest_bench [--samples N] [--batch N] [--instances N] [--durability process|power]
//                          [--runs N]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "google/protobuf/util/time_util.h"
#include "tests/e2e/evoscaled_process.h"

namespace {

struct Options {
  int64_t samples = 1'000'000;
  int batch = 2000;
  int instances = 200;
  int runs = 3;
  std::string durability = "process";
};

double RunOnce(const Options& o, int run) {
  evoscale::testing::TempDir dir;
  auto server = evoscale::testing::EvoscaledProcess::Start(
      dir.path() + "/bench.db", {"--durability", o.durability});
  if (!server.ok()) {
    std::fprintf(stderr, "evoscaled: %s\n", std::string(server.status().message()).c_str());
    std::exit(1);
  }
  auto stub = evoscale::v1::AutoscalerService::NewStub(
      grpc::CreateChannel((*server)->grpc_address(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    evoscale::v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name("bench/ranker");
    evoscale::v1::Workload w;
    if (!stub->PutWorkload(&ctx, req, &w).ok()) std::exit(1);
  }
  // Prepare every batch first: the bench measures the server, not message building.
  const int64_t per_instance = o.samples / o.instances;
  const double end = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  const double start = end - static_cast<double>(per_instance) * 10.0;  // 10 s apart
  std::vector<evoscale::v1::TelemetryBatch> batches;
  evoscale::v1::TelemetryBatch cur;
  for (int64_t k = 0; k < per_instance; ++k) {
    for (int i = 0; i < o.instances; ++i) {
      auto* s = cur.add_samples();
      s->set_workload("bench/ranker");
      s->set_instance("pod-" + std::to_string(i));
      *s->mutable_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
          std::llround((start + k * 10.0) * 1e9));
      s->set_cpu_cores(0.5 + 0.001 * ((k * 7 + i) % 500));
      s->set_memory_bytes(1e9 + 1e6 * ((k + i) % 100));
      s->set_qps(100 + (k % 60));
      s->set_latency_seconds(0.020);
      if (cur.samples_size() == o.batch) {
        batches.push_back(std::move(cur));
        cur.Clear();
      }
    }
  }
  if (cur.samples_size() > 0) batches.push_back(std::move(cur));

  grpc::ClientContext ctx;
  evoscale::v1::ReportTelemetryResponse resp;
  const auto t0 = std::chrono::steady_clock::now();
  auto writer = stub->ReportTelemetry(&ctx, &resp);
  for (const auto& b : batches) {
    if (!writer->Write(b)) break;
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();  // returns once every batch is stored
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    std::fprintf(stderr, "ReportTelemetry: %s\n", st.error_message().c_str());
    std::exit(1);
  }
  const double rate = resp.accepted() / secs;
  std::printf("run %d: %lld samples accepted, %lld rejected, %.2f s, %.0f samples/s\n", run,
              static_cast<long long>(resp.accepted()), static_cast<long long>(resp.rejected()),
              secs, rate);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("telemetry_ingest_bench: one ReportTelemetry stream into a child evoscaled, "
               "samples/s (median of --runs)",
               "telemetry_ingest_bench");
  app.add_option("--samples", o.samples, "samples per run")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "samples per TelemetryBatch")->check(CLI::Range(1, 100000));
  app.add_option("--instances", o.instances, "instances the samples rotate over")
      ->check(CLI::PositiveNumber);
  app.add_option("--runs", o.runs, "runs (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--durability", o.durability, "the child evoscaled's --durability")
      ->check(CLI::IsMember({"process", "power"}));
  CLI11_PARSE(app, argc, argv);
  std::printf("telemetry ingest: %lld samples, %d instances, batches of %d, one stream, "
              "durability=%s (%s)\n",
              static_cast<long long>(o.samples), o.instances, o.batch, o.durability.c_str(),
              o.durability == "power" ? "fsync per batch" : "survives kill -9, not power loss");
  std::vector<double> rates;
  for (int r = 1; r <= o.runs; ++r) rates.push_back(RunOnce(o, r));
  std::sort(rates.begin(), rates.end());
  std::printf("median: %.0f samples/s over %d runs (target >= 200000)\n", rates[rates.size() / 2],
              o.runs);
  return 0;
}
