#include "service/extender/scheduler_extender.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "placement/evoscale_policy.h"
#include "placement/fragmentation.h"
#include "service/extender/kube_objects.h"

namespace evoscale::service::extender {
namespace {

using nlohmann::json;
constexpr int kMaxPriority = 10;  // extenderv1.MaxExtenderPriority

std::string Dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

ExtenderReply BadRequest(absl::string_view message) {
  return {400, Dump({{"Error", std::string(message)}})};
}

// The body as JSON, or the 400 that says why not.
std::optional<json> ParseBody(const std::string& body, ExtenderReply* reply) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    *reply = BadRequest("the request body is not JSON");
    return std::nullopt;
  }
  return doc;
}

// ExtenderArgs (or the Pod of ExtenderPreemptionArgs): the pod, and the nodes by name.
struct Args {
  KubePod pod;
  std::vector<std::string> names;
  const json* nodes = nullptr;  // Nodes.items when the nodes came in full
};

absl::StatusOr<Args> ReadPod(const json& doc) {
  if (!doc.is_object()) return absl::InvalidArgumentError("the request is not a JSON object");
  auto pod = doc.find("Pod");
  if (pod == doc.end() || pod->is_null()) return absl::InvalidArgumentError("Pod: is missing");
  absl::StatusOr<KubePod> p = PodFromJson(*pod, "Pod");
  if (!p.ok()) return p.status();
  Args args;
  args.pod = *std::move(p);
  return args;
}

std::string PodAsks(const placement::PodSpec& pod) {
  return absl::StrCat("cpu ", pod.cpu_milli, "m, memory ", pod.memory_mib, "Mi, ", pod.num_gpus,
                      " GPU x ", pod.gpu_milli, " milli");
}

std::string NodeHas(const placement::NodeState& node) {
  std::vector<int> gpus(node.gpu_left.begin(), node.gpu_left.begin() + node.num_gpus);
  return absl::StrCat("cpu ", node.cpu_left, "m, memory ", node.memory_left, "Mi, GPU milli free [",
                      absl::StrJoin(gpus, " "), "]");
}

// Reads ExtenderArgs: the pod, and Nodes (cached) or NodeNames.
absl::StatusOr<Args> ReadArgs(const json& doc,
                              absl::flat_hash_map<std::string, placement::NodeSpec>* cache) {
  absl::StatusOr<Args> args = ReadPod(doc);
  if (!args.ok()) return args.status();
  auto nodes = doc.find("Nodes");
  if (nodes != doc.end() && !nodes->is_null()) {
    auto items = nodes->find("items");
    if (!nodes->is_object() || items == nodes->end() || !items->is_array()) {
      return absl::InvalidArgumentError("Nodes.items: is not a list");
    }
    for (size_t i = 0; i < items->size(); ++i) {
      absl::StatusOr<placement::NodeSpec> n =
          NodeFromJson((*items)[i], absl::StrCat("Nodes.items[", i, "]"));
      if (!n.ok()) return n.status();
      args->names.push_back(n->name);
      (*cache)[n->name] = *std::move(n);
    }
    args->nodes = &*items;
    return args;
  }
  auto names = doc.find("NodeNames");
  if (names == doc.end() || !names->is_array()) {
    return absl::InvalidArgumentError("Nodes, NodeNames: neither is given");
  }
  for (size_t i = 0; i < names->size(); ++i) {
    if (!(*names)[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("NodeNames[", i, "]: is not a string"));
    }
    args->names.push_back((*names)[i].get<std::string>());
  }
  return args;
}

}  // namespace

ExtenderReply SchedulerExtender::Handle(absl::string_view verb, const std::string& body) {
  if (verb == "filter") return Filter(body);
  if (verb == "prioritize") return Prioritize(body);
  if (verb == "preempt") return Preempt(body);
  return {404, Dump({{"Error", absl::StrCat("no extender verb \"", verb,
                                            "\": filter, prioritize and preempt are served")}})};
}

placement::Cluster SchedulerExtender::BuildCluster(
    const std::vector<std::string>& names, const absl::flat_hash_set<std::string>& without) const {
  std::vector<placement::NodeSpec> specs;
  absl::flat_hash_map<std::string, int> index;
  for (const std::string& name : names) {
    index[name] = static_cast<int>(specs.size());
    specs.push_back(nodes_.at(name));
  }
  absl::StatusOr<placement::Cluster> cluster = placement::Cluster::Create(specs);
  if (!cluster.ok()) return *placement::Cluster::Create({});  // NodeFromJson checked the specs
  for (const auto& [uid, assumed] : assumed_) {
    auto it = index.find(assumed.node);
    if (it == index.end() || without.contains(uid)) continue;
    const placement::PodRequest request = cluster->Resolve(assumed.spec);
    const placement::NodeState& node = cluster->node(it->second);
    if (!placement::Fits(node, request)) continue;  // the node shrank since
    cluster->Bind(request, {it->second, placement::BestFitGpus(node, request)});
  }
  return *std::move(cluster);
}

void SchedulerExtender::Remember(const placement::PodSpec& pod) {
  if (history_.size() < options_.history) {
    history_.push_back(pod);
  } else if (!history_.empty()) {
    history_[next_] = pod;
    next_ = (next_ + 1) % history_.size();
  }
}

std::vector<std::string> SchedulerExtender::Rank(const placement::PodSpec& pod,
                                                 std::vector<std::string> names, size_t count) {
  std::vector<std::string> ranked;
  while (ranked.size() < count && !names.empty()) {
    placement::Cluster cluster = BuildCluster(names, {});
    const placement::FragmentationModel fragmentation(placement::TypicalPods(history_, cluster));
    std::unique_ptr<placement::Policy> policy =
        options_.policy == placement::PolicyKind::kEvoscale
            ? placement::MakeEvoscalePolicy(fragmentation)
            : placement::MakeBaselinePolicy(options_.policy, fragmentation, /*seed=*/1);
    std::optional<placement::Placement> p = policy->Place(cluster, cluster.Resolve(pod));
    if (!p) break;
    ranked.push_back(names[p->node]);
    names.erase(names.begin() + p->node);
  }
  return ranked;
}

