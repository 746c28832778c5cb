#include "load_model/replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace evoscale::load_model {

absl::StatusOr<Policy> ParsePolicy(std::string_view name) {
  if (name == "evoscale") return Policy::kEvoscale;
  if (name == "vpa") return Policy::kVpa;
  if (name == "hpa") return Policy::kHpa;
  return absl::InvalidArgumentError(
      absl::StrFormat("policy \"%s\": must be evoscale, vpa or hpa", std::string(name)));
}

std::string_view PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kEvoscale:
      return "evoscale";
    case Policy::kVpa:
      return "vpa";
    case Policy::kHpa:
      return "hpa";
  }
  return "unknown";
}

absl::StatusOr<TraceKind> ParseTraceKind(std::string_view name) {
  if (name == "bitbrains") return TraceKind::kBitbrains;
  if (name == "alibaba-genai") return TraceKind::kAlibabaGenAi;
  if (name == "azure-llm") return TraceKind::kAzureLlm;
  return absl::InvalidArgumentError(
      absl::StrFormat("trace \"%s\": must be bitbrains, alibaba-genai or azure-llm", std::string(name)));
}

std::string_view TraceKindName(TraceKind kind) {
  switch (kind) {
    case TraceKind::kBitbrains:
      return "bitbrains";
    case TraceKind::kAlibabaGenAi:
      return "alibaba-genai";
    case TraceKind::kAzureLlm:
      return "azure-llm";
  }
  return "unknown";
}

bool IsReplicaTrace(TraceKind kind) { return kind != TraceKind::kBitbrains; }

std::unique_ptr<ResourceRecommender> MakeResourceRecommender(const ReplayOptions& options) {
  switch (options.policy) {
    case Policy::kEvoscale:
      return std::make_unique<EvoscaleResourceRecommender>(options.evoscale_resources);
    case Policy::kVpa:
      return std::make_unique<VpaRecommender>(options.vpa);
    case Policy::kHpa:
      return nullptr;
  }
  return nullptr;
}

std::unique_ptr<ReplicaRecommender> MakeReplicaRecommender(const ReplayOptions& options) {
  switch (options.policy) {
    case Policy::kEvoscale: {
      EvoscaleReplicaOptions o = options.evoscale_replicas;
      o.target_utilization = options.target_utilization;
      o.min_replicas = options.min_replicas;
      o.max_replicas = options.max_replicas;
      o.startup_delay = options.startup_delay;
      return std::make_unique<EvoscaleReplicaRecommender>(o);
    }
    case Policy::kHpa: {
      HpaOptions o = options.hpa;
      o.target_utilization = options.target_utilization;
      o.min_replicas = options.min_replicas;
      o.max_replicas = options.max_replicas;
      return std::make_unique<HpaController>(o);
    }
    case Policy::kVpa:
      return nullptr;
  }
  return nullptr;
}

SeriesReport ReplayVm(const VmTrace& vm, ResourceRecommender& recommender,
                      absl::Duration warmup) {
  SeriesReport r;
  r.name = vm.name;
  if (vm.samples.empty()) return r;
  const absl::Time scored_from = vm.samples.front().time + warmup;
  double slack_cpu = 0, slack_memory = 0, slack_cpu_limit = 0, slack_memory_limit = 0;
  bool have_last = false;
  ResourceRecommendation last;
  double request_cpu = vm.samples.front().cpu_capacity_cores;  // What the VM ran with.
  auto slack = [](double line, double usage) {
    return line > 0 ? std::max(0.0, (line - usage) / line) : 0.0;
  };
  for (size_t i = 0; i < vm.samples.size(); ++i) {
    const VmSample& s = vm.samples[i];
    if (i > 0) {
      // The recommendation in force for this sample, from earlier samples only.
      const ResourceRecommendation rec = recommender.Recommend(s.time);
      const double cpu = rec.cpu_cores.target, cpu_limit = LimitOf(rec.cpu_cores);
      const double memory = rec.memory_bytes.target, memory_limit = LimitOf(rec.memory_bytes);
      request_cpu = cpu;
      const bool oom = s.memory_bytes > memory_limit;
      if (oom) recommender.RecordOom(s.time, memory_limit);
      if (s.time >= scored_from) {
        ++r.samples;
        slack_cpu += slack(cpu, s.cpu_cores);
        slack_memory += slack(memory, s.memory_bytes);
        slack_cpu_limit += slack(cpu_limit, s.cpu_cores);
        slack_memory_limit += slack(memory_limit, s.memory_bytes);
        if (s.cpu_cores > cpu_limit) ++r.underprovisioned_samples;
        if (s.cpu_cores > cpu) ++r.cpu_over_request_samples;
        if (s.memory_bytes > memory) ++r.memory_over_request_samples;
        if (oom) ++r.oom_events;
        if (have_last &&
            (cpu != last.cpu_cores.target || memory != last.memory_bytes.target ||
             cpu_limit != LimitOf(last.cpu_cores) || memory_limit != LimitOf(last.memory_bytes))) {
          ++r.changes;
        }
      }
      have_last = true;
      last = rec;
    }
    UsageSample u;
    u.time = s.time;
    u.cpu_cores = s.cpu_cores;
    u.memory_bytes = s.memory_bytes;
    u.cpu_request_cores = request_cpu;
    recommender.AddSample(u);
  }
  if (r.samples > 0) {
    r.relative_slack_cpu = slack_cpu / r.samples;
    r.relative_slack_memory = slack_memory / r.samples;
    r.relative_slack_cpu_limit = slack_cpu_limit / r.samples;
    r.relative_slack_memory_limit = slack_memory_limit / r.samples;
  }
  return r;
}

