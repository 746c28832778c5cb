// End-to-end: telemetry streamed into the real evoscaled over gRPC, the recommendation read
// back over gRPC, from /metrics and as Kubernetes YAML from the real CLI.
#include <sqlite3.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
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
using ::google::protobuf::util::TimeUtil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

constexpr char kWorkload[] = "default/ranker";
// How the gauges label it: namespace and name as Kubernetes has them.
constexpr char kLabels[] = "namespace=\"default\",workload=\"ranker\"";

double NowSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

google::protobuf::Timestamp Time(double unix_seconds) {
  return TimeUtil::NanosecondsToTimestamp(std::llround(unix_seconds * 1e9));
}
double Seconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + t.nanos() * 1e-9;
}

// The sample lines of `text` (Prometheus' text format) of `metric` whose labels include all
// of `labels`.
std::vector<std::string> Samples(const std::string& text, const std::string& metric,
                                 const std::vector<std::string>& labels) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) out.push_back(line);
  }
  return out;
}

// The value of the first of Samples(); NaN when there is none.
double Gauge(const std::string& text, const std::string& metric,
             const std::vector<std::string>& labels) {
  for (const std::string& line : Samples(text, metric, labels)) {
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

  grpc::Status PutWorkload(const std::string& name, v1::Workload* out,
                           double latency_slo_seconds = 0) {
    grpc::ClientContext ctx;
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(name);
    req.mutable_workload()->set_target_utilization(0.6);
    req.mutable_workload()->set_max_replicas(50);
    req.mutable_workload()->set_latency_slo_seconds(latency_slo_seconds);
    return stub_->PutWorkload(&ctx, req, out);
  }

  grpc::Status GetWorkload(const std::string& name, v1::Workload* out) {
    grpc::ClientContext ctx;
    v1::GetWorkloadRequest req;
    req.set_name(name);
    return stub_->GetWorkload(&ctx, req, out);
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

  // Three replicas, one sample a minute for two hours up to now; CPU follows QPS. With
  // `containers`, each replica is a pod of a server and an envoy sidecar, reported at the same
  // times; the pod's QPS and latency ride on the server's samples.
  static std::vector<v1::TelemetryBatch> GoodTelemetry(double end, bool containers = false) {
    std::vector<v1::TelemetryBatch> batches(1);
    for (int k = 0; k < 120; ++k) {
      for (int i = 0; i < 3; ++i) {
        v1::TelemetrySample* s = batches.back().add_samples();
        s->set_workload(kWorkload);
        s->set_instance("ranker-" + std::to_string(i));
        *s->mutable_time() = Time(end - (119 - k) * 60.0);
        const double qps = 100 + 50 * std::sin(k / 10.0) + 10 * i;
        s->set_qps(qps);
        s->set_cpu_cores(0.2 + qps / 250);
        s->set_memory_bytes(800e6 + 1e6 * (k % 17));
        s->set_latency_seconds(0.020 + qps / 20000);
        if (!containers) continue;
        s->set_container("server");
        v1::TelemetrySample* envoy = batches.back().add_samples();
        envoy->set_workload(kWorkload);
        envoy->set_instance(s->instance());
        envoy->set_container("envoy");
        *envoy->mutable_time() = s->time();
        envoy->set_cpu_cores(0.05 + qps / 5000);
        envoy->set_memory_bytes(60e6);
      }
      if (batches.back().samples_size() >= 60) batches.emplace_back();
    }
    return batches;
  }

  std::string Metrics() {
    auto metrics = HttpGet(server_->http_address(), "/metrics");
    EXPECT_EQ(metrics.status, 200);
    return metrics.body;
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
  // By default the limit is the request.
  EXPECT_DOUBLE_EQ(rec.cpu_cores().limit(), rec.cpu_cores().target());
  EXPECT_DOUBLE_EQ(rec.memory_bytes().limit(), rec.memory_bytes().target());
  EXPECT_GE(rec.replicas(), 1);
  EXPECT_LE(rec.replicas(), 50);
  EXPECT_NEAR(Seconds(rec.newest_sample_time()), end, 1e-6);
  // One container, unnamed: the workload's figures are its own.
  ASSERT_EQ(rec.containers_size(), 1);
  EXPECT_EQ(rec.containers(0).name(), "");
  EXPECT_DOUBLE_EQ(rec.containers(0).cpu_cores().target(), rec.cpu_cores().target());

  // The same numbers as Prometheus gauges, one resource per name, labelled as Kubernetes
  // names the workload (and no container label: the samples named none).
  const std::string metrics = Metrics();
  EXPECT_DOUBLE_EQ(
      Gauge(metrics, "evoscale_recommendation_cpu_cores", {kLabels, "bound=\"target\""}),
      rec.cpu_cores().target());
  EXPECT_DOUBLE_EQ(
      Gauge(metrics, "evoscale_recommendation_memory_bytes", {kLabels, "bound=\"upper_bound\""}),
      rec.memory_bytes().upper_bound());
  EXPECT_THAT(Samples(metrics, "evoscale_recommendation_cpu_cores", {"container="}), ElementsAre());
  EXPECT_THAT(Samples(metrics, "evoscale_recommendation_gpu_memory_bytes", {}), ElementsAre());
  EXPECT_DOUBLE_EQ(Gauge(metrics, "evoscale_recommended_replicas", {kLabels}), rec.replicas());
  EXPECT_DOUBLE_EQ(Gauge(metrics, "evoscale_telemetry_samples_total", {"result=\"accepted\""}),
                   360);
  // ranker-0..2, one unnamed container each (a gauge without labels: "name value").
  EXPECT_THAT(metrics, HasSubstr("\nevoscale_telemetry_series 3\n"));

  // And as Kubernetes objects from the CLI.
  const std::string out = dir_.path() + "/rec.yaml";
  const std::string cmd = BinDir() + "/evoscale --server " + server_->grpc_address() +
                          " recommend default/ranker -o kubernetes >" + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<YAML::Node> docs = YAML::LoadAllFromFile(out);
  ASSERT_EQ(docs.size(), 2u);
  const YAML::Node& vpa = docs[0];
  EXPECT_EQ(vpa["kind"].as<std::string>(), "VerticalPodAutoscaler");
  EXPECT_EQ(vpa["metadata"]["namespace"].as<std::string>(), "default");
  EXPECT_EQ(vpa["metadata"]["name"].as<std::string>(), "ranker");
  EXPECT_EQ(vpa["spec"]["recommenders"][0]["name"].as<std::string>(), "evoscale");
  const YAML::Node container = vpa["status"]["recommendation"]["containerRecommendations"][0];
  EXPECT_EQ(container["containerName"].as<std::string>(), "ranker");  // assumed, with a note
  EXPECT_THAT(vpa["metadata"]["annotations"]["evoscale.io/note"].as<std::string>(),
              HasSubstr("names no container"));
  const YAML::Node target = container["target"];
  EXPECT_EQ(
      target["cpu"].as<std::string>(),
      std::to_string(static_cast<int64_t>(std::ceil(rec.cpu_cores().target() * 1000 - 1e-9))) +
          "m");
  EXPECT_EQ(target["memory"].as<std::string>(),
            std::to_string(static_cast<int64_t>(std::ceil(rec.memory_bytes().target() - 1e-9))));
  const YAML::Node& scaled = docs[1];
  EXPECT_EQ(scaled["kind"].as<std::string>(), "ScaledObject");
  EXPECT_EQ(scaled["metadata"]["annotations"]["evoscale.io/recommended-replicas"].as<int>(),
            rec.replicas());
  EXPECT_EQ(scaled["spec"]["triggers"][0]["metadata"]["query"].as<std::string>(),
            "max(evoscale_recommended_replicas{namespace=\"default\",workload=\"ranker\"})");
  EXPECT_FALSE(scaled["spec"]["minReplicaCount"]);  // the workload sets none
  EXPECT_EQ(scaled["spec"]["maxReplicaCount"].as<int>(), 50);

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
    *s->mutable_time() = Time(ts);
    s->set_cpu_cores(0.5);
    s->set_memory_bytes(1e9);
    return s;
  };
  add(kWorkload, "ranker-0", end + 30)->set_cpu_cores(std::nan(""));  // not_finite
  add(kWorkload, "ranker-0", end + 31)->set_memory_bytes(-1);         // negative
  add(kWorkload, "ranker-0", end);                                    // duplicate
  add(kWorkload, "ranker-1", end - 600);                              // out_of_order
  add(kWorkload, "ranker-2", end + 86400);                            // future
  add("default/nobody", "x", end);                                    // unknown_workload
  add(kWorkload, "", end + 40);                                       // bad_field
  add(kWorkload, "ranker-0", end + 50)->set_gpu_utilization(3);       // bad_field
  add(kWorkload, "ranker-0", end + 51)->set_latency_seconds(-0.5);    // negative
  add(kWorkload, "ranker-0", end + 52)->clear_time();                 // bad_field
  add(kWorkload, "ranker-0", end + 60);                               // accepted
  batches.push_back(bad);
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(batches, &resp).ok());
  EXPECT_EQ(resp.accepted(), 361);
  EXPECT_EQ(resp.rejected(), 10);
  EXPECT_THAT(resp.rejected_by_reason(),
              UnorderedElementsAre(Pair("not_finite", 1), Pair("negative", 2), Pair("duplicate", 1),
                                   Pair("out_of_order", 1), Pair("future", 1),
                                   Pair("unknown_workload", 1), Pair("bad_field", 3)));
  ASSERT_EQ(resp.errors_size(), 10);
  EXPECT_THAT(resp.errors(0), HasSubstr("cpu_cores: nan is not finite"));
  EXPECT_THAT(resp.errors(1), HasSubstr("memory_bytes: -1 is negative"));
  EXPECT_THAT(resp.errors(2), HasSubstr("repeats the last sample of instance \"ranker-0\""));
  EXPECT_THAT(resp.errors(4), HasSubstr("s ahead of the server's clock"));
  EXPECT_THAT(resp.errors(5), HasSubstr("unknown workload \"default/nobody\""));
  EXPECT_THAT(resp.errors(8), HasSubstr("latency_seconds: -0.5 is negative"));
  EXPECT_THAT(resp.errors(9), HasSubstr("time: must be set"));
  // A reported CPU request is checked as the usage fields are.
  bad.Clear();
  add(kWorkload, "ranker-0", end + 70)->set_cpu_request_cores(-1);
  v1::ReportTelemetryResponse request_resp;
  ASSERT_TRUE(Report({bad}, &request_resp).ok());
  EXPECT_EQ(request_resp.rejected(), 1);
  ASSERT_EQ(request_resp.errors_size(), 1);
  EXPECT_THAT(request_resp.errors(0), HasSubstr("cpu_request_cores: -1 is negative"));

  // A malformed workload is refused with the field named.
  v1::Workload ignored;
  grpc::Status st = PutWorkload("Bad Name!", &ignored);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("workload.name"));

  EXPECT_DOUBLE_EQ(
      Gauge(Metrics(), "evoscale_telemetry_samples_total", {"result=\"out_of_order\""}), 1);

  // The stored telemetry holds exactly the accepted samples, and the file is intact.
  server_->Stop(SIGTERM);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir_.path() + "/evoscale.telemetry.db").c_str(), &db,
                            SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  for (const auto& [sql, want] :
       {std::pair<const char*, std::string>{"PRAGMA integrity_check", "ok"},
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
  EXPECT_NEAR(Seconds(first.newest_sample_time()), end, 1e-6);

  // Heavier load an hour later: a new recommendation arrives on the stream.
  v1::TelemetryBatch more;
  for (int k = 1; k <= 30; ++k) {
    for (int i = 0; i < 3; ++i) {
      v1::TelemetrySample* s = more.add_samples();
      s->set_workload(kWorkload);
      s->set_instance("ranker-" + std::to_string(i));
      *s->mutable_time() = Time(end + k * 60.0);
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
  EXPECT_NEAR(Seconds(second.newest_sample_time()), end + 30 * 60.0, 1e-6);
  EXPECT_GT(second.memory_bytes().target(), first.memory_bytes().target());
  ctx.TryCancel();
  reader->Finish().IgnoreError();
}

// Each container of a pod gets its own recommendation, gauges and VPA entry by its real name;
// the workload's figures are the pod's (their sums). A container that stops reporting (here:
// the unnamed one of an older sender) drops out of the recommendation and of /metrics.
TEST_F(AutoscalerE2eTest, ContainersGetTheirOwnRecommendationsGaugesAndVpaEntries) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w).ok());
  const double end = NowSeconds();
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(GoodTelemetry(end - 3 * 86400), &resp).ok());  // unnamed, 3 days ago
  ASSERT_EQ(resp.accepted(), 360);
  EXPECT_THAT(Samples(Metrics(), "evoscale_recommendation_cpu_cores", {kLabels}),
              Not(ElementsAre()));

  ASSERT_TRUE(Report(GoodTelemetry(end, /*containers=*/true), &resp).ok());
  EXPECT_EQ(resp.accepted(), 720);  // a pod's two containers at one time: no duplicates
  EXPECT_EQ(resp.rejected(), 0);
  const v1::Recommendation rec = Recommend();
  ASSERT_EQ(rec.containers_size(), 2);
  const v1::ContainerRecommendation& envoy = rec.containers(0);
  const v1::ContainerRecommendation& server = rec.containers(1);
  EXPECT_EQ(envoy.name(), "envoy");
  EXPECT_EQ(server.name(), "server");
  EXPECT_GT(server.cpu_cores().target(), 2 * envoy.cpu_cores().target());
  EXPECT_GE(server.memory_bytes().target(), 800e6);
  EXPECT_LT(envoy.memory_bytes().target(), 200e6);
  EXPECT_DOUBLE_EQ(rec.cpu_cores().target(),
                   server.cpu_cores().target() + envoy.cpu_cores().target());
  EXPECT_DOUBLE_EQ(rec.memory_bytes().upper_bound(),
                   server.memory_bytes().upper_bound() + envoy.memory_bytes().upper_bound());
  EXPECT_GE(rec.replicas(), 1);

  // Per container on /metrics; the unnamed container's gauges are gone with it.
  const std::string metrics = Metrics();
  for (const v1::ContainerRecommendation& c : rec.containers()) {
    const std::string container = "container=\"" + c.name() + "\"";
    EXPECT_DOUBLE_EQ(Gauge(metrics, "evoscale_recommendation_cpu_cores",
                           {kLabels, container, "bound=\"target\""}),
                     c.cpu_cores().target());
    EXPECT_DOUBLE_EQ(Gauge(metrics, "evoscale_recommendation_memory_bytes",
                           {kLabels, container, "bound=\"lower_bound\""}),
                     c.memory_bytes().lower_bound());
  }
  for (const std::string& line : Samples(metrics, "evoscale_recommendation_cpu_cores", {kLabels})) {
    EXPECT_THAT(line, HasSubstr("container=")) << metrics;
  }

  // The VPA names both containers, and nothing was assumed.
  const std::string out = dir_.path() + "/rec.yaml";
  const std::string cmd = BinDir() + "/evoscale --server " + server_->grpc_address() +
                          " recommend default/ranker -o kubernetes >" + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const YAML::Node vpa = YAML::LoadAllFromFile(out).at(0);
  const YAML::Node entries = vpa["status"]["recommendation"]["containerRecommendations"];
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]["containerName"].as<std::string>(), "envoy");
  EXPECT_EQ(entries[1]["containerName"].as<std::string>(), "server");
  EXPECT_EQ(
      entries[1]["upperBound"]["memory"].as<std::string>(),
      std::to_string(static_cast<int64_t>(std::ceil(server.memory_bytes().upper_bound() - 1e-9))));
  EXPECT_FALSE(vpa["metadata"]["annotations"]["evoscale.io/note"]);

  // A restart rebuilds each container's models from the stored telemetry.
  Start();
  const v1::Recommendation again = Recommend();
  ASSERT_EQ(again.containers_size(), 2);
  EXPECT_DOUBLE_EQ(again.containers(1).cpu_cores().target(), server.cpu_cores().target());
  EXPECT_DOUBLE_EQ(again.cpu_cores().target(), rec.cpu_cores().target());
}

