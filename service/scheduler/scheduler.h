// Scheduler: runs the trials of managed studies (a trial template with a command) as local
// processes through trainer_adapter (or, for trial_template.runner "slurm", as Slurm batch
// jobs), and reports them through StudyCore like any client would:
//
//  - every poll it lists the ACTIVE managed studies and, for each free slot (a study has
//    `trial_template.parallel_trials` slots), asks for one trial with the slot's own client
//    id ("evoscaled/slot-N"), so that after a restart, a preemption or an OOM kill each slot
//    gets its unfinished trial back and runs it again;
//  - each waiting trial gets its request: the template's `resources` until the study has
//    `learn_after_trials` trials that ran to their end, then what the study's load model
//    (load_model::TrialResourceModel, fitted on those trials' usage) predicts for its
//    parameters;
//  - trials start by priority (`trial_template.priority`, higher first): among those of the
//    highest priority waiting, the one whose request fits best (least memory left over), the
//    oldest on a tie; when none of them fits, lower priorities wait too (no backfill), and
//    running trials of lower priority are preempted if that frees enough: SIGTERM (a trainer
//    checkpoints into ${checkpoint_dir}), and their trials wait again, to resume later;
//  - the trial's progress events become measurements; after each one (and every poll) it asks
//    CheckTrialEarlyStoppingState, and stops the process when told to (early stopping, or a
//    client's StopTrial);
//  - at the end: the final event's metrics (plus evoscale/peak_rss_bytes, evoscale/cpu_seconds
//    and evoscale/wall_seconds) complete the trial, with its usage; a stopped trial completes
//    with its last measurement; an OOM kill runs the trial again with twice the memory (and
//    teaches the model); a failure, an OOM kill at the whole capacity or a final event without
//    the study's metrics makes it INFEASIBLE with the reason.
//
// On shutdown the running processes are stopped and their trials stay ACTIVE: they run again
// after the next start.
//
// Each scheduling pass (RunOnce) works in three steps, so that no lock of the scheduler is ever
// held across a call of the study core (which writes and, with --durability power, waits for
// fsync) or a model fit: it snapshots its state under mu_, calls the core with no lock held,
// then applies what it learned under mu_ (placement.h's pure Place decides what starts and what
// is preempted). Reads (running(), requested(), ...; a /metrics scrape) take mu_ only for a
// moment and never wait behind the disk.
//
// Thread-safe: every public method may be called from any thread. Time comes from the
// injected Clock (SchedulerOptions::clock); the processes come from a RunnerFactory.
#ifndef EVOSCALE_SERVICE_SCHEDULER_SCHEDULER_H_
#define EVOSCALE_SERVICE_SCHEDULER_SCHEDULER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "service/common/clock.h"
#include "service/scheduler/runner_factory.h"
#include "service/scheduler/trial_sizer.h"
#include "service/study/study_core.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale::service {

struct SchedulerOptions {
  int max_running_trials = 1;  // over all studies; 0 runs none (ask/tell only)
  int gpus = 0;                // GPUs this machine lends to trials (ids 0..gpus-1)
  // The CPU cores trials may request together (--capacity cpu=N): a trial starts only when its
  // request fits beside the requests of those running. 0: this machine's cores.
  double cpu_capacity = 0;
  absl::Duration poll_every = absl::Milliseconds(250);
  absl::Duration stop_grace = absl::Seconds(10);  // SIGTERM to SIGKILL
  // How often a running trial's heartbeat is refreshed (a trial that prints nothing for
  // longer than the study's heartbeat timeout would otherwise be handed to another client).
  absl::Duration heartbeat_every = absl::Seconds(30);
  // The memory trials may request together (--capacity memory=SIZE), packed as cpu_capacity
  // is; a trial OOM-killed at its request runs again with twice the memory, up to this, and
  // one that needs more is INFEASIBLE. 0: 80% of this machine's memory.
  int64_t memory_capacity_bytes = 0;
  // Where each trial's ${checkpoint_dir} is made: ROOT/STUDY_ID/TRIAL_ID, kept while the trial
  // runs or waits (a preempted trial resumes from it), removed when it ends. Empty: a folder in
  // the system's temporary directory.
  std::string checkpoint_root;
  // Trials of a study that must have run to their end before its requests are learned: until
  // then each trial requests the template's resources (a fit on fewer trials extrapolates
  // badly, and an OOM kill costs a whole rerun).
  int learn_after_trials = 3;
  // Receives each running trial's usage once a second (workload: the study's name, instance:
  // the trial's); evoscaled stores it in the telemetry store. Called from the trials' sampling
  // threads; must not block for long. Empty: not recorded.
  std::function<void(const v1::TelemetrySample&)> usage_sink;
  trainer_adapter::LocalRunnerOptions runner;
  // Studies whose trial_template.runner is "slurm" submit their trials as Slurm batch jobs
  // (trainer_adapter/slurm_runner.h) with this SLURM_CONF (evoscaled --slurm-conf; empty:
  // Slurm's default). Their scripts and output files go to CHECKPOINT_ROOT/slurm, which the
  // compute nodes must see. They are admitted against --capacity like local trials.
  std::string slurm_conf;
  // Where time comes from (slots' start times, heartbeats, a trial's elapsed time when it
  // reports none). nullptr: the real clock. Must outlive the scheduler.
  Clock* clock = nullptr;
  // Whether Create starts the scheduling thread (a pass every poll_every, and whenever a trial
  // ends). false: nothing runs until the caller calls RunOnce (tests).
  bool start_loop = true;
};

