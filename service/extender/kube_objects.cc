#include "service/extender/kube_objects.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace evoscale::service::extender {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// The multiplier of a quantity's suffix, or 0 when it is not one.
long double SuffixMultiplier(absl::string_view suffix) {
  static constexpr std::pair<const char*, long double> kSuffixes[] = {
      {"", 1},
      {"m", 1e-3L},
      {"k", 1e3L},
      {"M", 1e6L},
      {"G", 1e9L},
      {"T", 1e12L},
      {"P", 1e15L},
      {"E", 1e18L},
      {"Ki", 1024.0L},
      {"Mi", 1048576.0L},
      {"Gi", 1073741824.0L},
      {"Ti", 1099511627776.0L},
      {"Pi", 1125899906842624.0L},
      {"Ei", 1152921504606846976.0L}};
  for (const auto& [name, multiplier] : kSuffixes) {
    if (suffix == name) return multiplier;
  }
  return 0;
}

// A string or a number (kube accepts both for quantities).
absl::StatusOr<std::string> QuantityText(const json& value, absl::string_view field) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();
  return Invalid(field, "is not a quantity (a string such as \"500m\" or \"1Gi\")");
}

// Sums requests[name] into *milli when present.
absl::Status AddRequest(const json& requests, const std::string& name, absl::string_view field,
                        int64_t* milli) {
  auto it = requests.find(name);
  if (it == requests.end()) return absl::OkStatus();
  const std::string path = absl::StrCat(field, ".", name);
  absl::StatusOr<std::string> text = QuantityText(*it, path);
  if (!text.ok()) return text.status();
  absl::StatusOr<int64_t> q = ParseQuantityMilli(*text, path);
  if (!q.ok()) return q.status();
  *milli += *q;
  return absl::OkStatus();
}

absl::StatusOr<const json*> Member(const json& parent, const char* name, bool required,
                                   absl::string_view field) {
  static const json kEmpty = json::object();
  if (!parent.is_object()) return Invalid(field, "is not an object");
  auto it = parent.find(name);
  if (it == parent.end() || it->is_null()) {
    if (required) return Invalid(absl::StrCat(field, ".", name), "is missing");
    return &kEmpty;
  }
  if (!it->is_object() && !it->is_array()) {
    return Invalid(absl::StrCat(field, ".", name), "is not an object");
  }
  return &*it;
}