// Each container name costs load models: a workload takes at most 64, and says so.
TEST_F(AutoscalerE2eTest, AWorkloadTakesAtMost64ContainerNames) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w).ok());
  v1::TelemetryBatch batch;
  const double now = NowSeconds();
  for (int c = 0; c < 66; ++c) {
    v1::TelemetrySample* s = batch.add_samples();
    s->set_workload(kWorkload);
    s->set_instance("pod-0");
    s->set_container("c" + std::to_string(c % 65));  // c0 twice: a name it has is fine
    *s->mutable_time() = Time(now - 60 + (c / 65));
    s->set_cpu_cores(0.1);
  }
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report({batch}, &resp).ok());
  EXPECT_EQ(resp.accepted(), 65);
  EXPECT_THAT(resp.rejected_by_reason(), UnorderedElementsAre(Pair("too_many_containers", 1)));
  EXPECT_THAT(resp.errors(0), HasSubstr("samples[64]: container: \"c64\" would be one more"));
  EXPECT_EQ(Recommend().containers_size(), 64);
}

// The metric conventions, checked on the real /metrics: _total only on counters (and every
// counter has it), no name mixing resources (the unit is in the name), and workloads as
// Kubernetes' namespace and name.
TEST_F(AutoscalerE2eTest, MetricsFollowPrometheusNamingConventions) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w).ok());
  ASSERT_TRUE(PutWorkload("solo", &w).ok());
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(GoodTelemetry(NowSeconds()), &resp).ok());
  v1::TelemetryBatch solo;
  v1::TelemetrySample* s = solo.add_samples();
  s->set_workload("solo");
  s->set_instance("solo-0");
  *s->mutable_time() = Time(NowSeconds());
  s->set_cpu_cores(1);
  ASSERT_TRUE(Report({solo}, &resp).ok());
  const std::string metrics = Metrics();

  std::map<std::string, std::string> types;  // name -> counter, gauge, histogram
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    ASSERT_EQ(words.size(), 4u) << line;
    types[words[2]] = words[3];
  }
  for (const auto& [name, type] : types) {
    EXPECT_EQ(absl::EndsWith(name, "_total"), type == "counter") << name << " is a " << type;
  }
  EXPECT_EQ(types["evoscale_telemetry_samples_total"], "counter");
  EXPECT_EQ(types["evoscale_store_operations_total"], "counter");
  for (const char* name :
       {"evoscale_recommendation_cpu_cores", "evoscale_recommendation_memory_bytes",
        "evoscale_recommended_replicas", "evoscale_sqlite_memory_bytes",
        "evoscale_telemetry_series"}) {
    EXPECT_EQ(types[name], "gauge") << name;
  }
  EXPECT_EQ(types["evoscale_rpc_latency_seconds"], "histogram");
  for (const char* mixed :
       {"evoscale_recommendation", "evoscale_capacity", "evoscale_capacity_requested"}) {
    EXPECT_FALSE(types.contains(mixed)) << mixed;
  }
  EXPECT_THAT(metrics, Not(HasSubstr("resource=\""))) << "one resource per metric name";
  // Workloads: namespace and name, never the slashed name; a name without a namespace is in
  // "default".
  EXPECT_THAT(metrics, Not(HasSubstr("workload=\"default/")));
  EXPECT_THAT(Samples(metrics, "evoscale_recommendation_cpu_cores",
                      {"namespace=\"default\",workload=\"solo\""}),
              SizeIs(4));  // target, lower_bound, upper_bound, limit
  for (const std::string& line : Samples(metrics, "evoscale_recommended_replicas", {})) {
    EXPECT_THAT(line, HasSubstr("namespace=\"default\"")) << line;
  }
}

