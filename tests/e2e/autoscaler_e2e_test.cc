// End-to-end: telemetry streamed into the real evoscaled over gRPC, the recommendation read
// back over gRPC, from /metrics and as Kubernetes YAML from the real CLI.
#include <sqlite3.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/http_get.h"
#include "yaml-cpp/yaml.h"

namespace evoscale {
namespace {

using ::evoscale::testing::BinDir;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::HttpGet;
using ::evoscale::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr char kWorkload[] = "default/ranker";

double NowSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

// The value of the Prometheus sample of `metric` whose labels include all of `labels`.
double Gauge(const std::string& text, const std::string& metric,
             const std::vector<std::string>& labels) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (!all) continue;
    double v;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

class AutoscalerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  void Start() {
    stub_.reset();
    server_.reset();
    auto p = EvoscaledProcess::Start(dir_.path() + "/evoscale.db");
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
    stub_ = v1::AutoscalerService::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status PutWorkload(const std::string& name, v1::Workload* out) {
    grpc::ClientContext ctx;
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(name);
    req.mutable_workload()->set_target_utilization(0.6);
    req.mutable_workload()->set_max_replicas(50);
    return stub_->PutWorkload(&ctx, req, out);
  }

  // Streams `batches` on one ReportTelemetry call.
  grpc::Status Report(const std::vector<v1::TelemetryBatch>& batches,
                      v1::ReportTelemetryResponse* resp) {
    grpc::ClientContext ctx;
    auto writer = stub_->ReportTelemetry(&ctx, resp);
    for (const auto& b : batches) {
      if (!writer->Write(b)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  v1::Recommendation Recommend() {
    grpc::ClientContext ctx;
    v1::GetRecommendationRequest req;
    req.set_workload(kWorkload);
    v1::Recommendation rec;
    grpc::Status st = stub_->GetRecommendation(&ctx, req, &rec);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return rec;
  }

  // Three replicas, one sample a minute for two hours up to now; CPU follows QPS.
  static std::vector<v1::TelemetryBatch> GoodTelemetry(double end) {
    std::vector<v1::TelemetryBatch> batches(1);
    for (int k = 0; k < 120; ++k) {
      for (int i = 0; i < 3; ++i) {
        v1::TelemetrySample* s = batches.back().add_samples();
        s->set_workload(kWorkload);
        s->set_instance("ranker-" + std::to_string(i));
        s->set_timestamp(end - (119 - k) * 60.0);
        const double qps = 100 + 50 * std::sin(k / 10.0) + 10 * i;
        s->set_qps(qps);
        s->set_cpu_cores(0.2 + qps / 250);
        s->set_memory_bytes(800e6 + 1e6 * (k % 17));
        s->set_latency_ms(20 + qps / 20);
      }
      if (batches.back().samples_size() >= 60) batches.emplace_back();
    }
    return batches;
  }

  TempDir dir_;
  std::unique_ptr<EvoscaledProcess> server_;
  std::unique_ptr<v1::AutoscalerService::Stub> stub_;
};

TEST_F(AutoscalerE2eTest, TelemetryInRecommendationOutOverGrpcMetricsAndYaml) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w).ok());
  const double end = NowSeconds();
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(GoodTelemetry(end), &resp).ok());
  EXPECT_EQ(resp.accepted(), 360);
  EXPECT_EQ(resp.rejected(), 0);

  const v1::Recommendation rec = Recommend();
  EXPECT_EQ(rec.workload(), kWorkload);
  EXPECT_EQ(rec.policy(), "evoscale");
  // Usage peaked near 0.2 + 170/250 = 0.88 cores and 816 MB per instance.
  EXPECT_GT(rec.cpu_cores().target(), 0.3);
  EXPECT_LT(rec.cpu_cores().target(), 3.0);
  EXPECT_GE(rec.memory_bytes().target(), 800e6);
  EXPECT_LT(rec.memory_bytes().target(), 2e9);
  EXPECT_LE(rec.cpu_cores().lower_bound(), rec.cpu_cores().target());
  EXPECT_GE(rec.cpu_cores().upper_bound(), rec.cpu_cores().target());
  EXPECT_GE(rec.replicas(), 1);
  EXPECT_LE(rec.replicas(), 50);
  EXPECT_DOUBLE_EQ(rec.timestamp(), end);

