// Placement decisions over openb's 1,213 GPU nodes (issue 31: "well under a millisecond on
// one core").
//  BM_PlaceOne: the cluster is first filled by the same policy with the default trace's tuned
//    workload (seed 42) up to 90% of its GPUs; each iteration then places (without binding) the
//    next of the remaining pods, round robin. Nothing changes between iterations, so FGD's and
//    evoscale's scores per node and shape are all cached: the best case.
//  BM_Replay: a whole replay of the default trace (seed 42, 10.8k pods, each placed and bound);
//    items/s are pods per second, each bind invalidating one node's cached scores: the mean
//    decision in a replay.

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "placement/evoscale_policy.h"
#include "placement/openb.h"
#include "placement/policy.h"
#include "placement/replay.h"

namespace evoscale::placement {
namespace {

std::string TraceDir() {
  if (const char* dir = std::getenv("EVOSCALE_OPENB_DIR")) return dir;
  return std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/traces/alibaba-gpu-2023";
}

void BM_PlaceOne(benchmark::State& state) {
  const PolicyKind kind = static_cast<PolicyKind>(state.range(0));
  absl::StatusOr<std::vector<NodeSpec>> nodes =
      ReadOpenbNodes(TraceDir() + "/openb_node_list_gpu_node.csv");
  absl::StatusOr<std::vector<PodSpec>> pods =
      ReadOpenbPods(TraceDir() + "/openb_pod_list_default.csv");
  if (!nodes.ok() || !pods.ok()) {
    state.SkipWithError(
        absl::StrCat("openb trace: ", nodes.status().ToString(), " ", pods.status().ToString())
            .c_str());
    return;
  }
  absl::StatusOr<Cluster> cluster = Cluster::Create(*nodes);
  const FragmentationModel fragmentation(TypicalPods(*pods, *cluster));
  std::unique_ptr<Policy> policy = kind == PolicyKind::kEvoscale
                                       ? MakeEvoscalePolicy(fragmentation)
                                       : MakeBaselinePolicy(kind, fragmentation, 42);
  Rng rng(42);
  const std::vector<PodSpec> workload = TunedWorkload(*pods, cluster->total_gpus(), 1.3, rng);
  const double fill = 0.9 * static_cast<double>(cluster->total_gpus() * kMilliPerGpu);
  double arrived = 0;
  size_t next = 0;
  for (; next < workload.size() && arrived < fill; ++next) {
    const PodRequest pod = cluster->Resolve(workload[next]);
    arrived += static_cast<double>(pod.TotalGpuMilli());
    if (std::optional<Placement> placement = policy->Place(*cluster, pod)) {
      cluster->Bind(pod, *placement);
    }
  }
  std::vector<PodRequest> rest;
  for (size_t i = next; i < workload.size(); ++i) rest.push_back(cluster->Resolve(workload[i]));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(policy->Place(*cluster, rest[i]));
    i = (i + 1) % rest.size();
  }
  state.SetLabel(absl::StrCat(PolicyKindName(kind), ", ", cluster->nodes().size(), " nodes"));
}

void BM_Replay(benchmark::State& state) {
  absl::StatusOr<std::vector<NodeSpec>> nodes =
      ReadOpenbNodes(TraceDir() + "/openb_node_list_gpu_node.csv");
  absl::StatusOr<std::vector<PodSpec>> pods =
      ReadOpenbPods(TraceDir() + "/openb_pod_list_default.csv");
  if (!nodes.ok() || !pods.ok()) {
    state.SkipWithError("openb trace not found");
    return;
  }
  PlacementReplayOptions options;
  options.policy = static_cast<PolicyKind>(state.range(0));
  int64_t placed = 0;
  for (auto _ : state) {
    absl::StatusOr<PlacementReport> report = ReplayPlacement(*nodes, *pods, options);
    placed += report.ok() ? report->submitted_pods : 0;
  }
  state.SetItemsProcessed(placed);
  state.SetLabel(std::string(PolicyKindName(options.policy)));
}

BENCHMARK(BM_Replay)
    ->ArgName("policy")
    ->DenseRange(static_cast<int>(PolicyKind::kEvoscale), static_cast<int>(PolicyKind::kRandom))
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_PlaceOne)
    ->ArgName("policy")
    ->DenseRange(static_cast<int>(PolicyKind::kEvoscale), static_cast<int>(PolicyKind::kRandom))
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace evoscale::placement

BENCHMARK_MAIN();
