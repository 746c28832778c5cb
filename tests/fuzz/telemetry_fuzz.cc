// Fuzzes telemetry samples end to end: the text `evoscale telemetry send` reads (JSON lines or
// CSV) -> TelemetryBatch -> the service's validation and ingest (a real SQLite file). Whatever
// the input, ingest answers with every sample counted once, accepted or rejected.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/cli/cli.h"
#include "service/common/clock.h"
#include "service/store/telemetry_store.h"

namespace {

namespace v1 = evoscale::v1;
using evoscale::service::AutoscalerCore;

struct Service {
  std::unique_ptr<evoscale::service::TelemetryStore> store;
  std::unique_ptr<AutoscalerCore> core;
};

Service& GetService() {
  static Service* service = [] {
    char dir[] = "/tmp/telemetry_fuzz.XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    auto* s = new Service;
    auto store = evoscale::service::TelemetryStore::Open(
        std::string(dir) + "/t.db", evoscale::service::Durability::kProcessCrash);
    if (!store.ok()) std::abort();
    s->store = *std::move(store);
    auto core = AutoscalerCore::Create(s->store.get(), evoscale::service::Clock::Real());
    if (!core.ok()) std::abort();
    s->core = *std::move(core);
    for (const char* name : {"default/w", "default/serving"}) {
      v1::PutWorkloadRequest req;
      req.mutable_workload()->set_name(name);
      if (!s->core->PutWorkload(req).ok()) std::abort();
    }
    return s;
  }();
  return *service;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Service& service = GetService();
  absl::StatusOr<std::vector<v1::TelemetrySample>> samples = evoscale::cli::ParseTelemetryText(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz", "default/w");
  if (!samples.ok()) return 0;
  v1::TelemetryBatch batch;
  for (v1::TelemetrySample& s : *samples) *batch.add_samples() = std::move(s);
  v1::ReportTelemetryResponse response;
  if (!service.core->Ingest(batch, &response).ok()) return 0;
  if (response.accepted() + response.rejected() != batch.samples_size()) {
    std::fprintf(stderr, "telemetry_fuzz: %d samples, %lld accepted + %lld rejected\n",
                 batch.samples_size(), static_cast<long long>(response.accepted()),
                 static_cast<long long>(response.rejected()));
    std::abort();
  }
  return 0;
}
