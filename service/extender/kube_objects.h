// Kubernetes objects as the extender reads them (JSON of k8s.io/api/core/v1), turned into the
// placement library's types.
//
// A pod's request: the sum over spec.containers of resources.requests: "cpu" (a quantity:
// "500m", "2", "1.5"), "memory" ("1Gi", "512Mi", "128974848", "1G"), whole GPUs from
// "nvidia.com/gpu"; a share of one GPU from the annotation kGpuMilliAnnotation (per GPU,
// 1..1000; alone it means one GPU). Any GPU model may run it.
// A node's capacity: status.allocatable ("cpu", "memory", "nvidia.com/gpu"), the GPU model
// from the label kGpuModelLabel (NVIDIA GPU feature discovery's; "gpu" when absent).
//
// Errors are INVALID_ARGUMENT and name the field as a path in the request, e.g.
//   Pod.spec.containers[0].resources.requests.cpu: "12xb" is not a quantity
#ifndef EVOSCALE_SERVICE_EXTENDER_KUBE_OBJECTS_H_
#define EVOSCALE_SERVICE_EXTENDER_KUBE_OBJECTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "placement/cluster.h"

namespace evoscale::service::extender {

inline constexpr char kGpuResource[] = "nvidia.com/gpu";
inline constexpr char kGpuMilliAnnotation[] = "alibabacloud.com/gpu-milli";
inline constexpr char kGpuModelLabel[] = "nvidia.com/gpu.product";

// A resource.Quantity in thousandths of its unit: "500m" -> 500, "2" -> 2000, "1Ki" -> 1024000.
// Decimal (k M G T P E) and binary (Ki Mi Gi Ti Pi Ei) suffixes; no exponents. INVALID_ARGUMENT
// naming `field` otherwise, or when it is negative or too large.
absl::StatusOr<int64_t> ParseQuantityMilli(absl::string_view text, absl::string_view field);

// The pod and its identity (metadata.uid, else namespace/name). `field` prefixes the errors.
struct KubePod {
  std::string uid;
  std::string name;  // namespace/name
  placement::PodSpec spec;
};
absl::StatusOr<KubePod> PodFromJson(const nlohmann::json& pod, absl::string_view field);
absl::StatusOr<placement::NodeSpec> NodeFromJson(const nlohmann::json& node,
                                                 absl::string_view field);

}  // namespace evoscale::service::extender

#endif  // EVOSCALE_SERVICE_EXTENDER_KUBE_OBJECTS_H_
