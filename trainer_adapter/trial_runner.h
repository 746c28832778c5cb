// TrialRunner: runs one managed trial and reports what it prints (trainer protocol events,
// trial_event.h) and what it uses (CPU, memory), until it ends or is stopped.
//
// The local runner (NewLocalProcessRunner) starts the trial as a child process in its own
// process group; the Slurm runner (slurm_runner.h) submits it as a batch job.
#ifndef EVOSCALE_TRAINER_ADAPTER_TRIAL_RUNNER_H_
#define EVOSCALE_TRAINER_ADAPTER_TRIAL_RUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "trainer_adapter/trial_event.h"

namespace evoscale::trainer_adapter {

// What a trial may use. 0 = no limit / none.
struct ResourceLimits {
  double cpu_cores = 0;      // exported as EVOSCALE_CPU_CORES (the trial sizes its threads)
  int64_t memory_bytes = 0;  // enforced: see LocalRunnerOptions::sample_every
  int gpus = 0;
};

struct TrialLaunch {
  std::string trial_name;         // exported as EVOSCALE_TRIAL
  std::vector<std::string> argv;  // argv[0]: the program; searched in PATH if it has no '/'
  std::map<std::string, std::string> env;  // added to (or replacing) the runner's environment
  ResourceLimits limits;
  // GPUs the trial may use, exported as CUDA_VISIBLE_DEVICES (empty: none, so that a trial
  // never lands on a GPU it was not given).
  std::vector<int> gpu_ids;
  std::string work_dir;  // empty: the runner's
  // A job of several processes (an MPI program): the local runner starts argv under Open MPI's
  // `mpirun -np N` (found in PATH), all of it in the trial's one cgroup. 1: argv itself.
  int processes = 1;
};

// Usage of the trial's processes (its first process and their descendants) at one moment.
struct UsageSample {
  absl::Time time;
  // Average since the previous sample: the trial's cgroup's CPU time where it has one, else
  // its processes'.
  double cpu_cores = 0;
  int64_t rss_bytes = 0;     // resident memory, summed over the processes
  int64_t memory_bytes = 0;  // what its memory limit is judged on: the cgroup's charge, or RSS
  int processes = 0;
};

// Receives a running trial's reports. Calls come from the runner's threads, one at a time per
// trial, in order; they must not block for long.
class TrialObserver {
 public:
  virtual ~TrialObserver() = default;
  virtual void OnEvent(const TrialEvent& event) { (void)event; }
  virtual void OnUsage(const UsageSample& sample) { (void)sample; }
};

struct TrialOutcome {
  enum class Kind {
    kSucceeded,    // exited 0 after a "final" event
    kFailed,       // anything else: non-zero exit, a signal, an "error" event, no "final"
    kOutOfMemory,  // OOM-killed in its cgroup, or killed by the runner for using more than
                   // limits.memory_bytes (sampling)
    kStopped,      // Stop() was called
  };
  Kind kind = Kind::kFailed;
  std::string reason;                 // one line for people; empty when kSucceeded
  int exit_code = -1;                 // -1 if it died of a signal
  int signal = 0;                     // the signal that ended it, or 0
  std::optional<TrialEvent> final;    // the last "final" event
  std::optional<TrialEvent> error;    // the last "error" event
  int64_t events = 0;                 // protocol lines parsed
  int64_t other_lines = 0;            // stdout lines that were not protocol events (logs)
  std::string first_bad_line_error;   // why the first such line was not an event
  std::string stderr_tail;            // the last few KiB of stderr
  int64_t peak_rss_bytes = 0;         // the largest sampled RSS of the trial's processes
  // In a cgroup: the group's peak memory charge (what its limit is judged on: resident memory
  // and page cache); else peak_rss_bytes.
  int64_t peak_memory_bytes = 0;
  // CPU time of the trial's processes: the cgroup's account of every process that ran in it,
  // or, when sampling, what the samples saw.
  double cpu_seconds = 0;
  int64_t oom_kills = 0;              // processes the kernel OOM-killed in the trial's cgroup
  // How the limits were enforced: "cgroup v1 (memory, cpu, cpuacct)", or "sampling /proc
  // every 200ms: " and why no cgroup could be used.
  std::string enforcement;
  absl::Duration wall_time;
};

absl::string_view TrialOutcomeKindName(TrialOutcome::Kind kind);

// Takes one line the trial printed (the trainer protocol; a trailing '\r' is dropped) into
// `outcome`: a protocol event is counted (and kept when final or error) and returned; any
// other line is counted as a log line (the first one's parse error kept) and gives nullopt.
// Every runner reads its trial's output through this.
std::optional<TrialEvent> RecordOutputLine(absl::string_view line, TrialOutcome* outcome);

class RunningTrial {
 public:
  virtual ~RunningTrial() = default;  // stops the trial if it still runs, then waits
  virtual int pid() const = 0;  // the trial's first process; -1 where it is not local
  // The cluster's id of the trial (a Slurm job id); empty for a local process.
  virtual std::string job_id() const { return ""; }
  // Asks the trial to end (SIGTERM to its process group), and kills the group (SIGKILL) if it
  // is still there after `grace`. Returns at once; Wait() gives the outcome (kStopped).
  virtual void Stop(absl::Duration grace) = 0;
  // Blocks until the trial has ended and its output is read; the same outcome every call.
  virtual const TrialOutcome& Wait() = 0;
};

class TrialRunner {
 public:
  virtual ~TrialRunner() = default;
  // Starts the trial. INVALID_ARGUMENT for an empty argv; NOT_FOUND / FAILED_PRECONDITION
  // when the program cannot be run (it is not found or not executable) or the work_dir is
  // missing. `observer` (may be null) must outlive the RunningTrial.
  virtual absl::StatusOr<std::unique_ptr<RunningTrial>> Start(const TrialLaunch& launch,
                                                              TrialObserver* observer) = 0;
  // How trials started now are contained (TrialOutcome::enforcement), e.g. "cgroup v1
  // (memory, cpu, cpuacct)" or "sampling /proc every 200ms: WHY".
  virtual std::string enforcement() const = 0;
};

struct LocalRunnerOptions {
  // Each trial in cgroups of its own (trainer_adapter/cgroup.h) when this process may make
  // them: the kernel then enforces limits.memory_bytes (an OOM kill ends the trial
  // kOutOfMemory) and limits.cpu_cores (a CPU quota), and every process the trial started,
  // a double-forked one included, is killed when it ends. Otherwise, or when false, the limits
  // are enforced by sampling (below) and TrialOutcome::enforcement says why.
  bool use_cgroups = true;
  // How often the trial's CPU and memory are sampled (and, without a cgroup, the memory limit
  // checked: a trial is killed at the first sample over its limit, so a spike shorter than
  // this can pass).
  absl::Duration sample_every = absl::Milliseconds(200);
  size_t stderr_tail_bytes = 4096;
  // The trial's first process gets SIGKILL when the thread that called Start() ends
  // (PR_SET_PDEATHSIG), so that a runner killed with SIGKILL leaves no orphan training on.
  // Only for a caller whose starting thread outlives its trials (evoscaled's scheduler starts
  // each trial from a thread that waits for it). Processes the trial forks are not covered.
  bool die_with_starting_thread = false;
};

std::unique_ptr<TrialRunner> NewLocalProcessRunner(LocalRunnerOptions options = {});

}  // namespace evoscale::trainer_adapter

#endif  // EVOSCALE_TRAINER_ADAPTER_TRIAL_RUNNER_H_
