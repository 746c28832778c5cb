// The local TrialRunner: a child process in its own process group, its stdout read as trainer
// protocol lines, its group's /proc usage sampled.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "trainer_adapter/cgroup.h"
#include "trainer_adapter/internal/spawn.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale::trainer_adapter {
namespace {

constexpr size_t kMaxLineBytes = 1 << 20;

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

// Which rank of an MPI job failed first and how, from Open MPI's mpirun's report on stderr
// ("process rank 1 with PID 7 on node h exited on signal 9 (Killed)", or "Process name:
// [[528,1],1] ... Exit code: 3"); nullopt when it is not there.
std::optional<std::string> MpirunFailedRank(const std::string& stderr_tail) {
  static const std::regex kSignal(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+) \(([^)]*)\))");
  static const std::regex kExit(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*Exit code:\s*(\d+))");
  std::smatch m;
  if (std::regex_search(stderr_tail, m, kSignal)) {
    return absl::StrCat("rank ", m[1].str(), " was killed by signal ", m[2].str(), " (", m[3].str(),
                        ")");
  }
  if (std::regex_search(stderr_tail, m, kExit)) {
    return absl::StrCat("rank ", m[1].str(), " exited with code ", m[2].str());
  }
  return std::nullopt;
}

// CPU ticks and resident memory of the trial's processes.
struct GroupUsage {
  std::map<int, uint64_t> ticks;  // pid -> utime + stime
  int64_t rss_bytes = 0;
  int processes = 0;
};

struct ProcStat {
  std::string state;
  int pgrp = 0;
  uint64_t ticks = 0;  // utime + stime
  int64_t rss_pages = 0;
};

// /proc/PID/stat; false if the process is gone or the line is unreadable.
bool ReadProcStat(int pid, ProcStat* out) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return false;
  // Fields after the command name, which is in parentheses and may hold spaces.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return false;
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state): pgrp is field 5, utime 14, stime 15, rss 24.
  uint64_t utime = 0, stime = 0;
  if (f.size() < 22 || !absl::SimpleAtoi(f[2], &out->pgrp) ||
      !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime) ||
      !absl::SimpleAtoi(f[21], &out->rss_pages)) {
    return false;
  }
  out->state = std::string(f[0]);
  out->ticks = utime + stime;
  return true;
}

void Add(int pid, const ProcStat& st, GroupUsage* u) {
  static const long page = sysconf(_SC_PAGESIZE);
  if (st.state == "Z") return;  // a zombie holds no memory
  u->ticks[pid] = st.ticks;
  u->rss_bytes += st.rss_pages * page;
  ++u->processes;
}

// The trial's processes: its first process and every descendant, found through the kernel's
// /proc/P/task/T/children lists (a few files per process, not a scan of /proc). Where the
// kernel has no such lists, every process of the trial's process group instead.
GroupUsage ReadGroupUsage(int leader) {
  GroupUsage u;
  if (access(absl::StrCat("/proc/", leader, "/task/", leader, "/children").c_str(), R_OK) == 0) {
    std::vector<int> todo = {leader};
    std::set<int> seen;
    while (!todo.empty()) {
      const int pid = todo.back();
      todo.pop_back();
      ProcStat st;
      if (!seen.insert(pid).second || !ReadProcStat(pid, &st)) continue;
      Add(pid, st, &u);
      DIR* tasks = opendir(absl::StrCat("/proc/", pid, "/task").c_str());
      if (tasks == nullptr) continue;
      while (dirent* t = readdir(tasks)) {
        if (t->d_name[0] == '.') continue;
        std::ifstream children(absl::StrCat("/proc/", pid, "/task/", t->d_name, "/children"));
        for (int child; children >> child;) todo.push_back(child);
      }
      closedir(tasks);
    }
    return u;
  }
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return u;
  while (dirent* d = readdir(proc)) {
    int pid = 0;
    ProcStat st;
    if (absl::SimpleAtoi(d->d_name, &pid) && ReadProcStat(pid, &st) && st.pgrp == leader) {
      Add(pid, st, &u);
    }
  }
  closedir(proc);
  return u;
}