// Requests apart from limits, set on the workload: the request at a usage percentile, the
// limit where OOMs and throttling happen, both over gRPC, in the gauges and in the YAML; the
// workload's risk settings survive a restart; bad values are refused by name.
TEST_F(AutoscalerE2eTest, RequestsApartFromLimitsReachGrpcMetricsAndYaml) {
  grpc::ClientContext put_ctx;
  v1::PutWorkloadRequest put;
  put.mutable_workload()->set_name(kWorkload);
  put.mutable_workload()->set_request_percentile(0.5);
  put.mutable_workload()->set_oom_rate(0.001);
  put.mutable_workload()->set_startup_delay_seconds(180);
  put.mutable_workload()->set_demand_quantile(0.6);
  v1::Workload w;
  ASSERT_TRUE(stub_->PutWorkload(&put_ctx, put, &w).ok());
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(Report(GoodTelemetry(NowSeconds()), &resp).ok());
  const v1::Recommendation rec = Recommend();
  // The replica count covers the workload's own quantile of the forecast errors.
  EXPECT_THAT(rec.explanation(), HasSubstr("+ q60 error"));
  // CPU follows a sine: its median is well under the limit that covers the peaks.
  EXPECT_LT(rec.cpu_cores().target(), 0.9 * rec.cpu_cores().limit());
  EXPECT_LE(rec.memory_bytes().target(), rec.memory_bytes().limit());
  EXPECT_GE(rec.memory_bytes().limit(), 816e6);  // above the peak
  ASSERT_EQ(rec.containers_size(), 1);
  EXPECT_DOUBLE_EQ(rec.containers(0).cpu_cores().limit(), rec.cpu_cores().limit());
  EXPECT_DOUBLE_EQ(
      Gauge(Metrics(), "evoscale_recommendation_cpu_cores", {kLabels, "bound=\"limit\""}),
      rec.cpu_cores().limit());
  const std::string out = dir_.path() + "/limits.yaml";
  const std::string cmd = BinDir() + "/evoscale --server " + server_->grpc_address() +
                          " recommend default/ranker -o kubernetes >" + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const YAML::Node vpa = YAML::LoadAllFromFile(out)[0];
  EXPECT_THAT(vpa["metadata"]["annotations"]["evoscale.io/limits"].as<std::string>(),
              HasSubstr("ranker: cpu="));
  Start();  // the settings come back from the store
  v1::Workload got;
  ASSERT_TRUE(GetWorkload(kWorkload, &got).ok());
  EXPECT_DOUBLE_EQ(got.request_percentile(), 0.5);
  EXPECT_DOUBLE_EQ(got.oom_rate(), 0.001);
  EXPECT_DOUBLE_EQ(got.startup_delay_seconds(), 180);
  EXPECT_DOUBLE_EQ(got.demand_quantile(), 0.6);
  EXPECT_DOUBLE_EQ(Recommend().cpu_cores().limit(), rec.cpu_cores().limit());
  const struct {
    void (*set)(v1::Workload*);
    const char* message;
  } bad[] = {
      {[](v1::Workload* x) { x->set_request_percentile(1); },
       "workload.request_percentile: 1 must be in [0, 1) (0: request = limit)"},
      {[](v1::Workload* x) { x->set_oom_rate(-0.1); },
       "workload.oom_rate: -0.1 must be in [0, 0.5] (a rate per sample; 0 for the default)"},
      {[](v1::Workload* x) { x->set_throttle_rate(0.9); },
       "workload.throttle_rate: 0.9 must be in [0, 0.5] (a rate per sample; 0 for the default)"},
      {[](v1::Workload* x) { x->set_startup_delay_seconds(1e6); },
       "workload.startup_delay_seconds: 1e+06 must be in [0, 86400]"},
      {[](v1::Workload* x) { x->set_demand_quantile(0.3); },
       "workload.demand_quantile: 0.3 must be 0 (the default 0.75) or in [0.5, 1)"},
      {[](v1::Workload* x) { x->set_demand_quantile(1); },
       "workload.demand_quantile: 1 must be 0 (the default 0.75) or in [0.5, 1)"},
  };
  for (const auto& b : bad) {
    grpc::ClientContext ctx;
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(kWorkload);
    b.set(req.mutable_workload());
    v1::Workload ignored;
    const grpc::Status st = stub_->PutWorkload(&ctx, req, &ignored);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.message;
    EXPECT_EQ(st.error_message(), b.message);
  }
  // Nothing stored changed.
  v1::Workload again;
  ASSERT_TRUE(GetWorkload(kWorkload, &again).ok());
  EXPECT_DOUBLE_EQ(again.request_percentile(), 0.5);
}

// Durations are seconds in the API: a workload's latency objective too, validated by its name.
TEST_F(AutoscalerE2eTest, WorkloadLatencyObjectiveIsInSeconds) {
  v1::Workload w;
  ASSERT_TRUE(PutWorkload(kWorkload, &w, 0.25).ok());
  EXPECT_DOUBLE_EQ(w.latency_slo_seconds(), 0.25);
  Start();  // and read back from the store
  v1::Workload got;
  ASSERT_TRUE(GetWorkload(kWorkload, &got).ok());
  EXPECT_DOUBLE_EQ(got.latency_slo_seconds(), 0.25);
  grpc::Status st = PutWorkload(kWorkload, &w, -1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("workload.latency_slo_seconds"));
}

}  // namespace
}  // namespace evoscale