ExtenderReply SchedulerExtender::Filter(const std::string& body) {
  ExtenderReply reply;
  std::optional<json> doc = ParseBody(body, &reply);
  if (!doc) return reply;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Args> args = ReadArgs(*doc, &nodes_);
  json result = {{"Nodes", nullptr},
                 {"NodeNames", nullptr},
                 {"FailedNodes", json::object()},
                 {"FailedAndUnresolvableNodes", json::object()},
                 {"Error", ""}};
  if (!args.ok()) {
    result["Error"] = std::string(args.status().message());
    return {200, Dump(result)};
  }
  std::vector<std::string> known;
  for (const std::string& name : args->names) {
    if (nodes_.contains(name)) {
      known.push_back(name);
    } else {
      result["FailedAndUnresolvableNodes"][name] =
          "node unknown to the evoscale extender: it answers from nodes it was sent in full "
          "before (nodeCacheCapable: false sends them)";
    }
  }
  const placement::Cluster cluster = BuildCluster(known, {});
  const placement::PodRequest request = cluster.Resolve(args->pod.spec);
  json passed = json::array(), passed_names = json::array();
  for (size_t i = 0; i < known.size(); ++i) {
    const placement::NodeState& node = cluster.node(static_cast<int>(i));
    if (placement::Fits(node, request)) {
      passed_names.push_back(known[i]);
      if (args->nodes != nullptr) {
        for (const json& n : *args->nodes) {
          if (n["metadata"]["name"] == known[i]) passed.push_back(n);
        }
      }
    } else {
      result["FailedNodes"][known[i]] =
          absl::StrCat("Insufficient resources (evoscale): the pod asks for ",
                       PodAsks(args->pod.spec), "; the node has ", NodeHas(node));
    }
  }
  if (args->nodes != nullptr) {
    result["Nodes"] = {{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", passed}};
  } else {
    result["NodeNames"] = passed_names;
  }
  return {200, Dump(result)};
}

ExtenderReply SchedulerExtender::Prioritize(const std::string& body) {
  ExtenderReply reply;
  std::optional<json> doc = ParseBody(body, &reply);
  if (!doc) return reply;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Args> args = ReadArgs(*doc, &nodes_);
  if (!args.ok()) return BadRequest(args.status().message());
  std::vector<std::string> known;
  for (const std::string& name : args->names) {
    if (nodes_.contains(name)) known.push_back(name);
  }
  Remember(args->pod.spec);
  const std::vector<std::string> ranked = Rank(args->pod.spec, known, kMaxPriority);
  if (!ranked.empty()) assumed_[args->pod.uid] = {ranked.front(), args->pod.spec};
  json list = json::array();
  for (const std::string& name : args->names) {
    const auto it = std::find(ranked.begin(), ranked.end(), name);
    const int64_t score = it == ranked.end() ? 0 : kMaxPriority - (it - ranked.begin());
    list.push_back({{"Host", name}, {"Score", score}});
  }
  return {200, Dump(list)};
}

ExtenderReply SchedulerExtender::Preempt(const std::string& body) {
  ExtenderReply reply;
  std::optional<json> doc = ParseBody(body, &reply);
  if (!doc) return reply;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Args> args = ReadPod(*doc);
  if (!args.ok()) return BadRequest(args.status().message());
  // node -> victims' UIDs, from NodeNameToMetaVictims or NodeNameToVictims (full pods).
  std::vector<std::pair<std::string, std::vector<std::string>>> candidates;
  for (const char* key : {"NodeNameToMetaVictims", "NodeNameToVictims"}) {
    auto map = doc->find(key);
    if (map == doc->end() || map->is_null()) continue;
    if (!map->is_object()) return BadRequest(absl::StrCat(key, ": is not a map"));
    for (const auto& [node, victims] : map->items()) {
      const std::string field = absl::StrCat(key, "[\"", node, "\"].Pods");
      const json* pods =
          victims.is_object() && victims.contains("Pods") ? &victims["Pods"] : nullptr;
      if (pods == nullptr || !(pods->is_array() || pods->is_null())) {
        return BadRequest(absl::StrCat(field, ": is not a list"));
      }
      std::vector<std::string> uids;
      for (const json& pod : pods->is_null() ? json::array() : *pods) {
        const json* uid = pod.contains("UID")        ? &pod["UID"]
                          : pod.contains("metadata") ? &pod["metadata"]["uid"]
                                                     : nullptr;
        if (uid == nullptr || !uid->is_string())
          return BadRequest(absl::StrCat(field, ": a pod has no UID"));
        uids.push_back(uid->get<std::string>());
      }
      candidates.emplace_back(node, std::move(uids));
    }
    break;
  }
  json result = {{"NodeNameToMetaVictims", json::object()}};
  for (const auto& [node, uids] : candidates) {
    if (!nodes_.contains(node)) continue;
    const placement::Cluster cluster =
        BuildCluster({node}, absl::flat_hash_set<std::string>(uids.begin(), uids.end()));
    if (!placement::Fits(cluster.node(0), cluster.Resolve(args->pod.spec))) continue;
    json pods = json::array();
    for (const std::string& uid : uids) pods.push_back({{"UID", uid}});
    result["NodeNameToMetaVictims"][node] = {{"Pods", pods}, {"NumPDBViolations", 0}};
  }
  return {200, Dump(result)};
}

}  // namespace evoscale::service::extender
