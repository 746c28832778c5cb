// The Slurm TrialRunner: one batch job per trial, followed through scontrol, the job
// completion log and the job's output file (slurm_runner.h).
#include "trainer_adapter/slurm_runner.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "trainer_adapter/internal/command.h"
#include "trainer_adapter/internal/slurm_text.h"

namespace evoscale::trainer_adapter {
namespace {

using internal::CommandResult;
using internal::DescribeFailure;
using internal::RunCommand;

constexpr int64_t kMiB = int64_t{1} << 20;

// CPUs per task and the memory flag for a trial of `tasks` processes: --mem is per node, so a
// job of one task asks for the trial's memory with it; a job of several, whose tasks Slurm may
// place on several nodes, asks per CPU, so that the job's total is the trial's memory wherever
// they land. "" without a memory limit.
int64_t CpusPerTask(const TrialLaunch& launch, int tasks) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(launch.limits.cpu_cores / tasks)));
}
std::string MemoryFlag(const TrialLaunch& launch, int tasks) {
  if (launch.limits.memory_bytes <= 0) return "";
  if (tasks <= 1) return absl::StrCat("--mem=", (launch.limits.memory_bytes + kMiB - 1) / kMiB, "M");
  const int64_t cpus = tasks * CpusPerTask(launch, tasks);
  return absl::StrCat("--mem-per-cpu=", (launch.limits.memory_bytes + cpus * kMiB - 1) / (cpus * kMiB),
                      "M");
}
constexpr size_t kMaxLineBytes = 1 << 20;

// States after which a job runs no more (Slurm's job_state_string); every other state
// (PENDING, RUNNING, COMPLETING, SUSPENDED, REQUEUED, ...) is still on its way.
bool IsFinalState(absl::string_view state) {
  static const std::set<std::string, std::less<>> kFinal = {
      "COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",  "OUT_OF_MEMORY",
      "NODE_FAIL", "BOOT_FAIL", "DEADLINE",  "PREEMPTED"};
  return kFinal.contains(state);
}

