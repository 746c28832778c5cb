// Per-trial cgroups: the kernel enforces a trial's memory limit and CPU quota on every process
// the trial starts (a double-forked grandchild included), counts its OOM kills and its CPU
// time, and lists its processes so that all of them end with the trial.
//
// Today: cgroup v1, with child groups made below this process's own groups in the memory, cpu
// and cpuacct hierarchies (as these machines mount them; root may create them). Where none is
// writable (or on a cgroup v2-only host: not yet supported), Detect says why and the local
// runner falls back to sampling /proc.
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
  // Finds this process's memory, cpu and cpuacct groups (/proc/self/cgroup) and where their
  // hierarchies are mounted (/proc/self/mountinfo), and checks that a child group can be made
  // in each. FAILED_PRECONDITION saying what is missing when not. Removes empty groups that an
  // earlier runner of the same `prefix` left behind (one killed with SIGKILL).
  static absl::StatusOr<std::unique_ptr<CgroupRoot>> Detect(const std::string& prefix = "evoscale");

  // Makes a group "PREFIX-PID-N" in each hierarchy with the memory limit (0: none) and the
  // CPU quota of `cpu_cores` (0: none) over a 100 ms period.
  absl::StatusOr<std::unique_ptr<TrialCgroup>> Create(int64_t memory_bytes, double cpu_cores);

  // "cgroup v1 (memory, cpu, cpuacct)".
  std::string mode() const;

 private:
  CgroupRoot(std::string prefix, std::string memory, std::string cpu, std::string cpuacct)
      : prefix_(std::move(prefix)),
        memory_(std::move(memory)),
        cpu_(std::move(cpu)),
        cpuacct_(std::move(cpuacct)) {}
  const std::string prefix_;
  // The folders of this process's own groups; constant after construction.
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

  int64_t oom_kills() const;          // memory.oom_control's oom_kill
  int64_t memory_bytes() const;       // memory.usage_in_bytes: what the limit is judged on
  int64_t peak_memory_bytes() const;  // memory.max_usage_in_bytes
  double cpu_seconds() const;         // cpuacct.usage
  int64_t memory_limit_bytes() const;  // memory.limit_in_bytes as the kernel holds it
  int64_t cpu_quota_us() const;        // cpu.cfs_quota_us (-1: none)

  const std::string& memory_dir() const { return memory_; }

 private:
  friend class CgroupRoot;
  TrialCgroup(std::string memory, std::string cpu, std::string cpuacct)
      : memory_(std::move(memory)), cpu_(std::move(cpu)), cpuacct_(std::move(cpuacct)) {}
  const std::string memory_, cpu_, cpuacct_;
  std::vector<int> join_fds_;
};

}  // namespace evoscale::trainer_adapter

#endif  // EVOSCALE_TRAINER_ADAPTER_CGROUP_H_