// Parses evoscaled's --capacity: "cpu=N,memory=SIZE,gpus=N", any of them in any order, into
// cpu_capacity, memory_capacity_bytes and gpus. SIZE is bytes, or a number with K, M, G, T
// (powers of 1000) or Ki, Mi, Gi, Ti (powers of 1024). INVALID_ARGUMENT naming the key.
absl::Status ParseCapacity(absl::string_view text, SchedulerOptions* options);

class Scheduler {
 public:
  // Makes the scheduler and, with options.start_loop, starts its thread (which first finishes
  // the trials a previous run left STOPPING). `core` (and options.clock) must outlive it.
  // `runners`: how trials run; nullptr: NewRunnerFactory (local processes, Slurm).
  // INVALID_ARGUMENT naming the option for a negative count or capacity.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(
      StudyCore* core, SchedulerOptions options, std::unique_ptr<RunnerFactory> runners = nullptr);
  ~Scheduler();  // stops the running trials (they stay ACTIVE) and joins every thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // One scheduling pass: reaps ended trials, stops those the study says should stop, refreshes
  // heartbeats, gives free slots their trials and starts (or preempts for) those that fit. The
  // trials' own threads then run them. Called by the scheduling thread; without it
  // (start_loop false), by the caller, one pass at a time.
  void RunOnce();

  int running();  // trials running now
  // The requests of the trials running now, summed (what --capacity is judged against).
  v1::ResourceRequest requested();
  // The capacity in force (--capacity, or the machine's defaults).
  v1::ResourceRequest capacity() const;
  // Active managed studies whose next trial waits for capacity (or GPUs, or
  // --max-running-trials), as of the last scheduling pass.
  int waiting_studies();
  // Trials preempted so far (stopped to make room for a trial of higher priority).
  int64_t preemptions();
  // How trials are contained: "cgroup v1 (...)" or "sampling /proc every ...: WHY".
  std::string enforcement() const { return runners_->enforcement(); }

 private:
  struct Slot;
  struct Pending;
  struct Key {
    std::string study;
    int slot;
    bool operator<(const Key& o) const { return std::tie(study, slot) < std::tie(o.study, o.slot); }
  };
  // A free slot that needs a trial from the core (SuggestTrials with its client id).
  struct Ask {
    Key key;
    v1::Study study;
  };

  Scheduler(StudyCore* core, SchedulerOptions options, std::unique_ptr<RunnerFactory> runners);
  int RunningLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::ResourceRequest RequestedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  // Trials of managed studies that a previous evoscaled left STOPPING (it died between a stop
  // and the trial's completion) end as a stop ends, once, at start: nothing runs them again.
  void FinishStoppingTrials();
  // Every study with a trial template command, in any state.
  std::vector<v1::Study> ManagedStudies();
  // The managed studies that may start trials, highest priority first, then the oldest.
  std::vector<v1::Study> SchedulableStudies();
  // The trials of `study` in `state`, all pages.
  std::vector<v1::Trial> TrialsIn(const std::string& study, v1::Trial::State state);
  // Under mu_: frees the slots whose trials ended; the running ones.
  std::vector<std::shared_ptr<Slot>> ReapSlots();
  // No lock: stops the running trials the core says should stop, refreshes the others'
  // heartbeats.
  void CheckRunning(const std::vector<std::shared_ptr<Slot>>& running);
  // Under mu_: the free slots of `managed` that need a trial; forgets the waiting trials of
  // studies no longer in it.
  std::vector<Ask> FreeSlots(const std::vector<v1::Study>& managed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: records what the asks got, places the waiting trials, starts and preempts.
  void Admit(const std::vector<std::pair<Ask, std::optional<v1::Trial>>>& got)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `pending` in slot `key` with `request` (its thread first sets the request in the
  // core, and ends at once if the trial is no longer ACTIVE).
  void StartTrial(const Key& key, Pending pending, const v1::ResourceRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string CheckpointDir(const v1::Trial& trial) const;
  void Drive(std::shared_ptr<Slot> slot, v1::Study study, v1::Trial trial,
             v1::ResourceRequest request, bool resumes);
  // After an OOM kill: runs the trial again with twice the memory (true), or says in
  // `outcome` why it cannot (false).
  bool RerunAfterOom(const v1::Study& study, const v1::Trial& trial,
                     trainer_adapter::TrialOutcome* outcome);
  void Report(const v1::Study& study, const v1::Trial& trial,
              const trainer_adapter::TrialOutcome& outcome);
  void Complete(const v1::CompleteTrialRequest& req);
  // Completes a stopped trial as a stop ends (Vizier): its last measurement is final, or,
  // without one, it is INFEASIBLE ("stopped before its first measurement").
  void CompleteStopped(v1::CompleteTrialRequest req);

  // Constant after construction.
  StudyCore* const core_;
  const SchedulerOptions options_;
  Clock* const clock_;
  const std::unique_ptr<RunnerFactory> runners_;
  const int64_t memory_capacity_;
  const double cpu_capacity_;
  const std::string checkpoint_root_;
  TrialSizer sizer_;  // thread-safe; taken after mu_ when both are held

  absl::Mutex pass_mu_;  // one scheduling pass at a time; held across core calls, never by readers
  bool finished_stopping_ ABSL_GUARDED_BY(pass_mu_) = false;

  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(pass_mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // a slot is free: schedule now, not at the next poll
  std::map<Key, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Pending> pending_ ABSL_GUARDED_BY(mu_);  // free slots' trials, waiting
  std::vector<bool> gpu_busy_ ABSL_GUARDED_BY(mu_);
  int waiting_studies_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t preemptions_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread loop_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_SCHEDULER_SCHEDULER_H_
