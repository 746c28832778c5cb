// Fuzzes the HTTP side's request target (path and query) and authorization header against a
// real StudyCore and AutoscalerCore over SQLite files holding a study, its trials and a
// workload with samples. Input: the target, then optionally "\n" and the Authorization value
// (then the server requires a token, as with --auth-tokens). A response is always JSON, text
// or a dashboard file with a status code HttpApi can send.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/clock.h"
#include "service/http_api.h"
#include "service/metrics.h"
#include "service/store/store.h"
#include "service/store/telemetry_store.h"
#include "service/study/study_core.h"

namespace {

namespace v1 = evoscale::v1;
namespace svc = evoscale::service;

constexpr char kToken[] = "reader-token-0123456789";

struct Service {
  std::unique_ptr<svc::Store> store;
  std::unique_ptr<svc::StudyCore> core;
  std::unique_ptr<svc::TelemetryStore> telemetry;
  std::unique_ptr<svc::AutoscalerCore> autoscaler;
  svc::ServiceMetrics metrics;
  svc::TokenAuth open;  // no tokens: every request passes
  std::unique_ptr<svc::TokenAuth> tokens;
};

template <typename T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "http_fuzz setup: %s\n", v.status().ToString().c_str());
    std::abort();
  }
  return *std::move(v);
}

Service& GetService() {
  static Service* service = [] {
    char dir[] = "/tmp/http_fuzz.XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    auto* s = new Service;
    s->store = Must(svc::Store::Open(std::string(dir) + "/s.db", svc::Durability::kProcessCrash));
    s->core = Must(svc::StudyCore::Create(s->store.get(), svc::Clock::Real()));
    s->telemetry =
        Must(svc::TelemetryStore::Open(std::string(dir) + "/t.db", svc::Durability::kProcessCrash));
    s->autoscaler = Must(svc::AutoscalerCore::Create(s->telemetry.get(), svc::Clock::Real()));
    s->tokens = Must(svc::TokenAuth::FromString(std::string(kToken) + " reader\n", "tokens"));

    v1::CreateStudyRequest create;
    create.mutable_study()->set_display_name("fuzz");
    v1::StudySpec* spec = create.mutable_study()->mutable_spec();
    v1::MetricSpec* metric = spec->add_metrics();
    metric->set_name("auc");
    metric->set_goal(v1::MetricSpec::MAXIMIZE);
    v1::ParameterSpec* lr = spec->add_parameters();
    lr->set_name("lr");
    lr->mutable_double_spec()->set_min(1e-4);
    lr->mutable_double_spec()->set_max(1);
    v1::ParameterSpec* opt = spec->add_parameters();
    opt->set_name("opt");
    opt->mutable_categorical_spec()->add_values("adam");
    opt->mutable_categorical_spec()->add_values("sgd");
    const v1::Study study = Must(s->core->Call(create));
    v1::SuggestTrialsRequest suggest;
    suggest.set_parent(study.name());
    suggest.set_suggestion_count(4);
    suggest.set_client_id("fuzz");
    const v1::SuggestTrialsResponse trials = Must(s->core->Call(suggest));
    for (int i = 0; i < 2; ++i) {
      v1::CompleteTrialRequest complete;
      complete.set_name(trials.trials(i).name());
      (*complete.mutable_final_measurement()->mutable_metrics())["auc"] = 0.6 + 0.1 * i;
      Must(s->core->Call(complete));
    }
    v1::PutWorkloadRequest put;
    put.mutable_workload()->set_name("default/ranker");
    Must(s->autoscaler->PutWorkload(put));
    v1::TelemetryBatch batch;
    for (int i = 0; i < 20; ++i) {
      v1::TelemetrySample* sample = batch.add_samples();
      sample->set_workload("default/ranker");
      sample->set_instance("pod-0");
      sample->mutable_time()->set_seconds(1700000000 + 60 * i);
      sample->set_cpu_cores(0.5 + 0.01 * i);
      sample->set_memory_bytes(1e9);
      sample->set_qps(100);
    }
    v1::ReportTelemetryResponse response;
    if (!s->autoscaler->Ingest(batch, &response).ok()) std::abort();
    return s;
  }();
  return *service;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Service& s = GetService();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string target = input.substr(0, newline);
  const std::string authorization = newline == std::string::npos ? "" : input.substr(newline + 1);
  const svc::TokenAuth* auth = newline == std::string::npos ? &s.open : s.tokens.get();
  svc::HttpApi api(s.core.get(), s.autoscaler.get(), &s.metrics, auth);
  const svc::HttpResponse r = api.Handle("GET", target, authorization);
  if (r.status < 200 || r.status > 599 || r.content_type.empty()) {
    std::fprintf(stderr, "http_fuzz: status %d, content type \"%s\"\n", r.status,
                 r.content_type.c_str());
    std::abort();
  }
  return 0;
}
