// SchedulerExtender: kube-scheduler's extender API (k8s.io/kube-scheduler/extender/v1) over a
// placement policy (evoscale's by default), served by evoscaled at POST /scheduler/filter,
// /scheduler/prioritize and /scheduler/preempt. The JSON is the Go structs' (no json tags, so
// the names are capitalised): ExtenderArgs {Pod, Nodes (a v1.NodeList), NodeNames},
// ExtenderFilterResult {Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error},
// HostPriorityList [{Host, Score}], ExtenderPreemptionArgs {Pod, NodeNameToVictims,
// NodeNameToMetaVictims}, ExtenderPreemptionResult {NodeNameToMetaVictims}.
//
// What it knows (kube_objects.h says how pods and nodes are read):
//  - Nodes: every node it has seen in full (ExtenderArgs.Nodes) is cached by name. With
//    NodeNames only (nodeCacheCapable: true) it answers from that cache; a node it never saw in
//    full is failed in FailedAndUnresolvableNodes ("unknown to the extender"), since preempting
//    pods there cannot help.
//  - What runs on a node: only the pods it assumed, i.e. each pod it prioritized is taken to
//    run on the node it scored highest (by pod UID, so a retried pod moves). It sees no binds
//    and no deletions (there is no bind verb here): a pod that kube-scheduler placed elsewhere,
//    or that ended, stays counted until the same UID is prioritized again or evoscaled restarts.
//  - The typical pods of FGD's fragmentation (fragmentation.h): the last kHistory pods it was
//    asked about, this one included.
// Filter fails a node where the pod does not fit (CPU, memory, GPUs: placement::Fits) after
// the assumed pods. Prioritize scores the nodes that fit 0..10 (MaxExtenderPriority): the
// policy's choice 10, then its choice among the rest 9, ... down to 1 for its tenth; others 0.
// Preempt keeps the candidate nodes it knows where the pod fits once the victims (those it
// assumed) are gone, with their victims as MetaVictims (UIDs); it drops the other nodes.
//
// Bad input: a body that is not JSON is HTTP 400. Otherwise filter answers HTTP 200 with the
// message, naming the field, in Error (what kube-scheduler reads); HostPriorityList and
// ExtenderPreemptionResult have no Error field, so prioritize and preempt answer 400 with
// {"Error": message}. Thread-safe (one mutex; each call is O(nodes x GPUs x 10)).
#ifndef EVOSCALE_SERVICE_EXTENDER_SCHEDULER_EXTENDER_H_
#define EVOSCALE_SERVICE_EXTENDER_SCHEDULER_EXTENDER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "placement/cluster.h"
#include "placement/policy.h"

namespace evoscale::service::extender {

struct ExtenderOptions {
  placement::PolicyKind policy = placement::PolicyKind::kEvoscale;
  size_t history = 10000;  // pods kept for the typical pods
};

struct ExtenderReply {
  int status = 200;
  std::string body;  // JSON
};

class SchedulerExtender {
 public:
  explicit SchedulerExtender(ExtenderOptions options = {}) : options_(options) {}

  // `verb` is "filter", "prioritize" or "preempt" (404 otherwise).
  ExtenderReply Handle(absl::string_view verb, const std::string& body);
  ExtenderReply Filter(const std::string& body);
  ExtenderReply Prioritize(const std::string& body);
  ExtenderReply Preempt(const std::string& body);

 private:
  struct Assumed {
    std::string node;
    placement::PodSpec spec;
  };
  // The cluster of the named nodes (all known) with the assumed pods bound, but `without`.
  placement::Cluster BuildCluster(const std::vector<std::string>& names,
                                  const absl::flat_hash_set<std::string>& without) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The nodes of `names` that fit, in the policy's order of preference, at most `count`.
  std::vector<std::string> Rank(const placement::PodSpec& pod, std::vector<std::string> names,
                                size_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remember(const placement::PodSpec& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ExtenderOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, placement::NodeSpec> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Assumed> assumed_ ABSL_GUARDED_BY(mu_);  // by pod UID
  std::vector<placement::PodSpec> history_ ABSL_GUARDED_BY(mu_);            // a ring
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace evoscale::service::extender

#endif  // EVOSCALE_SERVICE_EXTENDER_SCHEDULER_EXTENDER_H_