  // The same numbers as Prometheus gauges.
  auto metrics = HttpGet(server_->http_address(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  const std::string wl = "workload=\"default/ranker\"";
  EXPECT_DOUBLE_EQ(Gauge(metrics.body, "evoscale_recommendation",
                         {wl, "resource=\"cpu_cores\"", "bound=\"target\""}),
                   rec.cpu_cores().target());
  EXPECT_DOUBLE_EQ(Gauge(metrics.body, "evoscale_recommendation",
                         {wl, "resource=\"memory_bytes\"", "bound=\"upper_bound\""}),
                   rec.memory_bytes().upper_bound());
  EXPECT_DOUBLE_EQ(Gauge(metrics.body, "evoscale_recommended_replicas", {wl}), rec.replicas());
  EXPECT_DOUBLE_EQ(Gauge(metrics.body, "evoscale_telemetry_samples_total", {"result=\"accepted\""}),
                   360);

  // And as Kubernetes objects from the CLI.
  const std::string out = dir_.path() + "/rec.yaml";
  const std::string cmd = BinDir() + "/evoscale --server " + server_->grpc_address() +
                          " recommend default/ranker -o yaml >" + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<YAML::Node> docs = YAML::LoadAllFromFile(out);
  ASSERT_EQ(docs.size(), 2u);
  const YAML::Node& vpa = docs[0];
  EXPECT_EQ(vpa["kind"].as<std::string>(), "VerticalPodAutoscaler");
  EXPECT_EQ(vpa["metadata"]["namespace"].as<std::string>(), "default");
  EXPECT_EQ(vpa["metadata"]["name"].as<std::string>(), "ranker");
  const YAML::Node target = vpa["status"]["recommendation"]["containerRecommendations"][0]["target"];
  EXPECT_EQ(target["cpu"].as<std::string>(),
            std::to_string(static_cast<int64_t>(std::ceil(rec.cpu_cores().target() * 1000 - 1e-9))) +
                "m");
  EXPECT_EQ(target["memory"].as<std::string>(),
            std::to_string(static_cast<int64_t>(std::ceil(rec.memory_bytes().target() - 1e-9))));
  const YAML::Node& scaled = docs[1];
  EXPECT_EQ(scaled["kind"].as<std::string>(), "ScaledObject");
  EXPECT_EQ(scaled["metadata"]["annotations"]["evoscale.io/recommended-replicas"].as<int>(),
            rec.replicas());
  EXPECT_THAT(scaled["spec"]["triggers"][0]["metadata"]["query"].as<std::string>(),
              HasSubstr("evoscale_recommended_replicas{workload=\"default/ranker\"}"));

  // A restart rebuilds the load models from the stored telemetry: the same answer.
  Start();
  const v1::Recommendation again = Recommend();
  EXPECT_DOUBLE_EQ(again.cpu_cores().target(), rec.cpu_cores().target());
  EXPECT_DOUBLE_EQ(again.memory_bytes().target(), rec.memory_bytes().target());
  EXPECT_EQ(again.replicas(), rec.replicas());
}

TEST_F(AutoscalerE2eTest, BadSamplesAreCountedByReasonAndNothingStoredIsCorrupted) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w).ok());
  const double end = NowSeconds();
  std::vector<v1::TelemetryBatch> batches = GoodTelemetry(end);
  v1::TelemetryBatch bad;
  auto add = [&](const std::string& workload, const std::string& instance, double ts) {
    v1::TelemetrySample* s = bad.add_samples();
    s->set_workload(workload);
    s->set_instance(instance);
    s->set_timestamp(ts);
    s->set_cpu_cores(0.5);
    s->set_memory_bytes(1e9);
    return s;
  };
  add(kWorkload, "ranker-0", end + 30)->set_cpu_cores(std::nan(""));      // not_finite
  add(kWorkload, "ranker-0", end + 31)->set_memory_bytes(-1);             // negative
  add(kWorkload, "ranker-0", end);                                        // duplicate
  add(kWorkload, "ranker-1", end - 600);                                  // out_of_order
  add(kWorkload, "ranker-2", end + 86400);                                // future
  add("default/nobody", "x", end);                                        // unknown_workload
  add(kWorkload, "", end + 40);                                           // bad_field
  add(kWorkload, "ranker-0", end + 50)->set_gpu_utilization(3);           // bad_field
  add(kWorkload, "ranker-0", end + 60);                                   // accepted
  batches.push_back(bad);
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(batches, &resp).ok());
  EXPECT_EQ(resp.accepted(), 361);
  EXPECT_EQ(resp.rejected(), 8);
  EXPECT_THAT(resp.rejected_by_reason(),
              UnorderedElementsAre(Pair("not_finite", 1), Pair("negative", 1),
                                   Pair("duplicate", 1), Pair("out_of_order", 1),
                                   Pair("future", 1), Pair("unknown_workload", 1),
                                   Pair("bad_field", 2)));
  ASSERT_GE(resp.errors_size(), 8);
  EXPECT_THAT(resp.errors(0), HasSubstr("cpu_cores: nan is not finite"));
  EXPECT_THAT(resp.errors(1), HasSubstr("memory_bytes: -1 is negative"));
  EXPECT_THAT(resp.errors(5), HasSubstr("unknown workload \"default/nobody\""));

  // A malformed workload is refused with the field named.
  v1::Workload ignored;
  grpc::Status st = PutWorkload("Bad Name!", &ignored);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("workload.name"));

  auto metrics = HttpGet(server_->http_address(), "/metrics");
  EXPECT_DOUBLE_EQ(Gauge(metrics.body, "evoscale_telemetry_samples_total",
                         {"result=\"out_of_order\""}),
                   1);

  // The stored telemetry holds exactly the accepted samples, and the file is intact.
  server_->Stop(SIGTERM);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir_.path() + "/evoscale.telemetry.db").c_str(), &db,
                            SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  for (const auto& [sql, want] : {std::pair<const char*, std::string>{"PRAGMA integrity_check", "ok"},
                                  {"SELECT count(*) FROM samples", "361"},
                                  {"SELECT count(*) FROM instances", "3"},
                                  {"SELECT count(*) FROM samples WHERE cpu != cpu OR mem < 0", "0"}}) {
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK) << sql;
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_EQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), want) << sql;
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
}