// Reads `fd` to its end, handing each chunk to `on_chunk`.
template <typename Fn>
void ReadUntilEof(int fd, Fn on_chunk) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    on_chunk(absl::string_view(buf, static_cast<size_t>(n)));
  }
}

class LocalTrial : public RunningTrial {
 public:
  LocalTrial(internal::Child child, TrialObserver* observer, const LocalRunnerOptions& options,
             int64_t memory_limit, std::unique_ptr<TrialCgroup> cgroup, std::string enforcement)
      : child_(std::move(child)),
        pid_(child_.pid()),
        observer_(observer),
        options_(options),
        memory_limit_(memory_limit),
        cgroup_(std::move(cgroup)),
        start_(absl::Now()) {
    outcome_.enforcement = std::move(enforcement);
    stdout_thread_ = std::thread(&LocalTrial::ReadStdout, this, std::move(child_.stdout_pipe()));
    stderr_thread_ = std::thread(&LocalTrial::ReadStderr, this, std::move(child_.stderr_pipe()));
    monitor_thread_ = std::thread(&LocalTrial::Monitor, this);
    sampler_thread_ = std::thread(&LocalTrial::Sample, this);
  }

  ~LocalTrial() override {
    bool running;
    {
      absl::MutexLock lock(&mu_);
      running = !exited_;
    }
    if (running) Stop(absl::ZeroDuration());
    Wait();
  }

  int pid() const override { return pid_; }

  void Stop(absl::Duration grace) override {
    absl::MutexLock lock(&mu_);
    if (exited_) return;
    if (!stop_requested_) {
      stop_requested_ = true;
      child_.Signal(SIGTERM);
    }
    const absl::Time deadline = absl::Now() + grace;
    if (deadline < kill_at_) kill_at_ = deadline;  // the sampler sends SIGKILL then
  }

  const TrialOutcome& Wait() override {
    absl::MutexLock wait_lock(&wait_mu_);
    if (waited_) return outcome_;
    for (std::thread* t : {&monitor_thread_, &sampler_thread_, &stdout_thread_, &stderr_thread_}) {
      if (t->joinable()) t->join();
    }
    Finish();
    waited_ = true;
    return outcome_;
  }

 private:
  void Deliver(const TrialEvent& e) {
    if (observer_ == nullptr) return;
    absl::MutexLock lock(&observer_mu_);
    observer_->OnEvent(e);
  }

  void Line(absl::string_view line) {
    std::optional<TrialEvent> e;
    {
      absl::MutexLock lock(&mu_);
      e = RecordOutputLine(line, &outcome_);
    }
    if (e.has_value()) Deliver(*e);
  }

  void ReadStdout(internal::ScopedFd fd) {
    std::string pending;
    ReadUntilEof(fd.get(), [&](absl::string_view chunk) {
      pending.append(chunk.data(), chunk.size());
      size_t begin = 0;
      for (size_t nl; (nl = pending.find('\n', begin)) != std::string::npos; begin = nl + 1) {
        Line(absl::string_view(pending).substr(begin, nl - begin));
      }
      pending.erase(0, begin);
      if (pending.size() > kMaxLineBytes) {  // an endless line: count it, drop it
        Line(absl::string_view(pending).substr(0, 64));
        pending.clear();
      }
    });
    if (!pending.empty()) Line(pending);
  }

  void ReadStderr(internal::ScopedFd fd) {
    std::string tail;
    ReadUntilEof(fd.get(), [&](absl::string_view chunk) {
      tail.append(chunk.data(), chunk.size());
      if (tail.size() > 2 * options_.stderr_tail_bytes) {
        tail.erase(0, tail.size() - options_.stderr_tail_bytes);
      }
    });
    if (tail.size() > options_.stderr_tail_bytes) {
      tail.erase(0, tail.size() - options_.stderr_tail_bytes);
    }
    absl::MutexLock lock(&mu_);
    outcome_.stderr_tail = std::move(tail);
  }

