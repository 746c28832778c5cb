// Readers of Alibaba's openb GPU traces (clusterdata, cluster-trace-gpu-v2023): the node list
// (sn,cpu_milli,memory_mib,gpu,model) and the pod lists (name,cpu_milli,memory_mib,num_gpu,
// gpu_milli[,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time]; the multigpu
// variants stop after gpu_milli). Columns are found by the header's names, in any order; columns
// the readers do not know are ignored.
//
// As the FGD simulator reads them: gpu_spec lists the allowed GPU models separated by '|'
// (empty = any); gpu_milli is ignored for pods without GPUs; a GPU pod asks for 1..1000 milli
// per GPU, and a pod of several GPUs for whole ones (1000).
//
// Errors are INVALID_ARGUMENT and name the file, the line and the field:
//   `pods.csv:7: field "num_gpu": "two" is not an integer`; a file that cannot be read is
// NOT_FOUND. Parsing is linear in the file's size.

#ifndef EVOSCALE_PLACEMENT_OPENB_H_
#define EVOSCALE_PLACEMENT_OPENB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/cluster.h"

namespace evoscale::placement {

absl::StatusOr<std::vector<NodeSpec>> ReadOpenbNodes(const std::string& path);
// With `require_times` (the departures replay, departures.h) the pod list must have the
// creation_time and deletion_time columns (`pods.csv:1: missing column "creation_time"`), every
// row both fields, and deletion_time >= creation_time
// (`pods.csv:3: field "deletion_time": 5 is before creation_time 9`).
absl::StatusOr<std::vector<PodSpec>> ReadOpenbPods(const std::string& path,
                                                   bool require_times = false);

// The same from text; `file_name` is what the errors call it.
absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodes(absl::string_view text,
                                                      absl::string_view file_name);
absl::StatusOr<std::vector<PodSpec>> ParseOpenbPods(absl::string_view text,
                                                    absl::string_view file_name,
                                                    bool require_times = false);

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_OPENB_H_