// 'text' for /bin/sh: single quotes, with each ' as '\''.
std::string ShellQuote(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

bool IsShellName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Where the job stands, as Slurm says it.
struct JobStatus {
  bool known = false;     // scontrol or the completion log knows the job
  bool reachable = true;  // the controller answered (a down controller is not a vanished job)
  std::string state;      // JobState
  std::string reason;     // Reason
  std::string exit_code;  // ExitCode "CODE:SIGNAL"
  std::string source;     // "scontrol" or "the job completion log"
  std::string error;      // what failed, when !reachable
};

// jobacct_gather's OverMemoryKill: slurmstepd kills the job and says so in its stderr.
bool KilledOverMemory(const JobStatus& status, absl::string_view stderr_tail) {
  return status.state != "COMPLETED" && absl::StrContains(stderr_tail, "slurmstepd") &&
         absl::StrContains(stderr_tail, "Exceeded job memory limit");
}

std::string ReadFileFrom(const std::string& path, int64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(offset);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class SlurmTrial : public RunningTrial {
 public:
  SlurmTrial(std::string job_id, std::string out_path, std::string err_path,
             TrialObserver* observer, const SlurmRunnerOptions& options,
             std::map<std::string, std::string> env, int64_t memory_limit,
             std::string memory_flag, bool reattached)
      : job_id_(std::move(job_id)),
        out_path_(std::move(out_path)),
        err_path_(std::move(err_path)),
        observer_(observer),
        options_(options),
        env_(std::move(env)),
        memory_limit_(memory_limit),
        memory_flag_(std::move(memory_flag)),
        start_(absl::Now()) {
    outcome_.enforcement = absl::StrCat("slurm job ", job_id_, reattached ? " (re-attached)" : "",
                                        ": memory enforced by Slurm (", memory_flag_.empty() ? "--mem" : memory_flag_, ")");
    poller_ = std::thread(&SlurmTrial::Poll, this);
  }

  ~SlurmTrial() override {
    bool running;
    {
      absl::MutexLock lock(&mu_);
      running = !ended_;
    }
    if (running) Stop(absl::ZeroDuration());
    Wait();
  }

  int pid() const override { return -1; }
  std::string job_id() const override { return job_id_; }

  void Stop(absl::Duration grace) override {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    stop_requested_ = true;
    const absl::Time deadline = absl::Now() + grace;
    if (deadline < cancel_at_) cancel_at_ = deadline;
  }

  const TrialOutcome& Wait() override {
    absl::MutexLock wait_lock(&wait_mu_);
    if (waited_) return outcome_;
    if (poller_.joinable()) poller_.join();
    waited_ = true;
    return outcome_;
  }

 private:
  absl::StatusOr<CommandResult> Slurm(const std::vector<std::string>& argv) const {
    return RunCommand(argv, env_, options_.command_timeout);
  }

  // The job's state: scontrol while the controller remembers the job, then the completion log.
  JobStatus Query() const {
    JobStatus s;
    const std::vector<std::string> argv = {"scontrol", "show", "job", "--oneliner", job_id_};
    absl::StatusOr<CommandResult> r = Slurm(argv);
    if (!r.ok() || (r->exit_code != 0 && !absl::StrContains(r->err, "Invalid job id"))) {
      s.reachable = false;
      s.error = r.ok() ? DescribeFailure(argv, *r) : std::string(r.status().message());
      return s;
    }
    if (r->exit_code == 0) {
      std::map<std::string, std::string> job = internal::ParseSlurmRecord(r->out);
      s.known = true;
      s.state = job["JobState"];
      s.reason = job["Reason"];
      s.exit_code = job["ExitCode"];
      s.source = "scontrol";
      return s;
    }
    if (!options_.jobcomp_path.empty()) {
      const std::string log = ReadFileFrom(options_.jobcomp_path, 0);
      std::vector<std::map<std::string, std::string>> records =
          internal::JobCompRecords(log, job_id_);
      if (!records.empty()) {
        s.known = true;
        s.state = records.back()["JobState"];
        s.exit_code = records.back()["ExitCode"];
        s.source = "the job completion log";
      }
    }
    return s;
  }

  // Cancels the job: Slurm's SIGTERM, KillWait, SIGKILL.
  void Cancel() { (void)Slurm({"scancel", job_id_}); }

  // SIGTERM to the batch shell and what it runs. A pending job is cancelled instead. False
  // when the signal could not be sent yet (a job whose batch step is still starting): the
  // caller tries again at the next poll.
  bool SignalTerm() {
    absl::StatusOr<CommandResult> r = Slurm({"scancel", "--signal=TERM", "--full", job_id_});
    if (r.ok() && r->exit_code == 0) return true;
    const JobStatus status = Query();
    if (!status.known || status.state == "PENDING" || IsFinalState(status.state)) {
      Cancel();
      return true;
    }
    return false;
  }

  void Line(absl::string_view line) {
    std::optional<TrialEvent> e = RecordOutputLine(line, &outcome_);
    if (e.has_value() && observer_ != nullptr) observer_->OnEvent(*e);
  }

  // Hands the complete lines the output file gained since the last call to Line(); at the
  // end (`last`), also a last line without its newline.
  void ReadOutput(bool last) {
    const std::string fresh = ReadFileFrom(out_path_, offset_);
    offset_ += static_cast<int64_t>(fresh.size());
    pending_ += fresh;
    size_t begin = 0;
    for (size_t nl; (nl = pending_.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      Line(absl::string_view(pending_).substr(begin, nl - begin));
    }
    pending_.erase(0, begin);
    if (pending_.size() > kMaxLineBytes) {  // an endless line: count it, drop it
      Line(absl::string_view(pending_).substr(0, 64));
      pending_.clear();
    }
    if (last && !pending_.empty()) {
      Line(pending_);
      pending_.clear();
    }
  }

  void Poll() {
    absl::Time unknown_since = absl::InfiniteFuture();
    bool term_tried = false;  // the first SIGTERM was tried (at once, not at the next poll)
    bool term_sent = false;
    JobStatus status;
    for (;;) {
      bool stop, cancel = false;
      {
        absl::MutexLock lock(&mu_);
        const absl::Time wake = std::min(absl::Now() + options_.poll_every, cancel_at_);
        auto stop_news = [this, term_tried]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_requested_ && !term_tried;
        };
        mu_.AwaitWithDeadline(absl::Condition(&stop_news), wake);
        stop = stop_requested_;
        if (absl::Now() >= cancel_at_) {
          cancel = true;
          cancel_at_ = absl::InfiniteFuture();
        }
      }
      if (cancel) {
        Cancel();
        term_tried = term_sent = true;
      } else if (stop && !term_sent) {
        term_tried = true;
        term_sent = SignalTerm();
      }
      ReadOutput(/*last=*/false);
      status = Query();
      if (status.known && IsFinalState(status.state)) break;
      if (status.known || !status.reachable) {
        unknown_since = absl::InfiniteFuture();
        continue;
      }
      const absl::Time now = absl::Now();
      if (unknown_since == absl::InfiniteFuture()) unknown_since = now;
      if (now - unknown_since >= options_.vanish_after) break;
    }
    ReadOutput(/*last=*/true);
    Finish(status);
  }

  void Finish(const JobStatus& status) {
    std::string tail = ReadFileFrom(err_path_, 0);
    if (tail.size() > options_.stderr_tail_bytes) {
      tail.erase(0, tail.size() - options_.stderr_tail_bytes);
    }
    absl::MutexLock lock(&mu_);
    ended_ = true;
    TrialOutcome& o = outcome_;
    o.stderr_tail = std::move(tail);
    o.wall_time = absl::Now() - start_;
    // What the trial says of itself (the trainer's final line has its peak RSS): Slurm's own
    // accounting of the job needs slurmdbd.
    if (o.final.has_value() && o.final->peak_rss_bytes > 0) {
      o.peak_rss_bytes = o.peak_memory_bytes = o.final->peak_rss_bytes;
    }
    // ExitCode is "CODE:SIGNAL".
    std::pair<std::string, std::string> code = absl::StrSplit(status.exit_code, ':');
    int exit_code = -1, signal = 0;
    if (absl::SimpleAtoi(code.first, &exit_code) && absl::SimpleAtoi(code.second, &signal) &&
        signal > 0 && signal < 65) {
      o.signal = signal;
      o.exit_code = -1;
    } else {
      o.exit_code = exit_code;
    }
    const std::string slurm_says = absl::StrCat(
        "Slurm job ", job_id_, " ", status.state,
        status.reason.empty() || status.reason == "None" ? ""
                                                         : absl::StrCat(" (", status.reason, ")"),
        ", exit code ", status.exit_code.empty() ? "?" : status.exit_code);
    if (stop_requested_) {
      o.kind = TrialOutcome::Kind::kStopped;
      o.reason = "stopped";
    } else if (!status.known) {
      o.kind = TrialOutcome::Kind::kFailed;
      o.reason = absl::StrCat("Slurm job ", job_id_, " vanished: neither scontrol nor ",
                              options_.jobcomp_path.empty()
                                  ? "a job completion log (none configured)"
                                  : absl::StrCat("the job completion log ", options_.jobcomp_path),
                              " knows it");
    } else if (status.state == "OUT_OF_MEMORY" || KilledOverMemory(status, o.stderr_tail)) {
      // task/cgroup's OOM kill ends a job OUT_OF_MEMORY; jobacct_gather's OverMemoryKill ends
      // it FAILED, with slurmstepd's "Exceeded job memory limit" in the job's stderr.
      o.kind = TrialOutcome::Kind::kOutOfMemory;
      o.oom_kills = 1;
      o.reason = absl::StrFormat(
          "%s%s: memory limit %d bytes (%s)", slurm_says,
          status.state == "OUT_OF_MEMORY" ? "" : " (slurmstepd: Exceeded job memory limit)",
          memory_limit_, memory_flag_);
    } else if (status.state == "COMPLETED" && o.exit_code == 0 && o.final.has_value() &&
               !o.error.has_value()) {
      o.kind = TrialOutcome::Kind::kSucceeded;
    } else {
      o.kind = TrialOutcome::Kind::kFailed;
      if (o.error.has_value()) {
        o.reason = absl::StrCat("error event: ", o.error->code.empty() ? "" : o.error->code + ": ",
                                o.error->message, "; ", slurm_says);
      } else if (status.state == "COMPLETED" && o.exit_code == 0) {
        o.reason = absl::StrCat("exited 0 without a \"final\" event; ", slurm_says);
      } else {
        o.reason = slurm_says;
      }
      absl::string_view err = absl::StripTrailingAsciiWhitespace(o.stderr_tail);
      if (!err.empty()) {
        const size_t nl = err.rfind('\n');
        absl::StrAppend(&o.reason,
                        "; stderr: ", nl == absl::string_view::npos ? err : err.substr(nl + 1));
      }
    }
  }

  // Constant after construction.
  const std::string job_id_;
  const std::string out_path_, err_path_;
  TrialObserver* const observer_;
  const SlurmRunnerOptions options_;
  const std::map<std::string, std::string> env_;  // for the Slurm clients
  const int64_t memory_limit_;
  const std::string memory_flag_;  // How sbatch was asked for it.
  const absl::Time start_;
  std::thread poller_;

  // Used by the polling thread alone.
  std::string pending_;  // output read but not yet handed on (a line's start)
  int64_t offset_ = 0;   // how far the output file has been read

  absl::Mutex wait_mu_;
  bool waited_ ABSL_GUARDED_BY(wait_mu_) = false;

  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time cancel_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  TrialOutcome outcome_;  // written by the polling thread; read after Wait()
};

class SlurmRunner : public TrialRunner {
 public:
  explicit SlurmRunner(SlurmRunnerOptions options) : options_(std::move(options)) {
    if (!options_.slurm_conf.empty()) env_["SLURM_CONF"] = options_.slurm_conf;
  }

  std::string enforcement() const override {
    return "slurm: memory enforced by Slurm (--mem; --mem-per-cpu for several tasks)";
  }

  absl::StatusOr<std::unique_ptr<RunningTrial>> Start(const TrialLaunch& launch,
                                                      TrialObserver* observer) override {
    if (absl::Status st = CheckLaunch(launch); !st.ok()) return st;
    const std::string base = absl::StrCat(options_.output_dir, "/",
                                          absl::StrReplaceAll(launch.trial_name, {{"/", "_"}}));
    const std::string out_path = absl::StrCat(base, ".out");
    const std::string err_path = absl::StrCat(base, ".err");
    const int tasks = std::max(1, launch.processes);
    const std::string memory_flag = MemoryFlag(launch, tasks);

    // A job of this name still queued or running (submitted before a restart): follow it.
    absl::StatusOr<int64_t> queued = NewestQueuedJob(launch.trial_name);
    if (!queued.ok()) return queued.status();
    if (*queued >= 0) {
      // Its output files are where its submitter put them: another replica's output_dir, or
      // this one's before a restart with other options.
      const std::string job_id = absl::StrCat(*queued);
      std::string job_out = out_path, job_err = err_path;
      const std::vector<std::string> show = {"scontrol", "show", "job", "--oneliner", job_id};
      if (absl::StatusOr<CommandResult> r = RunCommand(show, env_, options_.command_timeout);
          r.ok() && r->exit_code == 0) {
        std::map<std::string, std::string> job = internal::ParseSlurmRecord(r->out);
        if (!job["StdOut"].empty()) job_out = job["StdOut"];
        if (!job["StdErr"].empty()) job_err = job["StdErr"];
      }
      return std::unique_ptr<RunningTrial>(std::make_unique<SlurmTrial>(
          job_id, job_out, job_err, observer, options_, env_, launch.limits.memory_bytes,
          memory_flag, /*reattached=*/true));
    }

    // What an earlier run of the trial (before an OOM rerun) printed is not this run's.
    std::remove(out_path.c_str());
    std::remove(err_path.c_str());
    const std::string script_path = absl::StrCat(base, ".sbatch");
    if (absl::Status st = WriteBatchScript(launch, tasks, script_path); !st.ok()) return st;
    std::vector<std::string> sbatch = {
        "sbatch",
        "--parsable",
        absl::StrCat("--job-name=", launch.trial_name),
        absl::StrCat("--output=", out_path),
        absl::StrCat("--error=", err_path),
        absl::StrCat("--ntasks=", tasks),
        absl::StrCat("--cpus-per-task=", CpusPerTask(launch, tasks))};
    if (!memory_flag.empty()) sbatch.push_back(memory_flag);
    if (launch.limits.gpus > 0) sbatch.push_back(absl::StrCat("--gres=gpu:", launch.limits.gpus));
    if (!options_.partition.empty())
      sbatch.push_back(absl::StrCat("--partition=", options_.partition));
    if (!options_.account.empty()) sbatch.push_back(absl::StrCat("--account=", options_.account));
    sbatch.insert(sbatch.end(), options_.extra_args.begin(), options_.extra_args.end());
    if (!launch.work_dir.empty()) sbatch.push_back(absl::StrCat("--chdir=", launch.work_dir));
    sbatch.push_back(script_path);
    absl::StatusOr<std::string> job_id = Submit(sbatch);
    if (!job_id.ok()) return job_id.status();
    return std::unique_ptr<RunningTrial>(std::make_unique<SlurmTrial>(
        *job_id, out_path, err_path, observer, options_, env_, launch.limits.memory_bytes,
        memory_flag, /*reattached=*/false));
  }

  const SlurmRunnerOptions& options() const { return options_; }
  SlurmRunnerOptions& mutable_options() { return options_; }
  const std::map<std::string, std::string>& env() const { return env_; }

 private:
  static absl::Status CheckLaunch(const TrialLaunch& launch) {
    if (launch.argv.empty() || launch.argv[0].empty()) {
      return absl::InvalidArgumentError("argv: must name a program");
    }
    if (launch.limits.memory_bytes < 0 || launch.limits.cpu_cores < 0 || launch.limits.gpus < 0) {
      return absl::InvalidArgumentError("limits: must be >= 0");
    }
    if (launch.trial_name.empty()) {
      return absl::InvalidArgumentError("trial_name: a Slurm job needs a name");
    }
    for (const auto& [k, v] : launch.env) {
      if (!IsShellName(k)) {
        return absl::InvalidArgumentError(absl::StrCat("env: bad variable name \"", k, "\""));
      }
    }
    return absl::OkStatus();
  }

  // The id of the newest job named `name` that Slurm still has queued or running; -1: none.
  absl::StatusOr<int64_t> NewestQueuedJob(const std::string& name) const {
    const std::vector<std::string> squeue = {"squeue", "--noheader", "--format=%i",
                                             absl::StrCat("--name=", name)};
    absl::StatusOr<CommandResult> queued = RunCommand(squeue, env_, options_.command_timeout);
    if (!queued.ok()) return queued.status();
    if (queued->exit_code != 0) {
      return absl::UnavailableError(DescribeFailure(squeue, *queued));
    }
    int64_t newest = -1;
    for (absl::string_view id : absl::StrSplit(queued->out, '\n', absl::SkipWhitespace())) {
      int64_t n = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(id), &n)) newest = std::max(newest, n);
    }
    return newest;
  }

  // The batch script: the trial's environment, then its program in place of the shell.
  static absl::Status WriteBatchScript(const TrialLaunch& launch, int tasks,
                                       const std::string& script_path) {
    std::vector<std::string> script = {"#!/bin/sh",
                                       absl::StrCat("# evoscale trial ", launch.trial_name)};
    std::map<std::string, std::string> env = launch.env;
    env["EVOSCALE_TRIAL"] = launch.trial_name;
    if (launch.limits.cpu_cores > 0) {
      env["EVOSCALE_CPU_CORES"] = absl::StrFormat("%g", launch.limits.cpu_cores);
    }
    if (launch.limits.memory_bytes > 0) {
      env["EVOSCALE_MEMORY_BYTES"] = absl::StrCat(launch.limits.memory_bytes);
    }
    // With --gres Slurm sets CUDA_VISIBLE_DEVICES to the GPUs it gave; without, none.
    if (launch.limits.gpus == 0) env["CUDA_VISIBLE_DEVICES"] = "";
    std::vector<std::string> argv = launch.argv;
    if (tasks > 1) {
      // A job of several tasks: Open MPI's mpirun, inside the allocation, starts them on the
      // job's nodes (it reads the allocation from Slurm's environment). As root (a job submitted
      // by a root evoscaled) Open MPI wants to be told that is meant.
      env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
      env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
      argv = {"mpirun", "-np", absl::StrCat(tasks), "--bind-to", "none"};
      argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
    }
    for (const auto& [k, v] : env) script.push_back(absl::StrCat("export ", k, "=", ShellQuote(v)));
    std::vector<std::string> quoted;
    for (const std::string& a : argv) quoted.push_back(ShellQuote(a));
    script.push_back(absl::StrCat("exec ", absl::StrJoin(quoted, " ")));
    std::ofstream out(script_path, std::ios::trunc);
    out << absl::StrJoin(script, "\n") << "\n";
    if (!out.flush()) {
      return absl::FailedPreconditionError(absl::StrCat("cannot write ", script_path));
    }
    return absl::OkStatus();
  }

  // Submits the job; its id.
  absl::StatusOr<std::string> Submit(const std::vector<std::string>& sbatch) const {
    absl::StatusOr<CommandResult> submitted = RunCommand(sbatch, env_, options_.command_timeout);
    if (!submitted.ok()) return submitted.status();
    if (submitted->exit_code != 0) {
      // Slurm refused the request itself (an unknown partition, more than a node has).
      return absl::FailedPreconditionError(DescribeFailure(sbatch, *submitted));
    }
    // --parsable prints "ID" or "ID;CLUSTER".
    std::string job_id(absl::StripAsciiWhitespace(
        absl::string_view(submitted->out).substr(0, submitted->out.find(';'))));
    int64_t id = 0;
    if (!absl::SimpleAtoi(job_id, &id)) {
      return absl::InternalError(
          absl::StrCat("sbatch printed no job id: \"", submitted->out, "\""));
    }
    return job_id;
  }

  SlurmRunnerOptions options_;              // constant once NewSlurmRunner returns
  std::map<std::string, std::string> env_;  // SLURM_CONF for the clients, when set
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrialRunner>> NewSlurmRunner(SlurmRunnerOptions options) {
  struct stat st {};
  if (options.output_dir.empty() || stat(options.output_dir.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("output_dir \"", options.output_dir, "\": not a directory"));
  }
  auto runner = std::make_unique<SlurmRunner>(std::move(options));
  const std::vector<std::string> argv = {"scontrol", "show", "config"};
  absl::StatusOr<CommandResult> config =
      RunCommand(argv, runner->env(), runner->options().command_timeout);
  if (!config.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Slurm controller does not answer: ", config.status().message()));
  }
  if (config->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Slurm controller does not answer: ", DescribeFailure(argv, *config)));
  }
  if (runner->options().jobcomp_path.empty()) {
    // "JobCompLoc              = /path" and "JobCompType             = jobcomp/filetxt".
    std::map<std::string, std::string> settings;
    for (absl::string_view line : absl::StrSplit(config->out, '\n')) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(line, absl::MaxSplits('=', 1));
      settings[std::string(absl::StripAsciiWhitespace(kv.first))] =
          std::string(absl::StripAsciiWhitespace(kv.second));
    }
    if (settings["JobCompType"] == "jobcomp/filetxt") {
      runner->mutable_options().jobcomp_path = settings["JobCompLoc"];
    }
  }
  return std::unique_ptr<TrialRunner>(std::move(runner));
}

}  // namespace evoscale::trainer_adapter
