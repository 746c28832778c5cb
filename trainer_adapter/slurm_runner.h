// SlurmRunner: a TrialRunner (trial_runner.h) whose trials are Slurm batch jobs.
//
// Start() writes a batch script that exports the trial's environment (EVOSCALE_TRIAL, the
// launch's env, EVOSCALE_CPU_CORES, EVOSCALE_MEMORY_BYTES) and execs its argv, and submits it:
//   sbatch --parsable --job-name=TRIAL_NAME --output=DIR/NAME.out --error=DIR/NAME.err
//          --cpus-per-task=ceil(cpu_cores) --mem=ceil(memory_bytes / MiB)M [--gres=gpu:N]
//          [--partition=P] [--account=A] [EXTRA_ARGS...] [--chdir=WORK_DIR] DIR/NAME.sbatch
// where NAME is the trial name with '/' as '_'. Every Slurm client runs with SLURM_CONF from
// the options (when set).
//
// Measurements: the runner reads the job's output file as it grows, line by line, with the
// local runner's protocol parser (ParseTrialEvent), so the trial program needs no network
// route back to evoscaled; the file must be on a file system that both the compute node and
// evoscaled's host see (the usual shared home or scratch of a Slurm cluster).
//
// State: `scontrol show job` every poll (pending, running, and finished jobs for MinJobAge),
// then the job completion log (jobcomp/filetxt, JobCompLoc from `scontrol show config`) once
// the controller has forgotten the job. A job that none of them knows is FAILED "vanished".
// JobState OUT_OF_MEMORY (task/cgroup's OOM kill, or jobacct_gather's OverMemoryKill) is
// TrialOutcome::kOutOfMemory, as the local runner reports its cgroup's OOM kill.
//
// Usage: the wall time, and peak_rss_bytes / peak_memory_bytes from the final event's
// peak_rss_bytes where the trial reports it (the trainer does); no CPU time, no samples.
//
// Stop(grace): `scancel --signal=TERM --full` (the batch shell and what it runs), then after
// `grace` a plain `scancel` (Slurm's own SIGTERM, KillWait, SIGKILL). A pending job is
// cancelled at once.
//
// Re-attach: Start() first asks `squeue --name=TRIAL_NAME` for a job of that name still
// pending or running (one submitted before evoscaled restarted, or by another replica on the
// same database) and follows it instead of submitting another; its output file, wherever
// `scontrol show job` says it is (StdOut, StdErr), is then read from its start. Destroying a RunningTrial
// cancels its job if it still runs (the TrialRunner contract); only a runner that dies without
// its destructors (SIGKILL, a crash) leaves jobs to re-attach to.
//
// Thread-safe: Start() may be called from any thread; each trial has one polling thread.
#ifndef EVOSCALE_TRAINER_ADAPTER_SLURM_RUNNER_H_
#define EVOSCALE_TRAINER_ADAPTER_SLURM_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale::trainer_adapter {

struct SlurmRunnerOptions {
  std::string slurm_conf;  // SLURM_CONF for every Slurm client; empty: Slurm's own default
  std::string partition;   // --partition; empty: the cluster's default partition
  std::string account;     // --account; empty: the user's default account
  std::vector<std::string> extra_args;  // more sbatch options, passed as they are
  // Where batch scripts and output files go: must exist, and be seen by the compute nodes.
  std::string output_dir;
  // The job completion log; empty: JobCompLoc from `scontrol show config` when JobCompType is
  // jobcomp/filetxt, else none (a job the controller forgot is then "vanished").
  std::string jobcomp_path;
  absl::Duration poll_every = absl::Milliseconds(500);
  // How long a job may be unknown to scontrol and to the completion log (which Slurm writes
  // a moment after the job ends) before it counts as vanished.
  absl::Duration vanish_after = absl::Seconds(5);
  size_t stderr_tail_bytes = 4096;
  // How long one Slurm client call may take (a controller that does not answer makes
  // sbatch and scontrol retry for a while).
  absl::Duration command_timeout = absl::Seconds(30);
};

// Checks that the controller answers (`scontrol show config`) and that output_dir exists.
// FAILED_PRECONDITION saying which, with Slurm's own message.
absl::StatusOr<std::unique_ptr<TrialRunner>> NewSlurmRunner(SlurmRunnerOptions options);

}  // namespace evoscale::trainer_adapter

#endif  // EVOSCALE_TRAINER_ADAPTER_SLURM_RUNNER_H_
