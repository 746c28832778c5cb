#include "service/metrics.h"

#include <sqlite3.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/kubernetes_name.h"
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
      recommendation_cpu_(prometheus::BuildGauge()
                              .Name("evoscale_recommendation_cpu_cores")
                              .Help("Recommended CPU request of a workload's container, in "
                                    "cores, by bound")
                              .Register(*registry_)),
      recommendation_memory_(prometheus::BuildGauge()
                                 .Name("evoscale_recommendation_memory_bytes")
                                 .Help("Recommended memory request of a workload's container, "
                                       "in bytes, by bound")
                                 .Register(*registry_)),
      recommendation_gpu_memory_(prometheus::BuildGauge()
                                     .Name("evoscale_recommendation_gpu_memory_bytes")
                                     .Help("Recommended GPU memory of a workload's container, in "
                                           "bytes, by bound (containers that report it)")
                                     .Register(*registry_)),
      replicas_(prometheus::BuildGauge()
                    .Name("evoscale_recommended_replicas")
                    .Help("Recommended replica count by workload")
                    .Register(*registry_)),
      samples_(prometheus::BuildCounter()
                   .Name("evoscale_telemetry_samples_total")
                   .Help("Telemetry samples since start, accepted or rejected by reason")
                   .Register(*registry_)),
      trial_usage_errors_(prometheus::BuildCounter()
                              .Name("evoscale_trial_usage_errors_total")
                              .Help("Managed trials' usage samples (one a second per running "
                                    "trial) the telemetry store did not take, since start")
                              .Register(*registry_)
                              .Add({})),
      series_(prometheus::BuildGauge()
                  .Name("evoscale_telemetry_series")
                  .Help("Telemetry series (instance, container) held over every workload; "
                        "those silent past the bucket retention are forgotten")
                  .Register(*registry_)
                  .Add({})),
      leader_(prometheus::BuildGauge()
                  .Name("evoscale_leader")
                  .Help("1 while this replica runs the telemetry chores (compaction) for the "
                        "replicas sharing its database, else 0")
                  .Register(*registry_)
                  .Add({})),
      store_(prometheus::BuildCounter()
                 .Name("evoscale_store_operations_total")
                 .Help("Study store since start: writes (one per mutating call) and commits "
                       "(transactions; several writes share one under group commit)")
                 .Register(*registry_)),
      checkpoint_failures_(prometheus::BuildCounter()
                               .Name("evoscale_store_checkpoint_failures_total")
                               .Help("Background WAL checkpoints that failed since start, by "
                                     "database (nothing is lost; the log grows until one "
                                     "succeeds)")
                               .Register(*registry_)),
      enforcement_(prometheus::BuildGauge()
                       .Name("evoscale_trial_enforcement")
                       .Help("How managed trials' limits are enforced (1 for the mode in "
                             "force): a cgroup, or sampling /proc and why")
                       .Register(*registry_)),
      capacity_(AddResourceGauges("evoscale_capacity",
                                  "What managed trials may request together (--capacity)")),
      capacity_requested_(AddResourceGauges("evoscale_capacity_requested",
                                            "The requests of the running managed trials, summed")),
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

ServiceMetrics::ResourceGauges ServiceMetrics::AddResourceGauges(const std::string& prefix,
                                                                 const std::string& help) {
  auto gauge = [&](const char* unit, const char* what) -> prometheus::Family<prometheus::Gauge>& {
    return prometheus::BuildGauge()
        .Name(absl::StrCat(prefix, "_", unit))
        .Help(absl::StrCat(help, ": ", what))
        .Register(*registry_);
  };
  return {gauge("cpu_cores", "CPU cores"), gauge("memory_bytes", "memory in bytes"),
          gauge("gpus", "GPUs")};
}

void ServiceMetrics::AttachScheduler(Scheduler* scheduler) {
  absl::MutexLock lock(&scheduler_mu_);
  scheduler_ = scheduler;
}

