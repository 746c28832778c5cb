// The text formats of the cgroup files the runner reads, parsed from strings so that tests can
// feed them the formats of hosts they do not run on (a cgroup v2 host, here).
#ifndef EVOSCALE_TRAINER_ADAPTER_INTERNAL_CGROUP_FILES_H_
#define EVOSCALE_TRAINER_ADAPTER_INTERNAL_CGROUP_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::trainer_adapter::internal {

// Where this process's group is, from /proc/self/cgroup and /proc/self/mountinfo: in the v1
// hierarchy that holds `controller`, or (v2) in the unified hierarchy. FAILED_PRECONDITION
// saying what is missing.
absl::StatusOr<std::string> V1GroupFolder(absl::string_view controller,
                                          absl::string_view proc_self_cgroup,
                                          absl::string_view mountinfo);
absl::StatusOr<std::string> V2GroupFolder(absl::string_view proc_self_cgroup,
                                          absl::string_view mountinfo);

// The value of `key` in a flat keyed file ("oom_kill 3" in memory.events, "usage_usec 42" in
// cpu.stat, "oom_kill 1" in v1's memory.oom_control); -1 when absent.
int64_t KeyedValue(absl::string_view text, absl::string_view key);

// A number file ("123\n"); "max" (v2's no limit) and anything unreadable are -1.
int64_t NumberOrMax(absl::string_view text);

// v2's cpu.max ("QUOTA PERIOD" or "max PERIOD"): the quota in microseconds, -1 for none.
int64_t CpuMaxQuota(absl::string_view text);

// Whether a space-separated controller list (cgroup.controllers) has `controller`.
bool HasController(absl::string_view list, absl::string_view controller);

}  // namespace evoscale::trainer_adapter::internal

#endif  // EVOSCALE_TRAINER_ADAPTER_INTERNAL_CGROUP_FILES_H_