SeriesReport ReplayReplicas(const ReplicaTrace& trace, ReplicaRecommender& recommender,
                            double target_utilization, int min_replicas, int max_replicas,
                            absl::Time scored_from, absl::Time scored_until,
                            absl::Duration startup_delay) {
  SeriesReport r;
  r.name = trace.name;
  if (trace.steps.empty()) return r;
  // Every policy starts from the replicas the first step needed, all ready.
  int ready = std::clamp(
      static_cast<int>(std::ceil(trace.steps.front().demand / target_utilization - 1e-9)),
      min_replicas, max_replicas);
  std::deque<absl::Time> starting;  // When each starting replica is ready, oldest first.
  double slack = 0;
  for (size_t i = 1; i < trace.steps.size(); ++i) {
    const ReplicaStep& prev = trace.steps[i - 1];
    const ReplicaStep& s = trace.steps[i];
    LoadSample sample;
    sample.time = prev.time;
    sample.replicas = ready;
    sample.utilization = ready > 0 ? prev.demand / ready : 0;
    sample.qps = prev.qps;
    sample.latency_ms = prev.latency_ms;
    recommender.AddSample(sample);
    const int current = ready + static_cast<int>(starting.size());
    const int next = std::clamp(recommender.Recommend(prev.time, current).replicas,
                                std::max(min_replicas, 0), max_replicas);
    for (int k = current; k < next; ++k) starting.push_back(prev.time + startup_delay);
    for (int k = next; k < current; ++k) {
      if (!starting.empty()) {
        starting.pop_back();
      } else {
        --ready;
      }
    }
    // Replicas whose start-up is over by the start of this step serve it.
    while (!starting.empty() && starting.front() <= prev.time) {
      starting.pop_front();
      ++ready;
    }
    const double dt = absl::ToDoubleSeconds(s.time - prev.time);
    const bool changed = next != current;
    if (s.time < scored_from || s.time >= scored_until) continue;
    ++r.samples;
    if (changed) ++r.scaling_actions;
    r.replica_hours += (ready + static_cast<double>(starting.size())) * dt / 3600.0;
    const bool over = ready > 0 ? s.demand / ready > target_utilization : s.demand > 0;
    if (over) {
      r.minutes_over_target += dt / 60.0;
      ++r.underprovisioned_samples;
    }
    if (ready > 0) slack += std::max(0.0, (ready - s.demand) / ready);
  }
  r.changes = r.scaling_actions;
  if (r.samples > 0) r.relative_slack_replicas = slack / r.samples;
  return r;
}

ReplayReport ReplayVms(const std::vector<VmTrace>& vms, const ReplayOptions& options) {
  ReplayReport report;
  report.policy = std::string(PolicyName(options.policy));
  report.trace = std::string(TraceKindName(options.trace));
  int64_t under = 0, cpu_over = 0, memory_over = 0;
  for (const VmTrace& vm : vms) {
    std::unique_ptr<ResourceRecommender> rec = MakeResourceRecommender(options);
    SeriesReport s = ReplayVm(vm, *rec, options.warmup);
    report.samples += s.samples;
    report.relative_slack_cpu_sum += s.relative_slack_cpu;
    report.relative_slack_memory_sum += s.relative_slack_memory;
    report.relative_slack_cpu_limit_sum += s.relative_slack_cpu_limit;
    report.relative_slack_memory_limit_sum += s.relative_slack_memory_limit;
    report.oom_events += s.oom_events;
    report.changes += s.changes;
    under += s.underprovisioned_samples;
    cpu_over += s.cpu_over_request_samples;
    memory_over += s.memory_over_request_samples;
    report.series.push_back(std::move(s));
  }
  const double n = static_cast<double>(report.series.size());
  report.relative_slack_cpu = report.relative_slack_cpu_sum / n;
  report.relative_slack_memory = report.relative_slack_memory_sum / n;
  const auto fraction = [&](int64_t count) {
    return report.samples > 0 ? static_cast<double>(count) / report.samples : 0;
  };
  report.underprovisioned_fraction = fraction(under);
  report.cpu_over_request_fraction = fraction(cpu_over);
  report.memory_over_request_fraction = fraction(memory_over);
  return report;
}