std::string StringAt(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Sums the containers' requests: cpu and memory in milli-units, GPUs as whole ones.
absl::Status SumContainerRequests(const json& containers, absl::string_view field,
                                  int64_t totals[3]) {
  if (!containers.is_array()) return Invalid(field, "is not a list");
  for (size_t i = 0; i < containers.size(); ++i) {
    const std::string c = absl::StrCat(field, "[", i, "]");
    absl::StatusOr<const json*> resources = Member(containers[i], "resources", false, c);
    if (!resources.ok()) return resources.status();
    const std::string r = absl::StrCat(c, ".resources");
    absl::StatusOr<const json*> requests = Member(**resources, "requests", false, r);
    if (!requests.ok()) return requests.status();
    const std::string q = absl::StrCat(r, ".requests");
    for (auto [k, name] : {std::pair{0, "cpu"}, {1, "memory"}, {2, kGpuResource}}) {
      if (absl::Status st = AddRequest(**requests, name, q, &totals[k]); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

// The GPU share: whole GPUs from the requests, or one GPU's share from the annotation.
absl::Status SetGpus(const json& annotations, int64_t gpu_milli_total, absl::string_view field,
                     placement::PodSpec* spec) {
  if (gpu_milli_total % 1000 != 0) {
    return Invalid(field, absl::StrCat("requests ", kGpuResource, " must be whole GPUs"));
  }
  spec->num_gpus = static_cast<int>(gpu_milli_total / 1000);
  spec->gpu_milli = spec->num_gpus > 0 ? placement::kMilliPerGpu : 0;
  const std::string share = StringAt(annotations, kGpuMilliAnnotation);
  if (share.empty()) return absl::OkStatus();
  const std::string path =
      absl::StrCat(field, ".metadata.annotations[\"", kGpuMilliAnnotation, "\"]");
  int milli = 0;
  if (!absl::SimpleAtoi(share, &milli) || milli < 1 || milli > placement::kMilliPerGpu) {
    return Invalid(path, absl::StrCat("\"", share, "\" is not an integer in 1..1000"));
  }
  if (spec->num_gpus > 1 && milli < placement::kMilliPerGpu) {
    return Invalid(path, "a share of a GPU is for a pod of one GPU");
  }
  spec->num_gpus = 1;
  spec->gpu_milli = milli;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseQuantityMilli(absl::string_view text, absl::string_view field) {
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || (end == 0 && text[end] == '+'))) {
    ++end;
  }
  const long double multiplier = SuffixMultiplier(text.substr(end));
  long double number = 0;
  const std::string digits(text.substr(0, end));
  bool ok = !digits.empty() && digits != "." && digits != "+" && multiplier > 0;
  if (ok) {
    char* parsed_end = nullptr;
    number = std::strtold(digits.c_str(), &parsed_end);
    ok = parsed_end == digits.c_str() + digits.size();
  }
  if (!ok) return Invalid(field, absl::StrCat("\"", text, "\" is not a quantity"));
  const long double milli = std::ceil(number * multiplier * 1000.0L);
  if (milli > 9.0e18L) return Invalid(field, absl::StrCat("\"", text, "\" is too large"));
  return static_cast<int64_t>(milli);
}

absl::StatusOr<KubePod> PodFromJson(const json& pod, absl::string_view field) {
  absl::StatusOr<const json*> metadata = Member(pod, "metadata", false, field);
  if (!metadata.ok()) return metadata.status();
  absl::StatusOr<const json*> spec = Member(pod, "spec", true, field);
  if (!spec.ok()) return spec.status();
  const std::string spec_field = absl::StrCat(field, ".spec");
  absl::StatusOr<const json*> containers = Member(**spec, "containers", true, spec_field);
  if (!containers.ok()) return containers.status();
  int64_t totals[3] = {0, 0, 0};
  absl::Status st =
      SumContainerRequests(**containers, absl::StrCat(spec_field, ".containers"), totals);
  if (!st.ok()) return st;
  KubePod out;
  const std::string ns = StringAt(**metadata, "namespace");
  out.name = absl::StrCat(ns.empty() ? "default" : ns, "/", StringAt(**metadata, "name"));
  out.uid = StringAt(**metadata, "uid");
  if (out.uid.empty()) out.uid = out.name;
  out.spec.name = out.name;
  out.spec.cpu_milli = totals[0];
  out.spec.memory_mib = totals[1] / 1000 / (1 << 20);
  absl::StatusOr<const json*> annotations = Member(**metadata, "annotations", false, field);
  if (!annotations.ok()) return annotations.status();
  if (st = SetGpus(**annotations, totals[2], field, &out.spec); !st.ok()) return st;
  return out;
}

absl::StatusOr<placement::NodeSpec> NodeFromJson(const json& node, absl::string_view field) {
  absl::StatusOr<const json*> metadata = Member(node, "metadata", true, field);
  if (!metadata.ok()) return metadata.status();
  placement::NodeSpec out;
  out.name = StringAt(**metadata, "name");
  if (out.name.empty()) return Invalid(absl::StrCat(field, ".metadata.name"), "is missing");
  absl::StatusOr<const json*> status = Member(node, "status", true, field);
  if (!status.ok()) return status.status();
  const std::string status_field = absl::StrCat(field, ".status");
  absl::StatusOr<const json*> allocatable = Member(**status, "allocatable", true, status_field);
  if (!allocatable.ok()) return allocatable.status();
  int64_t totals[3] = {0, 0, 0};
  const std::string a = absl::StrCat(status_field, ".allocatable");
  for (auto [k, name] : {std::pair{0, "cpu"}, {1, "memory"}, {2, kGpuResource}}) {
    if (absl::Status st = AddRequest(**allocatable, name, a, &totals[k]); !st.ok()) return st;
  }
  out.cpu_milli = totals[0];
  out.memory_mib = totals[1] / 1000 / (1 << 20);
  out.num_gpus = static_cast<int>(totals[2] / 1000);
  if (out.num_gpus > placement::kMaxGpusPerNode) {
    return Invalid(absl::StrCat(a, ".", kGpuResource),
                   absl::StrCat(out.num_gpus, " GPUs: at most ", placement::kMaxGpusPerNode));
  }
  absl::StatusOr<const json*> labels = Member(**metadata, "labels", false, field);
  if (!labels.ok()) return labels.status();
  out.gpu_model = out.num_gpus == 0 ? "" : StringAt(**labels, kGpuModelLabel);
  if (out.num_gpus > 0 && out.gpu_model.empty()) out.gpu_model = "gpu";
  return out;
}

}  // namespace evoscale::service::extender
