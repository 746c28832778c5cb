// The place command: an openb GPU trace replayed through a placement policy, offline
// (placement/replay.h), as the FGD simulator's experiments do; with --departures, replayed on
// its own clock with priorities and preemption (placement/departures.h). Calls no server.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "placement/departures.h"
#include "placement/openb.h"
#include "placement/replay.h"
#include "service/cli/command.h"
#include "service/cli/format.h"
#include "service/cli/validators.h"

namespace evoscale::cli {
namespace {

// The arrivals the table shows (percent of the cluster's GPUs).
constexpr int kTableArrivals[] = {50, 80, 90, 100, 110, 120, 130};

void DefinePlace(CLI::App& command, CommandArguments& arguments) {
  CommandArguments::Place& place = arguments.place;
  command.add_option("--pods", place.pods, "an openb pod list (openb_pod_list_*.csv)")
      ->type_name("FILE")
      ->required();
  command.add_option("--nodes", place.nodes, "an openb node list (openb_node_list_gpu_node.csv)")
      ->type_name("FILE")
      ->required();
  command
      .add_option("--policy", place.options.policy,
                  "evoscale (default), fgd, bestfit, packing, dotprod, clustering or random")
      ->type_name("POLICY")
      ->transform(
          EnumName([](const std::string& name) { return placement::ParsePolicyKind(name); }));
  command.add_option("--seed", place.options.seed, "shuffles and resamples the pods (default 42)")
      ->type_name("N")
      ->check(IntegerIn(0, std::numeric_limits<int64_t>::max()));
  command
      .add_option_function<std::string>(
          "--tune",
          [&place](const std::string& value) {
            double tune;
            if (!absl::SimpleAtod(value, &tune) || !(tune > 0) || tune > 100) {
              throw CLI::ValidationError(
                  "--tune", absl::StrCat("\"", value, "\" is not a number in (0, 100]"));
            }
            place.options.tune = tune;
          },
          "the GPU requests submitted, times the cluster's GPUs (default 1.3)")
      ->type_name("X");
  command
      .add_option_function<std::string>(
          "--secondary",
          [&place](const std::string& value) {
            absl::StatusOr<placement::EvoscalePolicyOptions::Secondary> secondary =
                placement::ParseSecondary(value);
            if (!secondary.ok()) {
              throw CLI::ValidationError("--secondary", std::string(secondary.status().message()));
            }
            place.options.evoscale.secondary = *secondary;
            place.secondary_given = true;
          },
          "with --policy evoscale, what breaks its ties: cpupods (the default: a pod without "
          "GPUs goes to the node with the least free GPU), pack, spread (uniformity: the most "
          "room left), usedfirst or none")
      ->type_name("RULE");
  command.add_flag("--departures", place.departures,
                   "replay creation and deletion times with priorities and preemption "
                   "(no shuffle, no --tune)");
  command.add_flag("--no-preemption", place.no_preemption,
                   "with --departures: a pod that does not fit only waits");
  command.add_flag("--fifo", place.fifo,
                   "with --departures: ignore priorities; the pending queue is arrival order");
}

nlohmann::json PointJson(const placement::ReplayPoint& point) {
  return {{"arrived_percent", point.arrived_percent},
          {"allocated_percent", point.allocated_percent},
          {"unallocated_percent", point.unallocated_percent},
          {"fragmentation_amount", point.fragmentation_amount},
          {"fragmentation_ratio", point.fragmentation_ratio},
          {"failed_pods", point.failed_pods},
          {"gpu_utilization_stddev", point.gpu_utilization_stddev},
          {"cpu_utilization_stddev", point.cpu_utilization_stddev}};
}

nlohmann::json ReportJson(const placement::PlacementReport& report, double wall_seconds) {
  nlohmann::json points = nlohmann::json::array();
  for (const placement::ReplayPoint& point : report.points) points.push_back(PointJson(point));
  nlohmann::json json = {{"policy", report.policy},
                         {"secondary", report.secondary.empty() ? nlohmann::json(nullptr)
                                                                : nlohmann::json(report.secondary)},
                         {"seed", report.seed},
                         {"tune", report.tune},
                         {"nodes", report.nodes},
                         {"total_gpus", report.total_gpus},
                         {"original_pods", report.original_pods},
                         {"submitted_pods", report.submitted_pods},
                         {"placed_pods", report.placed_pods},
                         {"failed_pods", report.failed_pods},
                         {"arrived_percent", report.arrived_percent},
                         {"allocated_percent", report.allocated_percent},
                         {"unallocated_percent", 100 - report.allocated_percent},
                         {"wall_seconds", wall_seconds},
                         {"points", std::move(points)}};
  for (int percent : {100, 130}) {
    std::optional<placement::ReplayPoint> point = report.PointAt(percent);
    json[absl::StrCat("unallocated_percent_at_", percent)] =
        point ? nlohmann::json(point->unallocated_percent) : nlohmann::json(nullptr);
    json[absl::StrCat("gpu_utilization_stddev_at_", percent)] =
        point ? nlohmann::json(point->gpu_utilization_stddev) : nlohmann::json(nullptr);
  }
  return json;
}

nlohmann::json DeparturesJson(const placement::DeparturesReport& report, double wall_seconds) {
  return {{"policy", report.policy},
          {"departures", true},
          {"priorities", report.priorities},
          {"preemption", report.preemption},
          {"nodes", report.nodes},
          {"total_gpus", report.total_gpus},
          {"pods", report.pods},
          {"placed_pods", report.placed_pods},
          {"never_placed_pods", report.never_placed_pods},
          {"delayed_pods", report.delayed_pods},
          {"ls_pods", report.ls_pods},
          {"ls_placed_pods", report.ls_placed_pods},
          {"ls_delay_median_seconds", report.ls_delay_median_seconds},
          {"ls_delay_p99_seconds", report.ls_delay_p99_seconds},
          {"preemptions", report.preemptions},
          {"evicted_pods", report.evicted_pods},
          {"evicted_gpu_hours", report.evicted_gpu_hours},
          {"end_time", report.end_time},
          {"wall_seconds", wall_seconds}};
}

absl::Status RunDepartures(const Invocation& invocation) {
  const CommandArguments::Place& place = invocation.arguments().place;
  absl::StatusOr<std::vector<placement::PodSpec>> pods =
      placement::ReadOpenbPods(place.pods, /*require_times=*/true);
  if (!pods.ok()) {
    return UsageError(absl::StrCat("--pods: ", pods.status().message(),
                                   " (--departures replays creation_time and deletion_time)"));
  }
  absl::StatusOr<std::vector<placement::NodeSpec>> nodes = placement::ReadOpenbNodes(place.nodes);
  if (!nodes.ok()) return UsageError(absl::StrCat("--nodes: ", nodes.status().message()));
  placement::DeparturesOptions options;
  options.policy = place.options.policy;
  options.seed = place.options.seed;
  options.priorities = !place.fifo;
  options.preemption = !place.no_preemption;
  options.evoscale = place.options.evoscale;
  const absl::Time start = absl::Now();
  absl::StatusOr<placement::DeparturesReport> report =
      placement::ReplayDepartures(*nodes, *pods, options);
  if (!report.ok()) return UsageError(report.status().message());
  const double wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (invocation.global().structured()) {
    return invocation.PrintJsonText(DeparturesJson(*report, wall_seconds).dump());
  }
  invocation.out() << "policy " << report->policy << ", departures, "
                   << (report->priorities ? "priorities" : "fifo") << ", "
                   << (report->preemption ? "preemption" : "no preemption") << ": "
                   << report->pods << " pods on " << report->nodes << " nodes, "
                   << report->total_gpus << " GPUs\n"
                   << FormatTable({"LS_DELAY_P50_S", "LS_DELAY_P99_S", "PREEMPTIONS",
                                   "EVICTED_PODS", "EVICTED_GPU_H", "NEVER_PLACED"},
                                  {{FormatNumber(report->ls_delay_median_seconds),
                                    FormatNumber(report->ls_delay_p99_seconds),
                                    absl::StrCat(report->preemptions),
                                    absl::StrCat(report->evicted_pods),
                                    FormatNumber(report->evicted_gpu_hours),
                                    absl::StrCat(report->never_placed_pods)}});
  return absl::OkStatus();
}

absl::Status RunPlace(const Invocation& invocation) {
  const CommandArguments::Place& place = invocation.arguments().place;
  if (place.secondary_given && place.options.policy != placement::PolicyKind::kEvoscale) {
    return UsageError("--secondary applies only with --policy evoscale");
  }
  if (place.departures) return RunDepartures(invocation);
  if (place.no_preemption || place.fifo) {
    return UsageError("--no-preemption and --fifo apply only with --departures");
  }

  absl::StatusOr<std::vector<placement::PodSpec>> pods = placement::ReadOpenbPods(place.pods);
  if (!pods.ok()) return UsageError(absl::StrCat("--pods: ", pods.status().message()));
  absl::StatusOr<std::vector<placement::NodeSpec>> nodes = placement::ReadOpenbNodes(place.nodes);
  if (!nodes.ok()) return UsageError(absl::StrCat("--nodes: ", nodes.status().message()));
  const absl::Time start = absl::Now();
  absl::StatusOr<placement::PlacementReport> report =
      placement::ReplayPlacement(*nodes, *pods, place.options);
  if (!report.ok()) return UsageError(report.status().message());
  const double wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (invocation.global().structured()) {
    return invocation.PrintJsonText(ReportJson(*report, wall_seconds).dump());
  }
  std::vector<std::vector<std::string>> rows;
  for (int percent : kTableArrivals) {
    std::optional<placement::ReplayPoint> point = report->PointAt(percent);
    if (!point) continue;
    rows.push_back({absl::StrCat(percent), FormatNumber(point->allocated_percent),
                    FormatNumber(point->unallocated_percent),
                    FormatNumber(point->fragmentation_ratio), absl::StrCat(point->failed_pods),
                    FormatNumber(point->gpu_utilization_stddev)});
  }
  invocation.out() << "policy " << report->policy << ", seed " << report->seed << ": "
                   << report->submitted_pods << " pods (" << report->original_pods
                   << " in the trace) on " << report->nodes << " nodes, " << report->total_gpus
                   << " GPUs; " << report->failed_pods << " failed\n"
                   << FormatTable(
                          {"ARRIVED%", "ALLOCATED%", "UNALLOCATED%", "FRAG_RATIO%", "FAILED_PODS",
                           "GPU_UTIL_SD"},
                          rows);
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> PlaceCommands() {
  return {
      {"place",
       "--pods FILE --nodes FILE [--policy evoscale|fgd|bestfit|packing|dotprod|clustering|"
       "random] [--seed N] [--tune X] [--secondary RULE] [--departures [--no-preemption] [--fifo]]",
       "Replay an openb GPU trace through a placement policy, offline, and report allocated "
       "and unallocated GPU % per 1% of arrival; with --departures, replay the trace's "
       "creation and deletion times with priorities and preemption and report LS pods' "
       "scheduling delay, preemptions and evicted GPU-hours.",
       DefinePlace, RunPlace},
  };
}

}  // namespace evoscale::cli
