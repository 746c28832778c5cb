#include "service/metrics.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/scheduler/scheduler.h"
#include "service/study/study_core.h"

namespace evoscale::service {

ServiceMetrics::ServiceMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      rpcs_(prometheus::BuildCounter()
                .Name("evoscale_rpcs_total")
                .Help("gRPC calls by method and status code")
                .Register(*registry_)),
      latency_(prometheus::BuildHistogram()
                   .Name("evoscale_rpc_latency_seconds")
                   .Help("gRPC call latency by method")
                   .Register(*registry_)),
      trials_(prometheus::BuildGauge()
                  .Name("evoscale_trials")
                  .Help("Trials by state, over all studies")
                  .Register(*registry_)),
      studies_(prometheus::BuildGauge()
                   .Name("evoscale_studies")
                   .Help("Studies by state")
                   .Register(*registry_)),
      recommendation_(prometheus::BuildGauge()
                          .Name("evoscale_recommendation")
                          .Help("Recommended container resources by workload, resource and bound")
                          .Register(*registry_)),
      replicas_(prometheus::BuildGauge()
                    .Name("evoscale_recommended_replicas")
                    .Help("Recommended replica count by workload")
                    .Register(*registry_)),
      samples_(prometheus::BuildGauge()
                   .Name("evoscale_telemetry_samples_total")
                   .Help("Telemetry samples since start, accepted or rejected by reason")
                   .Register(*registry_)),
      store_(prometheus::BuildGauge()
                 .Name("evoscale_store_operations_total")
                 .Help("Study store since start: writes (one per mutating call) and commits "
                       "(transactions; several writes share one under group commit)")
                 .Register(*registry_)),
      enforcement_(prometheus::BuildGauge()
                       .Name("evoscale_trial_enforcement")
                       .Help("How managed trials' limits are enforced (1 for the mode in "
                             "force): a cgroup, or sampling /proc and why")
                       .Register(*registry_)),
      capacity_(prometheus::BuildGauge()
                    .Name("evoscale_capacity")
                    .Help("What managed trials may request together (--capacity)")
                    .Register(*registry_)),
      capacity_requested_(prometheus::BuildGauge()
                              .Name("evoscale_capacity_requested")
                              .Help("The requests of the running managed trials, summed")
                              .Register(*registry_)),
      studies_waiting_(prometheus::BuildGauge()
                           .Name("evoscale_studies_waiting")
                           .Help("Active managed studies whose next trial waits for capacity")
                           .Register(*registry_)),
      sqlite_memory_(prometheus::BuildGauge()
                         .Name("evoscale_sqlite_memory_bytes")
                         .Help("Heap memory SQLite holds in this process (page caches, "
                               "statements), over both databases")
                         .Register(*registry_)
                         .Add({})) {}

void ServiceMetrics::AttachScheduler(Scheduler* scheduler) {
  absl::MutexLock lock(&scheduler_mu_);
  scheduler_ = scheduler;
}

void ServiceMetrics::SetTrialEnforcement(const std::string& mode) {
  enforcement_.Add({{"mode", mode}}).Set(1);
}

void ServiceMetrics::RecordRpc(const std::string& method, const std::string& code, double seconds) {
  prometheus::Histogram* h;
  prometheus::Counter* c;
  {
    absl::MutexLock lock(&mu_);
    auto [hit, hnew] = latency_by_method_.try_emplace(method, nullptr);
    if (hnew) {
      hit->second = &latency_.Add(
          {{"method", method}},
          prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                  0.01, 0.025, 0.05, 0.1, 0.25, 1, 5});
    }
    h = hit->second;
    auto [cit, cnew] = rpcs_by_key_.try_emplace(absl::StrCat(method, "/", code), nullptr);
    if (cnew) cit->second = &rpcs_.Add({{"method", method}, {"code", code}});
    c = cit->second;
  }
  h->Observe(seconds);
  c->Increment();
}

std::string ServiceMetrics::Scrape(StudyCore* core, AutoscalerCore* autoscaler) {
  {
    absl::MutexLock lock(&scheduler_mu_);  // held: the scheduler cannot go away meanwhile
    if (scheduler_ != nullptr) {
      const v1::ResourceRequest capacity = scheduler_->capacity();
      const v1::ResourceRequest requested = scheduler_->requested();
      for (const auto& [family, r] :
           {std::pair{&capacity_, &capacity}, std::pair{&capacity_requested_, &requested}}) {
        family->Add({{"resource", "cpu_cores"}}).Set(r->cpu_cores());
        family->Add({{"resource", "memory_bytes"}}).Set(static_cast<double>(r->memory_bytes()));
        family->Add({{"resource", "gpus"}}).Set(r->gpus());
      }
      studies_waiting_.Add({}).Set(scheduler_->waiting_studies());
    }
  }
  if (core != nullptr) {
    TrialCounts counts = core->Counts();
    for (int s = v1::Trial::REQUESTED; s <= v1::Trial::FAILED; ++s) {
      auto state = static_cast<v1::Trial::State>(s);
      trials_.Add({{"state", v1::Trial::State_Name(state)}})
          .Set(static_cast<double>(counts.by_state[state]));
    }
    for (int s = v1::Study::ACTIVE; s <= v1::Study::COMPLETED; ++s) {
      auto state = static_cast<v1::Study::State>(s);
      studies_.Add({{"state", v1::Study::State_Name(state)}})
          .Set(static_cast<double>(counts.studies_by_state[state]));
    }
    store_.Add({{"op", "write"}}).Set(static_cast<double>(counts.store_writes));
    sqlite_memory_.Set(static_cast<double>(sqlite3_memory_used()));
    store_.Add({{"op", "commit"}}).Set(static_cast<double>(counts.store_commits));
  }
  if (autoscaler != nullptr) {
    for (const v1::Recommendation& r : autoscaler->AllRecommendations()) {
      const struct {
        const char* name;
        const v1::ResourceBounds& b;
      } resources[] = {{"cpu_cores", r.cpu_cores()},
                       {"memory_bytes", r.memory_bytes()},
                       {"gpu_memory_bytes", r.gpu_memory_bytes()}};
      for (const auto& [name, b] : resources) {
        if (!r.has_gpu_memory_bytes() && std::string(name) == "gpu_memory_bytes") continue;
        for (const auto& [bound, value] :
             {std::pair{"target", b.target()}, std::pair{"lower_bound", b.lower_bound()},
              std::pair{"upper_bound", b.upper_bound()}}) {
          recommendation_.Add({{"workload", r.workload()}, {"resource", name}, {"bound", bound}})
              .Set(value);
        }
      }
      replicas_.Add({{"workload", r.workload()}}).Set(r.replicas());
    }
    samples_.Add({{"result", "accepted"}}).Set(static_cast<double>(autoscaler->accepted_total()));
    for (const auto& [reason, n] : autoscaler->rejected_by_reason_total()) {
      samples_.Add({{"result", reason}}).Set(static_cast<double>(n));
    }
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace evoscale::service