  void Monitor() {
    // Wait for the end without reaping, so that the group id cannot be reused while the
    // group is killed: whatever the trial left running goes with it (and their end closes the
    // output pipes the readers wait on).
    child_.AwaitExit();
    child_.Signal(SIGKILL);
    // In a cgroup, also what left the process group (a double fork, setsid).
    if (cgroup_ != nullptr) cgroup_->KillAll();
    absl::MutexLock lock(&mu_);  // Stop() and the sampler signal the group only under mu_
    const internal::ChildExit exit = child_.Wait();
    exited_ = true;
    end_ = absl::Now();
    outcome_.exit_code = exit.exit_code;
    outcome_.signal = exit.signal;
  }

  void Sample() {
    static const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
    std::map<int, uint64_t> seen;  // pid -> the largest tick count seen
    absl::Time last = absl::Now();
    double cgroup_cpu = 0;  // the cgroup's CPU seconds at the previous sample
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        const absl::Time wake = std::min(absl::Now() + options_.sample_every, kill_at_);
        auto exited = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exited_; };
        mu_.AwaitWithDeadline(absl::Condition(&exited), wake);
        if (exited_) break;
        if (absl::Now() >= kill_at_) {
          child_.Signal(SIGKILL);
          if (cgroup_ != nullptr) cgroup_->KillAll(/*attempts=*/1);
          kill_at_ = absl::InfiniteFuture();
        }
      }
      const GroupUsage u = ReadGroupUsage(pid_);
      const absl::Time now = absl::Now();
      uint64_t delta = 0;
      for (const auto& [pid, ticks] : u.ticks) {
        uint64_t& s = seen[pid];
        if (ticks > s) {
          delta += ticks - s;
          s = ticks;
        }
      }
      UsageSample sample;
      sample.time = now;
      sample.rss_bytes = u.rss_bytes;
      sample.memory_bytes = u.rss_bytes;
      sample.processes = u.processes;
      const double dt = absl::ToDoubleSeconds(now - last);
      sample.cpu_cores = dt > 0 ? static_cast<double>(delta) / ticks_per_s / dt : 0;
      if (cgroup_ != nullptr) {
        // The cgroup counts what /proc misses: exited children, and between-sample spikes.
        const double cpu = cgroup_->cpu_seconds();
        sample.cpu_cores = dt > 0 ? std::max(0.0, cpu - cgroup_cpu) / dt : 0;
        cgroup_cpu = cpu;
        sample.memory_bytes = std::max<int64_t>(0, cgroup_->memory_bytes());
      }
      last = now;
      {
        absl::MutexLock lock(&mu_);
        outcome_.peak_rss_bytes = std::max(outcome_.peak_rss_bytes, u.rss_bytes);
        // In a cgroup the kernel enforces the limit, without a sampling gap.
        if (cgroup_ == nullptr && memory_limit_ > 0 && u.rss_bytes > memory_limit_ && !oom_ &&
            !exited_) {
          oom_ = true;
          oom_rss_ = u.rss_bytes;
          child_.Signal(SIGKILL);
        }
      }
      if (observer_ != nullptr && u.processes > 0) {
        absl::MutexLock lock(&observer_mu_);
        observer_->OnUsage(sample);
      }
    }
    uint64_t total = 0;
    for (const auto& [pid, ticks] : seen) total += ticks;
    absl::MutexLock lock(&mu_);
    outcome_.cpu_seconds = static_cast<double>(total) / ticks_per_s;
  }

  void Finish() {
    absl::MutexLock lock(&mu_);
    TrialOutcome& o = outcome_;
    o.wall_time = end_ - start_;
    o.peak_memory_bytes = o.peak_rss_bytes;
    if (cgroup_ != nullptr) {
      o.oom_kills = cgroup_->oom_kills();
      o.cpu_seconds = cgroup_->cpu_seconds();
      // What the limit is judged on (RSS also counts shared pages charged elsewhere, so it
      // can exceed the limit without an OOM kill).
      if (const int64_t charge = cgroup_->peak_memory_bytes(); charge > 0) {
        o.peak_memory_bytes = charge;
      }
    }
    if (stop_requested_) {
      o.kind = TrialOutcome::Kind::kStopped;
      o.reason = "stopped";
    } else if (o.oom_kills > 0) {
      o.kind = TrialOutcome::Kind::kOutOfMemory;
      o.reason = absl::StrFormat(
          "OOM-killed in its cgroup: memory limit %d bytes, peak %d bytes (%d process%s killed)",
          memory_limit_, o.peak_memory_bytes, o.oom_kills, o.oom_kills == 1 ? "" : "es");
    } else if (oom_) {
      o.kind = TrialOutcome::Kind::kOutOfMemory;
      o.reason = absl::StrFormat("killed: resident memory %d bytes over the limit of %d bytes",
                                 oom_rss_, memory_limit_);
    } else if (o.exit_code == 0 && o.final.has_value() && !o.error.has_value()) {
      o.kind = TrialOutcome::Kind::kSucceeded;
    } else {
      o.kind = TrialOutcome::Kind::kFailed;
      if (o.error.has_value()) {
        o.reason = absl::StrCat("error event: ", o.error->code.empty() ? "" : o.error->code + ": ",
                                o.error->message);
      } else if (o.signal != 0) {
        o.reason = absl::StrCat("killed by ", SignalName(o.signal));
      } else if (o.exit_code != 0) {
        o.reason = absl::StrCat("exit code ", o.exit_code);
      } else {
        o.reason = "exited 0 without a \"final\" event";
      }
      // The last line of stderr usually says why; for a job of several processes, mpirun's
      // report of the first rank that failed does.
      absl::string_view tail = o.stderr_tail;
      // Trailing blank lines and rules of dashes (mpirun frames its messages) say nothing.
      while (!tail.empty()) {
        while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.remove_suffix(1);
        const size_t start = tail.rfind('\n') == absl::string_view::npos ? 0 : tail.rfind('\n') + 1;
        const absl::string_view last = tail.substr(start);
        if (!last.empty() && last.find_first_not_of('-') != absl::string_view::npos) break;
        tail = tail.substr(0, start);
      }
      if (std::optional<std::string> rank = MpirunFailedRank(o.stderr_tail)) {
        absl::StrAppend(&o.reason, "; ", *rank, " (mpirun ended the job)");
      } else if (!tail.empty()) {
        const size_t nl = tail.rfind('\n');
        absl::StrAppend(&o.reason, "; stderr: ",
                        nl == absl::string_view::npos ? tail : tail.substr(nl + 1));
      }
    }
  }

  // The trial's first process, leading its process group. Signalled under mu_ (and by Monitor
  // before it reaps, from the thread that reaps); reaped by Monitor under mu_.
  internal::Child child_;
  const pid_t pid_;  // child_'s
  TrialObserver* const observer_;
  const LocalRunnerOptions options_;
  const int64_t memory_limit_;
  const std::unique_ptr<TrialCgroup> cgroup_;  // null: limits enforced by sampling
  const absl::Time start_;
  std::thread stdout_thread_, stderr_thread_, monitor_thread_, sampler_thread_;

  absl::Mutex observer_mu_;  // one observer call at a time
  absl::Mutex wait_mu_;
  bool waited_ ABSL_GUARDED_BY(wait_mu_) = false;

  absl::Mutex mu_;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time end_ ABSL_GUARDED_BY(mu_);
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time kill_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool oom_ ABSL_GUARDED_BY(mu_) = false;
  int64_t oom_rss_ ABSL_GUARDED_BY(mu_) = 0;
  TrialOutcome outcome_;  // fields written under mu_ until Finish()
};