absl::StatusOr<ReplayReport> Replay(const ReplayOptions& options) {
  ReplayReport report;
  report.policy = std::string(PolicyName(options.policy));
  report.trace = std::string(TraceKindName(options.trace));
  report.replica_trace = IsReplicaTrace(options.trace);
  if (!report.replica_trace) {
    if (options.policy == Policy::kHpa) {
      return absl::InvalidArgumentError(
          "policy \"hpa\" scales replicas; trace \"bitbrains\" is per-VM usage (use evoscale "
          "or vpa)");
    }
    if (options.startup_delay != absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "startup_delay applies to replica traces; trace \"bitbrains\" is per-VM usage");
    }
    absl::StatusOr<std::vector<VmTrace>> vms = ReadBitbrains(options.path);
    if (!vms.ok()) return vms.status();
    return ReplayVms(*vms, options);
  }
  if (options.startup_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "startup_delay must be >= 0, got %s", absl::FormatDuration(options.startup_delay)));
  }
  if (options.policy == Policy::kVpa) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy \"vpa\" sizes containers; trace \"%s\" is a replica trace (use evoscale or "
        "hpa)",
        report.trace));
  }
  absl::StatusOr<ReplicaTrace> trace =
      options.trace == TraceKind::kAlibabaGenAi ? ReadAlibabaGenAi(options.path)
                                                : ReadAzureLlm(options.path, options.azure);
  if (!trace.ok()) return trace.status();
  std::unique_ptr<ReplicaRecommender> rec = MakeReplicaRecommender(options);
  SeriesReport s = ReplayReplicas(*trace, *rec, options.target_utilization,
                                  options.min_replicas, options.max_replicas,
                                  absl::InfinitePast(), absl::InfiniteFuture(),
                                  options.startup_delay);
  report.samples = s.samples;
  report.changes = s.changes;
  report.relative_slack_replicas = s.relative_slack_replicas;
  report.replica_hours = s.replica_hours;
  report.minutes_over_target = s.minutes_over_target;
  report.scaling_actions = s.scaling_actions;
  report.underprovisioned_fraction =
      s.samples > 0 ? static_cast<double>(s.underprovisioned_samples) / s.samples : 0;
  report.series.push_back(std::move(s));
  return report;
}

namespace {

using Json = nlohmann::ordered_json;

// `v` to 6 significant digits, or null when not finite. The JSON writer prints the shortest text
// that reads back as the same double, so the rounded value shows those digits and no more.
Json Figure(double v) {
  if (!std::isfinite(v)) return nullptr;
  double rounded = 0;
  (void)absl::SimpleAtod(absl::StrFormat("%.6g", v), &rounded);  // printf's own output
  return rounded;
}

}  // namespace

std::string ReplayReport::ToJson() const {
  const bool v = !replica_trace;
  // Fields that do not apply to the trace are null.
  auto vertical = [&](double x) { return v ? Figure(x) : Json(nullptr); };
  auto horizontal = [&](double x) { return v ? Json(nullptr) : Figure(x); };
  Json series_json = Json::array();
  for (const SeriesReport& s : series) {
    Json fields = {{"name", s.name}, {"samples", s.samples}};
    if (v) {
      fields["relative_slack_cpu"] = Figure(s.relative_slack_cpu);
      fields["relative_slack_memory"] = Figure(s.relative_slack_memory);
      fields["oom_events"] = s.oom_events;
      fields["underprovisioned_samples"] = s.underprovisioned_samples;
      fields["changes"] = s.changes;
      fields["relative_slack_cpu_limit"] = Figure(s.relative_slack_cpu_limit);
      fields["relative_slack_memory_limit"] = Figure(s.relative_slack_memory_limit);
      fields["cpu_over_request_samples"] = s.cpu_over_request_samples;
      fields["memory_over_request_samples"] = s.memory_over_request_samples;
    } else {
      fields["replica_hours"] = Figure(s.replica_hours);
      fields["minutes_over_target"] = Figure(s.minutes_over_target);
      fields["scaling_actions"] = s.scaling_actions;
      fields["relative_slack_replicas"] = Figure(s.relative_slack_replicas);
    }
    series_json.push_back(std::move(fields));
  }
  const Json report = {
      {"policy", policy},
      {"trace", trace},
      {"samples", samples},
      {"relative_slack_cpu", vertical(relative_slack_cpu)},
      {"relative_slack_memory", vertical(relative_slack_memory)},
      {"relative_slack_cpu_sum", vertical(relative_slack_cpu_sum)},
      {"relative_slack_memory_sum", vertical(relative_slack_memory_sum)},
      {"oom_events", oom_events},
      {"underprovisioned_fraction", Figure(underprovisioned_fraction)},
      {"changes", changes},
      {"replica_hours", horizontal(replica_hours)},
      {"minutes_over_target", horizontal(minutes_over_target)},
      {"scaling_actions", v ? Json(nullptr) : Json(scaling_actions)},
      {"relative_slack_replicas", horizontal(relative_slack_replicas)},
      {"relative_slack_cpu_limit_sum", vertical(relative_slack_cpu_limit_sum)},
      {"relative_slack_memory_limit_sum", vertical(relative_slack_memory_limit_sum)},
      {"cpu_over_request_fraction", vertical(cpu_over_request_fraction)},
      {"memory_over_request_fraction", vertical(memory_over_request_fraction)},
      {"series", std::move(series_json)}};
  return report.dump(/*indent=*/-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace evoscale::load_model
