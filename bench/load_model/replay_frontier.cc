// The trade-off in plain sight: every policy swept over its risk setting on every trace, with
// each policy's default marked, scored by the replay (the same loops as `evoscale replay`).
//
//   replay_frontier [--data DIR] [--csv FILE]
//
// Bitbrains (VMs 1-5 tuning, 6-10 held out, and all ten): the VPA over its safety margin,
// evoscale over its risk level (target OOM rate and CPU overrun weight together), and
// evoscale with requests apart from limits (requests at p95 of usage); slack against OOM
// events (memory) and against under-provisioned samples (CPU). Where a frontier brackets the
// VPA default's OOM count (or under-provisioned fraction), the slack there is interpolated:
// "evoscale's slack at the VPA's risk". GenAI (first half tuning, second held out, and all):
// the HPA over its target utilisation and evoscale over its demand quantile, replica-hours
// against minutes over the (fixed, 60%) scoring target, with replicas serving at once and
// after a 3-minute start-up. --csv writes every point for plot_frontier.py.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "load_model/evoscale_policy.h"
#include "load_model/hpa.h"
#include "load_model/replay.h"
#include "load_model/traces.h"
#include "load_model/vpa.h"

namespace lm = evoscale::load_model;

namespace {

struct Part {
  const char* name;
  size_t lo, hi;  // VM index range
};
constexpr Part kParts[] = {{"held-out", 5, 10}, {"tuning", 0, 5}, {"all", 0, 10}};

// One policy setting's figures on one part of the Bitbrains VMs.
struct VmPoint {
  std::string policy, setting;
  bool is_default = false;
  double cpu_slack = 0, memory_slack = 0;  // summed over VMs, on the request
  double cpu_limit_slack = 0, memory_limit_slack = 0;
  long long oom = 0;
  double under = 0;  // fraction of scored samples
};

VmPoint Score(const std::vector<lm::SeriesReport>& series, const Part& part) {
  VmPoint p;
  long long under = 0, samples = 0;
  for (size_t i = part.lo; i < part.hi && i < series.size(); ++i) {
    p.cpu_slack += series[i].relative_slack_cpu;
    p.memory_slack += series[i].relative_slack_memory;
    p.cpu_limit_slack += series[i].relative_slack_cpu_limit;
    p.memory_limit_slack += series[i].relative_slack_memory_limit;
    p.oom += series[i].oom_events;
    under += series[i].underprovisioned_samples;
    samples += series[i].samples;
  }
  p.under = samples > 0 ? static_cast<double>(under) / samples : 0;
  return p;
}

// y at x along the polyline through `points` (x ascending after sorting); nullopt outside.
std::optional<double> Interpolate(std::vector<std::pair<double, double>> points, double x) {
  std::sort(points.begin(), points.end());
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const auto [x0, y0] = points[i];
    const auto [x1, y1] = points[i + 1];
    if (x < x0 || x > x1) continue;
    if (x1 == x0) return std::min(y0, y1);
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  }
  return std::nullopt;
}