class LocalProcessRunner : public TrialRunner {
 public:
  explicit LocalProcessRunner(LocalRunnerOptions options) : options_(options) {
    if (!options_.use_cgroups) {
      no_cgroup_reason_ = "cgroups turned off";
      return;
    }
    absl::StatusOr<std::unique_ptr<CgroupRoot>> root = CgroupRoot::Detect();
    if (root.ok()) {
      cgroups_ = *std::move(root);
    } else {
      no_cgroup_reason_ = std::string(root.status().message());
    }
  }

  std::string enforcement() const override {
    return cgroups_ != nullptr ? cgroups_->mode() : Sampling(no_cgroup_reason_);
  }

  // The enforcement of a trial that could get no cgroup, and why.
  std::string Sampling(absl::string_view why) const {
    return absl::StrCat("sampling /proc every ", absl::FormatDuration(options_.sample_every),
                        ": ", why);
  }

  absl::StatusOr<std::unique_ptr<RunningTrial>> Start(const TrialLaunch& launch,
                                                      TrialObserver* observer) override {
    if (absl::Status st = CheckLaunch(launch); !st.ok()) return st;
    absl::StatusOr<std::map<std::string, std::string>> env = TrialEnvironment(launch);
    if (!env.ok()) return env.status();
    const std::string& path = (*env)["PATH"];
    absl::StatusOr<std::vector<std::string>> argv = TrialArgv(launch, path);
    if (!argv.ok()) return argv.status();
    absl::StatusOr<std::string> program = internal::ResolveProgram(argv->front(), path);
    if (!program.ok()) return program.status();
    if (absl::Status st = CheckWorkDir(launch.work_dir); !st.ok()) return st;

    std::string enforcement = this->enforcement();
    std::unique_ptr<TrialCgroup> cgroup = CreateCgroup(launch.limits, &enforcement);
    const std::vector<int> no_fds;
    const std::vector<int>& join_fds = cgroup != nullptr ? cgroup->join_fds() : no_fds;

    internal::SpawnOptions spawn;
    spawn.argv = *std::move(argv);
    spawn.program = *std::move(program);
    spawn.env = *std::move(env);
    spawn.work_dir = launch.work_dir;
    spawn.stdout_source = internal::StdioSource::Pipe();
    spawn.stderr_source = internal::StdioSource::Pipe();
    spawn.new_process_group = true;
    if (options_.die_with_starting_thread) spawn.parent_death_signal = SIGKILL;
    // Before exec: nothing of the trial runs outside its cgroup.
    spawn.in_child = [&join_fds] { TrialCgroup::JoinFromChild(join_fds); };
    absl::StatusOr<internal::Child> child = internal::Spawn(spawn);
    if (!child.ok()) return child.status();
    return std::unique_ptr<RunningTrial>(std::make_unique<LocalTrial>(
        *std::move(child), observer, options_, launch.limits.memory_bytes, std::move(cgroup),
        std::move(enforcement)));
  }

