// A real single-node Slurm cluster for tests and benches: munged, slurmctld and slurmd started
// as root from Debian's slurm-wlm and munge, each cluster in a temp folder of its own (munge
// key and socket, slurm.conf, state, spool, logs, the job completion log), on free ports, so
// that several run side by side (ctest -j). The node is this machine: its CPUs, and its memory
// less a margin. Memory is enforced by Slurm: task/cgroup where this machine lets root make
// cgroup v1 groups, otherwise jobacct_gather's OverMemoryKill (sampled every second). Both
// end an over-memory job OUT_OF_MEMORY.
//
// The destructor cancels every job and stops (SIGTERM, then SIGKILL after a grace, then wait)
// every daemon it started; the daemons also get SIGTERM if the test process dies
// (PR_SET_PDEATHSIG). Not thread-safe, except Run(), which may be called from any thread.
#ifndef EVOSCALE_TESTS_SUPPORT_SLURM_CLUSTER_H_
#define EVOSCALE_TESTS_SUPPORT_SLURM_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "trainer_adapter/internal/command.h"

namespace evoscale::testing {

struct SlurmClusterOptions {
  enum class MemoryEnforcement {
    kAuto,            // task/cgroup if a cgroup v1 group can be made here, else OverMemoryKill
    kCgroup,          // proctrack/cgroup + task/cgroup (cgroup.conf: ConstrainRAMSpace)
    kOverMemoryKill,  // proctrack/linuxproc + JobAcctGatherParams=OverMemoryKill
  };
  MemoryEnforcement memory = MemoryEnforcement::kAuto;
  // How long the node may take to show up idle in sinfo.
  absl::Duration start_timeout = absl::Seconds(60);
};

class SlurmCluster {
 public:
  // Why no cluster can start here (not root; munged, slurmctld, slurmd or a client missing),
  // or "" when one can.
  static std::string UnavailableReason();
  // Why MemoryEnforcement::kCgroup cannot work here (root may not make a cgroup v1 group in
  // the memory, freezer and cpuset hierarchies), or "" when it can.
  static std::string CgroupUnavailableReason();

  // Starts the daemons and waits until sinfo shows the node idle. FAILED_PRECONDITION with
  // UnavailableReason() where none can start; INTERNAL / DEADLINE_EXCEEDED with the tails of
  // the daemons' logs when a start fails.
  static absl::StatusOr<std::unique_ptr<SlurmCluster>> Start(SlurmClusterOptions options = {});

  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::string& dir() const { return dir_; }              // the temp folder
  const std::string& conf_path() const { return conf_path_; }  // its slurm.conf
  const std::string& jobcomp_path() const { return jobcomp_path_; }
  // "task/cgroup" or "OverMemoryKill: WHY no cgroup".
  const std::string& enforcement() const { return enforcement_; }
  int cpus() const { return cpus_; }
  int64_t real_memory_mb() const { return real_memory_mb_; }
  // What Slurm's clients need to reach this cluster: {"SLURM_CONF": conf_path()}.
  std::map<std::string, std::string> env() const { return {{"SLURM_CONF", conf_path_}}; }

  // Runs a Slurm client (sbatch, squeue, scontrol, ...) against this cluster.
  absl::StatusOr<trainer_adapter::internal::CommandResult> Run(
      const std::vector<std::string>& argv, absl::Duration timeout = absl::Seconds(30)) const;

  // `scontrol show job --oneliner ID` as KEY -> VALUE; NOT_FOUND once Slurm forgot the job.
  absl::StatusOr<std::map<std::string, std::string>> ShowJob(const std::string& job_id) const;

  // Waits until the job completion log records `job_id`'s end; its record (JobState=...).
  // DEADLINE_EXCEEDED when it has not ended within `timeout`.
  absl::StatusOr<std::map<std::string, std::string>> AwaitJobEnd(
      const std::string& job_id, absl::Duration timeout = absl::Seconds(60)) const;

  // Stops slurmctld (SIGTERM, then wait) and starts it again, with the state it saved, or,
  // with `clear_state`, none (slurmctld -c: every job forgotten, as after a lost
  // StateSaveLocation). Returns once the controller answers again.
  absl::Status RestartController(bool clear_state);

  // The last lines of the daemons' logs, for failure messages.
  std::string LogTails() const;

 private:
  SlurmCluster() = default;
  absl::Status Launch(const SlurmClusterOptions& options);
  absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log);
  void StopDaemon(pid_t pid);

  std::string dir_, conf_path_, jobcomp_path_, enforcement_;
  int cpus_ = 0;
  int64_t real_memory_mb_ = 0;
  std::vector<pid_t> daemons_;  // started, in start order; stopped in reverse
  size_t controller_ = 0;       // slurmctld's place in daemons_
};

// A test whose SetUp starts a cluster in cluster_, or skips (saying why) where none can run.
class SlurmClusterTest : public ::testing::Test {
 protected:
  void SetUp() override;
  virtual SlurmClusterOptions cluster_options() const { return {}; }
  std::unique_ptr<SlurmCluster> cluster_;
};

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_SUPPORT_SLURM_CLUSTER_H_