std::string Maybe(std::optional<double> v, int decimals) {
  return v ? absl::StrFormat("%.*f", decimals, *v) : std::string("outside the sweep");
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/traces";
  std::string csv_path;
  CLI::App app("replay_frontier: every policy swept over its risk setting on every trace",
               "replay_frontier");
  app.add_option("--data", data, "the traces folder (default ../shared/data/traces)")
      ->type_name("DIR");
  app.add_option("--csv", csv_path, "also write every point to this CSV (for plot_frontier.py)")
      ->type_name("FILE");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<std::vector<lm::VmTrace>> vms = lm::ReadBitbrains(data + "/bitbrains-rnd-2013-7");
  absl::StatusOr<lm::ReplicaTrace> genai = lm::ReadAlibabaGenAi(data + "/alibaba-genai-2026");
  if (!vms.ok() || !genai.ok() || genai->steps.size() < 4) {
    std::fprintf(stderr, "replay_frontier: %s\n",
                 (!vms.ok() ? vms.status() : genai.ok() ? absl::InvalidArgumentError("genai: too short")
                                                        : genai.status())
                     .ToString()
                     .c_str());
    return 1;
  }
  std::unique_ptr<std::ofstream> csv;
  if (!csv_path.empty()) {
    csv = std::make_unique<std::ofstream>(csv_path);
    *csv << "trace,part,policy,setting,default,oom,memory_slack,under,cpu_slack,"
            "memory_limit_slack,cpu_limit_slack,delay_minutes,replica_hours,minutes_over\n";
  }

  // --- Bitbrains ---
  struct Sweep {
    std::string policy;
    std::vector<std::pair<std::string, lm::ReplayOptions>> settings;
    size_t default_index;
  };
  lm::ReplayOptions base;
  base.trace = lm::TraceKind::kBitbrains;
  std::vector<Sweep> sweeps;
  {
    Sweep vpa{"vpa", {}, 3};
    for (double margin : {0.0, 0.05, 0.1, 0.15, 0.25, 0.4, 0.6}) {
      lm::ReplayOptions o = base;
      o.policy = lm::Policy::kVpa;
      o.vpa.safety_margin_fraction = margin;
      vpa.settings.emplace_back(absl::StrFormat("margin %.2f", margin), o);
    }
    sweeps.push_back(vpa);
    // evoscale's risk level: the memory OOM rate and the CPU overrun weight move together.
    const double rates[] = {1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3, 3.2e-3};
    const double weights[] = {32, 16, 8, 4, 2, 1};
    for (bool apart : {false, true}) {
      Sweep evo{apart ? "evoscale, requests at p95" : "evoscale", {}, 2};
      for (int k = 0; k < 6; ++k) {
        lm::ReplayOptions o = base;
        o.policy = lm::Policy::kEvoscale;
        o.evoscale_resources.target_oom_rate = rates[k];
        o.evoscale_resources.cpu_overrun_weight = weights[k];
        if (apart) {
          o.evoscale_resources.cpu_request_percentile = 0.95;
          o.evoscale_resources.memory_request_percentile = 0.95;
        }
        evo.settings.emplace_back(absl::StrFormat("oom rate %.4f, cpu weight %g", rates[k], weights[k]), o);
      }
      sweeps.push_back(evo);
    }
  }
  // points[sweep][setting] = the replayed series
  std::vector<std::vector<std::vector<lm::SeriesReport>>> runs;
  for (const Sweep& sweep : sweeps) {
    runs.emplace_back();
    for (const auto& [name, o] : sweep.settings) runs.back().push_back(lm::ReplayVms(*vms, o).series);
  }
  for (const Part& part : kParts) {
    std::printf("\n== Bitbrains, VMs %s (%zu-%zu): slack summed over VMs, on the request ==\n", part.name,
                part.lo + 1, part.hi);
    std::printf("%-27s %-31s %9s %9s %5s %9s\n", "policy", "setting", "mem slack", "cpu slack",
                "OOM", "under");
    std::vector<std::vector<VmPoint>> scored(sweeps.size());
    for (size_t s = 0; s < sweeps.size(); ++s) {
      for (size_t k = 0; k < sweeps[s].settings.size(); ++k) {
        VmPoint p = Score(runs[s][k], part);
        p.policy = sweeps[s].policy;
        p.setting = sweeps[s].settings[k].first;
        p.is_default = k == sweeps[s].default_index;
        std::printf("%-27s %-31s %9.3f %9.3f %5lld %9.4f%s\n", p.policy.c_str(), p.setting.c_str(),
                    p.memory_slack, p.cpu_slack, p.oom, p.under, p.is_default ? "  <- default" : "");
        if (csv) {
          *csv << absl::StrFormat("bitbrains,%s,\"%s\",\"%s\",%d,%lld,%.6g,%.6g,%.6g,%.6g,%.6g,,,\n", part.name,
                                  p.policy, p.setting, p.is_default ? 1 : 0, p.oom, p.memory_slack,
                                  p.under, p.cpu_slack, p.memory_limit_slack, p.cpu_limit_slack);
        }
        scored[s].push_back(p);
      }
    }
    // Each evoscale frontier at the VPA default's risk.
    const VmPoint& vpa = scored[0][sweeps[0].default_index];
    for (size_t s = 1; s < sweeps.size(); ++s) {
      std::vector<std::pair<double, double>> memory, cpu;
      for (const VmPoint& p : scored[s]) {
        memory.emplace_back(static_cast<double>(p.oom), p.memory_slack);
        cpu.emplace_back(p.under, p.cpu_slack);
      }
      const std::optional<double> m = Interpolate(memory, static_cast<double>(vpa.oom));
      const std::optional<double> c = Interpolate(cpu, vpa.under);
      std::printf("%s at the VPA default's risk: memory slack %s vs %.3f (at %lld OOMs), CPU slack %s vs %.3f (at %.4f under-provisioned)\n",
                  sweeps[s].policy.c_str(), Maybe(m, 3).c_str(), vpa.memory_slack, vpa.oom,
                  Maybe(c, 3).c_str(), vpa.cpu_slack, vpa.under);
    }
  }

  // --- Alibaba GenAI ---
  const absl::Time mid = genai->steps[genai->steps.size() / 2].time;
  const struct {
    const char* name;
    absl::Time from, until;
  } halves[] = {{"held-out", mid, absl::InfiniteFuture()},
                {"tuning", absl::InfinitePast(), mid},
                {"all", absl::InfinitePast(), absl::InfiniteFuture()}};
  constexpr double kTarget = 0.6;
  for (double delay_minutes : {0.0, 3.0}) {
    const absl::Duration delay = absl::Seconds(60 * delay_minutes);
    for (const auto& half : halves) {
      std::printf("\n== Alibaba GenAI, %s, replicas start in %g min; scored at %.0f%% utilisation ==\n",
                  half.name, delay_minutes, 100 * kTarget);
      std::printf("%-10s %-24s %13s %13s\n", "policy", "setting", "replica-hours", "min over");
      std::vector<std::pair<double, double>> evo_points;
      double hpa_hours = 0, hpa_minutes = 0;
      auto emit = [&](const char* policy, const std::string& setting, bool is_default,
                      const lm::SeriesReport& r) {
        std::printf("%-10s %-24s %13.1f %13.1f%s\n", policy, setting.c_str(), r.replica_hours,
                    r.minutes_over_target, is_default ? "  <- default" : "");
        if (csv) {
          *csv << absl::StrFormat("alibaba-genai,%s,\"%s\",\"%s\",%d,,,,,,,%g,%.6g,%.6g\n", half.name, policy,
                                  setting, is_default ? 1 : 0, delay_minutes, r.replica_hours,
                                  r.minutes_over_target);
        }
      };
      for (double target : {0.4, 0.5, 0.6, 0.7, 0.8}) {
        lm::HpaOptions o;
        o.target_utilization = target;
        lm::HpaController hpa(o);
        const lm::SeriesReport r = lm::ReplayReplicas(*genai, hpa, kTarget, 1, 10000, half.from,
                                                      half.until, delay);
        emit("hpa", absl::StrFormat("target %.2f", target), target == 0.6, r);
        if (target == 0.6) {
          hpa_hours = r.replica_hours;
          hpa_minutes = r.minutes_over_target;
        }
      }
      for (double q : {0.5, 0.6, 0.75, 0.9, 0.95}) {
        lm::EvoscaleReplicaOptions o;
        o.target_utilization = kTarget;
        o.demand_quantile = q;
        o.startup_delay = delay;
        lm::EvoscaleReplicaRecommender evo(o);
        const lm::SeriesReport r = lm::ReplayReplicas(*genai, evo, kTarget, 1, 10000, half.from,
                                                      half.until, delay);
        emit("evoscale", absl::StrFormat("quantile %.2f", q), q == 0.75, r);
        evo_points.emplace_back(r.replica_hours, r.minutes_over_target);
      }
      const std::optional<double> at = Interpolate(evo_points, hpa_hours);
      std::printf("evoscale at the HPA default's replica-hours (%.1f): %s minutes over vs the HPA's %.1f\n",
                  hpa_hours, Maybe(at, 1).c_str(), hpa_minutes);
    }
  }
  return 0;
}