 private:
  static absl::Status CheckLaunch(const TrialLaunch& launch) {
    if (launch.argv.empty() || launch.argv[0].empty()) {
      return absl::InvalidArgumentError("argv: must name a program");
    }
    if (launch.limits.memory_bytes < 0 || launch.limits.cpu_cores < 0 || launch.limits.gpus < 0) {
      return absl::InvalidArgumentError("limits: must be >= 0");
    }
    if (launch.processes < 1 || launch.processes > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("processes: ", launch.processes, " must be in [1, 1024]"));
    }
    return absl::OkStatus();
  }

  // The environment: the runner's, then the launch's, then the trial's own variables.
  static absl::StatusOr<std::map<std::string, std::string>> TrialEnvironment(
      const TrialLaunch& launch) {
    std::map<std::string, std::string> env = internal::ProcessEnvironment();
    for (const auto& [k, v] : launch.env) {
      if (k.empty() || k.find('=') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("env: bad variable name \"", k, "\""));
      }
      env[k] = v;
    }
    env["EVOSCALE_TRIAL"] = launch.trial_name;
    if (launch.limits.cpu_cores > 0) {
      env["EVOSCALE_CPU_CORES"] = absl::StrFormat("%g", launch.limits.cpu_cores);
    }
    if (launch.limits.memory_bytes > 0) {
      env["EVOSCALE_MEMORY_BYTES"] = absl::StrCat(launch.limits.memory_bytes);
    }
    env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(launch.gpu_ids, ",");
    return env;
  }

  // What runs: the launch's argv, or for a job of several processes, mpirun starting it.
  static absl::StatusOr<std::vector<std::string>> TrialArgv(const TrialLaunch& launch,
                                                            const std::string& path) {
    if (launch.processes <= 1) return launch.argv;
    absl::StatusOr<std::string> mpirun = internal::ResolveProgram("mpirun", path);
    if (!mpirun.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "processes: ", launch.processes, " needs Open MPI's mpirun (apt install openmpi-bin): ",
          mpirun.status().message()));
    }
    // Not bound to cores: the trial's cgroup, not mpirun, says how much CPU the job gets.
    std::vector<std::string> argv = {*mpirun, "-np", absl::StrCat(launch.processes),
                                     "--oversubscribe", "--bind-to", "none"};
    if (geteuid() == 0) argv.push_back("--allow-run-as-root");
    argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
    // The program itself must exist too: mpirun's own message for one that does not is long.
    absl::StatusOr<std::string> inner = internal::ResolveProgram(launch.argv[0], path);
    if (!inner.ok()) return inner.status();
    return argv;
  }

  static absl::Status CheckWorkDir(const std::string& work_dir) {
    if (work_dir.empty()) return absl::OkStatus();
    struct stat st {};
    if (stat(work_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("work_dir \"", work_dir, "\": not a directory"));
    }
    return absl::OkStatus();
  }

  // The trial's cgroups, or null where it can have none (`enforcement` then says why: its
  // limits are enforced by sampling).
  std::unique_ptr<TrialCgroup> CreateCgroup(const ResourceLimits& limits,
                                            std::string* enforcement) const {
    if (cgroups_ == nullptr) return nullptr;
    absl::StatusOr<std::unique_ptr<TrialCgroup>> made =
        cgroups_->Create(limits.memory_bytes, limits.cpu_cores);
    if (made.ok()) return *std::move(made);
    *enforcement = Sampling(made.status().message());
    return nullptr;
  }

  const LocalRunnerOptions options_;
  std::unique_ptr<CgroupRoot> cgroups_;  // null: no cgroup could be used (see below)
  std::string no_cgroup_reason_;
};

}  // namespace

absl::string_view TrialOutcomeKindName(TrialOutcome::Kind kind) {
  switch (kind) {
    case TrialOutcome::Kind::kSucceeded: return "succeeded";
    case TrialOutcome::Kind::kFailed: return "failed";
    case TrialOutcome::Kind::kOutOfMemory: return "out_of_memory";
    case TrialOutcome::Kind::kStopped: return "stopped";
  }
  return "?";
}

std::optional<TrialEvent> RecordOutputLine(absl::string_view line, TrialOutcome* outcome) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  absl::StatusOr<TrialEvent> e = ParseTrialEvent(line);
  if (!e.ok()) {
    ++outcome->other_lines;
    if (outcome->first_bad_line_error.empty()) {
      outcome->first_bad_line_error = std::string(e.status().message());
    }
    return std::nullopt;
  }
  ++outcome->events;
  if (e->kind == TrialEvent::Kind::kFinal) outcome->final = *e;
  if (e->kind == TrialEvent::Kind::kError) outcome->error = *e;
  return *std::move(e);
}

std::unique_ptr<TrialRunner> NewLocalProcessRunner(LocalRunnerOptions options) {
  return std::make_unique<LocalProcessRunner>(options);
}

}  // namespace evoscale::trainer_adapter
