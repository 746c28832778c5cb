// Per-trial cgroups: the kernel enforces a trial's memory limit and CPU quota on every process
// the trial starts (a double-forked grandchild included), counts its OOM kills and its CPU
// time, and lists its processes so that all of them end with the trial.
//
// cgroup v1 where its memory hierarchy is mounted: child groups below this process's own groups
// in the memory, cpu and cpuacct hierarchies (as these machines mount them; root may create
// them). Otherwise cgroup v2, where this process's group has the memory and cpu controllers
// (a delegated subtree): the process moves into a leaf "PREFIX-PID-supervisor" of its group,
// the group hands memory and cpu to its children, and trial groups are made beside the leaf.
// The v2 path is written to the kernel's documented files (memory.max, memory.swap.max,
// cpu.max, memory.events, memory.current, memory.peak, cpu.stat, cgroup.kill) but has not run
// on a v2 host here (these machines mount v1). Where neither is writable, Detect says why and
// the local runner falls back to sampling /proc.
#ifndef EVOSCALE_TRAINER_ADAPTER_CGROUP_H_
#define EVOSCALE_TRAINER_ADAPTER_CGROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace evoscale::trainer_adapter {

class TrialCgroup;

// Where trial groups are made. Thread-safe.
class CgroupRoot {
 public:
  // Finds this process's groups (/proc/self/cgroup) and where their hierarchies are mounted
  // (/proc/self/mountinfo), v1 first, then v2, and checks that a child group can be made.
  // FAILED_PRECONDITION saying what is missing for both when not. Kills what is left in groups
  // an earlier runner of the same `prefix` left behind (one killed with SIGKILL) and removes
  // them.
  static absl::StatusOr<std::unique_ptr<CgroupRoot>> Detect(const std::string& prefix = "evoscale");

  // Makes a group "PREFIX-PID-N" in each hierarchy with the memory limit (0: none) and the
  // CPU quota of `cpu_cores` (0: none) over a 100 ms period.
  absl::StatusOr<std::unique_ptr<TrialCgroup>> Create(int64_t memory_bytes, double cpu_cores);

  // "cgroup v1 (memory, cpu, cpuacct)" or "cgroup v2 (memory, cpu)".
  std::string mode() const;

 private:
  static absl::StatusOr<std::unique_ptr<CgroupRoot>> DetectV1(const std::string& prefix);
  static absl::StatusOr<std::unique_ptr<CgroupRoot>> DetectV2(const std::string& prefix);
  CgroupRoot(int version, std::string prefix, std::string memory, std::string cpu,
             std::string cpuacct)
      : version_(version),
        prefix_(std::move(prefix)),
        memory_(std::move(memory)),
        cpu_(std::move(cpu)),
        cpuacct_(std::move(cpuacct)) {}
  const int version_;  // 1 or 2
  const std::string prefix_;
  // The folders of this process's own groups (all three the same in v2); constant after
  // construction.
  const std::string memory_, cpu_, cpuacct_;
  absl::Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 1;
};

// One trial's groups. Thread-safe. Destroying it kills whatever still runs in it and removes
// the groups.
class TrialCgroup {
 public:
  ~TrialCgroup();
  TrialCgroup(const TrialCgroup&) = delete;
  TrialCgroup& operator=(const TrialCgroup&) = delete;

  // Descriptors of the groups' cgroup.procs files, open for writing and close-on-exec: a child
  // between fork and exec joins every group with JoinFromChild (async-signal-safe).
  const std::vector<int>& join_fds() const { return join_fds_; }
  static void JoinFromChild(const std::vector<int>& fds);

  // The processes in the group now.
  std::vector<pid_t> Pids() const;
  // SIGKILLs every process in the group until none is left (at most `attempts` rounds, 10 ms
  // apart). Returns whether the group is empty.
  bool KillAll(int attempts = 200) const;

  // v1's file first, then v2's.
  int64_t oom_kills() const;          // memory.oom_control's / memory.events' oom_kill
  int64_t memory_bytes() const;       // memory.usage_in_bytes / memory.current
  int64_t peak_memory_bytes() const;  // memory.max_usage_in_bytes / memory.peak (-1: none)
  double cpu_seconds() const;         // cpuacct.usage / cpu.stat's usage_usec
  int64_t memory_limit_bytes() const;  // memory.limit_in_bytes / memory.max (-1: none)
  int64_t cpu_quota_us() const;        // cpu.cfs_quota_us / cpu.max's quota (-1: none)

  const std::string& memory_dir() const { return memory_; }

 private:
  friend class CgroupRoot;
  TrialCgroup(int version, std::string memory, std::string cpu, std::string cpuacct)
      : version_(version),
        memory_(std::move(memory)),
        cpu_(std::move(cpu)),
        cpuacct_(std::move(cpuacct)) {}
  std::vector<std::string> dirs() const;  // each group folder once
  const int version_;
  const std::string memory_, cpu_, cpuacct_;
  std::vector<int> join_fds_;
};

}  // namespace evoscale::trainer_adapter

#endif  // EVOSCALE_TRAINER_ADAPTER_CGROUP_H_