TEST_F(AutoscalerE2eTest, WatchSendsTheCurrentRecommendationThenChanges) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w).ok());
  const double end = NowSeconds() - 3600;
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(GoodTelemetry(end), &resp).ok());

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WatchRecommendationsRequest req;
  req.set_workload(kWorkload);
  auto reader = stub_->WatchRecommendations(&ctx, req);
  v1::Recommendation first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_DOUBLE_EQ(first.timestamp(), end);

  // Heavier load an hour later: a new recommendation arrives on the stream.
  v1::TelemetryBatch more;
  for (int k = 1; k <= 30; ++k) {
    for (int i = 0; i < 3; ++i) {
      v1::TelemetrySample* s = more.add_samples();
      s->set_workload(kWorkload);
      s->set_instance("ranker-" + std::to_string(i));
      s->set_timestamp(end + k * 60.0);
      s->set_qps(400);
      s->set_cpu_cores(2.5);
      s->set_memory_bytes(1.5e9);
    }
  }
  v1::ReportTelemetryResponse resp2;
  ASSERT_TRUE(Report({more}, &resp2).ok());
  EXPECT_EQ(resp2.accepted(), 90);
  v1::Recommendation second;
  ASSERT_TRUE(reader->Read(&second));
  EXPECT_DOUBLE_EQ(second.timestamp(), end + 30 * 60.0);
  EXPECT_GT(second.memory_bytes().target(), first.memory_bytes().target());
  ctx.TryCancel();
  reader->Finish().IgnoreError();
}

}  // namespace
}  // namespace evoscale