std::optional<v1::ResourceRequest> ServiceMetrics::SchedulerCapacity() {
  absl::MutexLock lock(&scheduler_mu_);
  if (scheduler_ == nullptr) return std::nullopt;
  return scheduler_->capacity();
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

namespace {

// Advances `counter` to `total`, a count kept elsewhere that only grows.
void AdvanceTo(prometheus::Counter& counter, double total) {
  const double delta = total - counter.Value();
  if (delta > 0) counter.Increment(delta);
}

}  // namespace

void ServiceMetrics::ScrapeRecommendations(AutoscalerCore& autoscaler) {
  std::vector<std::pair<prometheus::Family<prometheus::Gauge>*, prometheus::Gauge*>> set;
  for (const v1::Recommendation& r : autoscaler.AllRecommendations()) {
    const auto [ns, name] = KubernetesNamespaceAndName(r.workload());
    for (const v1::ContainerRecommendation& c : r.containers()) {
      prometheus::Labels labels = {{"namespace", ns}, {"workload", name}};
      if (!c.name().empty()) labels["container"] = c.name();
      const struct {
        prometheus::Family<prometheus::Gauge>* family;
        const v1::ResourceBounds* bounds;
      } resources[] = {{&recommendation_cpu_, &c.cpu_cores()},
                       {&recommendation_memory_, &c.memory_bytes()},
                       {c.has_gpu_memory_bytes() ? &recommendation_gpu_memory_ : nullptr,
                        &c.gpu_memory_bytes()}};
      for (const auto& [family, b] : resources) {
        if (family == nullptr) continue;
        for (const auto& [bound, value] :
             {std::pair{"target", b->target()}, std::pair{"lower_bound", b->lower_bound()},
              std::pair{"upper_bound", b->upper_bound()},
              std::pair{"limit", b->limit()}}) {
          labels["bound"] = bound;
          prometheus::Gauge& g = family->Add(labels);
          g.Set(value);
          set.emplace_back(family, &g);
        }
      }
    }
    replicas_.Add({{"namespace", ns}, {"workload", name}}).Set(r.replicas());
  }
  // A container that left the recommendation leaves the gauges (else its last value stays).
  std::sort(set.begin(), set.end());
  for (const auto& old : recommendation_gauges_) {
    if (!std::binary_search(set.begin(), set.end(), old)) old.first->Remove(old.second);
  }
  recommendation_gauges_ = std::move(set);
}

std::string ServiceMetrics::Scrape(StudyCore* core, AutoscalerCore* autoscaler) {
  absl::MutexLock scrape_lock(&scrape_mu_);
  {
    absl::MutexLock lock(&scheduler_mu_);  // held: the scheduler cannot go away meanwhile
    if (scheduler_ != nullptr) {
      const v1::ResourceRequest capacity = scheduler_->capacity();
      const v1::ResourceRequest requested = scheduler_->requested();
      for (const auto& [gauges, r] :
           {std::pair{&capacity_, &capacity}, std::pair{&capacity_requested_, &requested}}) {
        gauges->cpu_cores.Add({}).Set(r->cpu_cores());
        gauges->memory_bytes.Add({}).Set(static_cast<double>(r->memory_bytes()));
        gauges->gpus.Add({}).Set(r->gpus());
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
    AdvanceTo(store_.Add({{"op", "write"}}), static_cast<double>(counts.store_writes));
    AdvanceTo(store_.Add({{"op", "commit"}}), static_cast<double>(counts.store_commits));
    AdvanceTo(checkpoint_failures_.Add({{"database", "study"}}),
              static_cast<double>(counts.store_checkpoint_failures));
    sqlite_memory_.Set(static_cast<double>(sqlite3_memory_used()));
  }
  if (autoscaler != nullptr) {
    ScrapeRecommendations(*autoscaler);
    AdvanceTo(samples_.Add({{"result", "accepted"}}),
              static_cast<double>(autoscaler->accepted_total()));
    series_.Set(static_cast<double>(autoscaler->series_count()));
    leader_.Set(autoscaler->chore_leader() ? 1 : 0);
    AdvanceTo(trial_usage_errors_, static_cast<double>(autoscaler->trial_usage_errors_total()));
    AdvanceTo(checkpoint_failures_.Add({{"database", "telemetry"}}),
              static_cast<double>(autoscaler->store_checkpoint_failures()));
    for (const auto& [reason, n] : autoscaler->rejected_by_reason_total()) {
      AdvanceTo(samples_.Add({{"result", reason}}), static_cast<double>(n));
    }
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace evoscale::service
