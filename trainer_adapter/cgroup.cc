#include "trainer_adapter/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer_adapter/internal/cgroup_files.h"

namespace evoscale::trainer_adapter {
namespace {

constexpr int64_t kCpuPeriodUs = 100000;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int64_t ReadInt(const std::string& path) {
  int64_t value = -1;
  std::string text = ReadFile(path);
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) return -1;
  return value;
}

absl::Status WriteFile(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat(path, ": ", std::strerror(errno)));
  const ssize_t n = write(fd, value.data(), value.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("writing \"", value, "\" to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

// The processes in the group folder `dir` now.
std::vector<pid_t> GroupPids(const std::string& dir) {
  std::vector<pid_t> pids;
  std::istringstream in(ReadFile(dir + "/cgroup.procs"));
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

// SIGKILLs every process in `dir` until none is left (at most `attempts` rounds, 10 ms apart),
// after writing v2's cgroup.kill (Linux 5.14+) where `kill_file`. Returns whether it is empty.
bool KillGroup(const std::string& dir, bool kill_file, int attempts) {
  if (kill_file) WriteFile(dir + "/cgroup.kill", "1").IgnoreError();
  for (int i = 0; i < attempts; ++i) {
    std::vector<pid_t> pids = GroupPids(dir);
    if (pids.empty()) return true;
    for (pid_t pid : pids) kill(pid, SIGKILL);
    absl::SleepFor(absl::Milliseconds(10));
  }
  return GroupPids(dir).empty();
}

// Removes an emptied group folder: one whose last process is still leaving cannot be removed
// yet, so it retries briefly.
void RemoveGroupDir(const std::string& dir) {
  for (int i = 0; i < 100 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// Kills what is left in groups a runner killed with SIGKILL left behind in `folder`
// ("PREFIX-PID-..." whose PID is gone; another live runner's are not touched), then removes
// them. A double-forked grandchild outlives PR_SET_PDEATHSIG and must not run on beside the
// trial's next run.
void RemoveStaleGroups(const std::string& folder, const std::string& prefix) {
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return;
  for (dirent* e; (e = readdir(dir)) != nullptr;) {
    absl::string_view name = e->d_name;
    if (e->d_type != DT_DIR || !absl::ConsumePrefix(&name, prefix + "-")) continue;
    pid_t owner = 0;
    if (!absl::SimpleAtoi(name.substr(0, name.find('-')), &owner) || owner <= 0) continue;
    if (kill(owner, 0) == 0 || errno == EPERM) continue;  // its runner still lives
    const std::string stale = absl::StrCat(folder, "/", e->d_name);
    KillGroup(stale, /*kill_file=*/true, /*attempts=*/50);
    RemoveGroupDir(stale);
  }
  closedir(dir);
}

absl::Status Probe(const std::string& folder, const std::string& prefix) {
  const std::string probe = absl::StrCat(folder, "/", prefix, "-probe-", getpid());
  if (mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a cgroup in ", folder, ": ", std::strerror(errno)));
  }
  rmdir(probe.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CgroupRoot>> CgroupRoot::Detect(const std::string& prefix) {
  absl::StatusOr<std::unique_ptr<CgroupRoot>> v1 = DetectV1(prefix);
  if (v1.ok()) return v1;
  absl::StatusOr<std::unique_ptr<CgroupRoot>> v2 = DetectV2(prefix);
  if (v2.ok()) return v2;
  return absl::FailedPreconditionError(
      absl::StrCat(v1.status().message(), "; ", v2.status().message()));
}

absl::StatusOr<std::unique_ptr<CgroupRoot>> CgroupRoot::DetectV1(const std::string& prefix) {
  const std::string cgroups = ReadFile("/proc/self/cgroup");
  const std::string mounts = ReadFile("/proc/self/mountinfo");
  std::string folders[3];
  const char* controllers[3] = {"memory", "cpu", "cpuacct"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> folder = internal::V1GroupFolder(controllers[i], cgroups, mounts);
    if (!folder.ok()) return folder.status();
    folders[i] = *folder;
    RemoveStaleGroups(folders[i], prefix);
    if (absl::Status st = Probe(folders[i], prefix); !st.ok()) return st;
  }
  return std::unique_ptr<CgroupRoot>(
      new CgroupRoot(1, prefix, folders[0], folders[1], folders[2]));
}

absl::StatusOr<std::unique_ptr<CgroupRoot>> CgroupRoot::DetectV2(const std::string& prefix) {
  absl::StatusOr<std::string> own =
      internal::V2GroupFolder(ReadFile("/proc/self/cgroup"), ReadFile("/proc/self/mountinfo"));
  if (!own.ok()) return own.status();
  std::string folder = *own;
  // An earlier runner of this process already moved it into its supervisor leaf (below).
  const std::string leaf_name = absl::StrCat(prefix, "-", getpid(), "-supervisor");
  if (absl::EndsWith(folder, "/" + leaf_name)) folder.resize(folder.size() - leaf_name.size() - 1);
  const std::string controllers = ReadFile(folder + "/cgroup.controllers");
  for (const char* c : {"memory", "cpu"}) {
    if (!internal::HasController(controllers, c)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the cgroup v2 group ", folder, " does not have the \"", c,
                       "\" controller (delegate it, e.g. systemd's Delegate=yes)"));
    }
  }
  RemoveStaleGroups(folder, prefix);
  const std::string subtree = ReadFile(folder + "/cgroup.subtree_control");
  if (!internal::HasController(subtree, "memory") || !internal::HasController(subtree, "cpu")) {
    // A v2 group hands controllers to its children only while no process sits in it: this
    // process moves into a leaf of its own first (as systemd does in a delegated subtree).
    const std::string leaf = absl::StrCat(folder, "/", leaf_name);
    if (mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make a cgroup in ", folder, ": ", std::strerror(errno)));
    }
    if (absl::Status st = WriteFile(leaf + "/cgroup.procs", absl::StrCat(getpid())); !st.ok()) {
      return st;
    }
    if (absl::Status st = WriteFile(folder + "/cgroup.subtree_control", "+memory +cpu");
        !st.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(st.message(), " (does another process share ", folder, "?)"));
    }
  }
  if (absl::Status st = Probe(folder, prefix); !st.ok()) return st;
  return std::unique_ptr<CgroupRoot>(new CgroupRoot(2, prefix, folder, folder, folder));
}

std::string CgroupRoot::mode() const {
  return version_ == 1 ? "cgroup v1 (memory, cpu, cpuacct)" : "cgroup v2 (memory, cpu)";
}

absl::StatusOr<std::unique_ptr<TrialCgroup>> CgroupRoot::Create(int64_t memory_bytes,
                                                               double cpu_cores) {
  int64_t n;
  {
    absl::MutexLock lock(&mu_);
    n = next_++;
  }
  const std::string name = absl::StrCat(prefix_, "-", getpid(), "-", n);
  std::unique_ptr<TrialCgroup> group(new TrialCgroup(
      version_, absl::StrCat(memory_, "/", name), absl::StrCat(cpu_, "/", name),
      absl::StrCat(cpuacct_, "/", name)));
  for (const std::string& dir : group->dirs()) {
    if (mkdir(dir.c_str(), 0755) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("mkdir ", dir, ": ", std::strerror(errno)));
    }
  }
  const bool v1 = version_ == 1;
  if (memory_bytes > 0) {
    if (absl::Status st =
            WriteFile(group->memory_ + (v1 ? "/memory.limit_in_bytes" : "/memory.max"),
                      absl::StrCat(memory_bytes));
        !st.ok()) {
      return st;
    }
    // The limit covers swap too (v1 with swap accounting), or no swap at all (v2), so a trial
    // cannot swap past it.
    WriteFile(group->memory_ + (v1 ? "/memory.memsw.limit_in_bytes" : "/memory.swap.max"),
              v1 ? absl::StrCat(memory_bytes) : "0")
        .IgnoreError();
  }
  if (cpu_cores > 0) {
    const int64_t quota = std::max<int64_t>(1000, std::llround(cpu_cores * kCpuPeriodUs));
    if (v1) {
      for (const auto& [file, value] : {std::pair{"/cpu.cfs_period_us", kCpuPeriodUs},
                                        std::pair{"/cpu.cfs_quota_us", quota}}) {
        if (absl::Status st = WriteFile(group->cpu_ + file, absl::StrCat(value)); !st.ok()) {
          return st;
        }
      }
    } else if (absl::Status st =
                   WriteFile(group->cpu_ + "/cpu.max", absl::StrCat(quota, " ", kCpuPeriodUs));
               !st.ok()) {
      return st;
    }
  }
  for (const std::string& dir : group->dirs()) {
    const int fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, "/cgroup.procs: ", std::strerror(errno)));
    }
    group->join_fds_.push_back(fd);
  }
  return group;
}

std::vector<std::string> TrialCgroup::dirs() const {
  if (version_ == 2) return {memory_};
  return {memory_, cpu_, cpuacct_};
}

void TrialCgroup::JoinFromChild(const std::vector<int>& fds) {
  // "0" is the writing process: the child moves itself before it execs.
  for (int fd : fds) {
    ssize_t ignored = write(fd, "0", 1);
    (void)ignored;
  }
}

std::vector<pid_t> TrialCgroup::Pids() const { return GroupPids(memory_); }

bool TrialCgroup::KillAll(int attempts) const {
  return KillGroup(memory_, /*kill_file=*/version_ == 2, attempts);
}

int64_t TrialCgroup::oom_kills() const {
  const int64_t n = internal::KeyedValue(
      ReadFile(memory_ + (version_ == 1 ? "/memory.oom_control" : "/memory.events")),
      "oom_kill");
  return n > 0 ? n : 0;
}

int64_t TrialCgroup::memory_bytes() const {
  return ReadInt(memory_ + (version_ == 1 ? "/memory.usage_in_bytes" : "/memory.current"));
}

int64_t TrialCgroup::peak_memory_bytes() const {
  // v2's memory.peak is Linux 5.19+; without it, -1 (the runner then keeps the sampled peak).
  return ReadInt(memory_ + (version_ == 1 ? "/memory.max_usage_in_bytes" : "/memory.peak"));
}

double TrialCgroup::cpu_seconds() const {
  if (version_ == 2) {
    const int64_t us = internal::KeyedValue(ReadFile(cpu_ + "/cpu.stat"), "usage_usec");
    return us > 0 ? static_cast<double>(us) / 1e6 : 0;
  }
  const int64_t ns = ReadInt(cpuacct_ + "/cpuacct.usage");
  return ns > 0 ? static_cast<double>(ns) / 1e9 : 0;
}

int64_t TrialCgroup::memory_limit_bytes() const {
  return version_ == 1 ? ReadInt(memory_ + "/memory.limit_in_bytes")
                       : internal::NumberOrMax(ReadFile(memory_ + "/memory.max"));
}

int64_t TrialCgroup::cpu_quota_us() const {
  return version_ == 1 ? ReadInt(cpu_ + "/cpu.cfs_quota_us")
                       : internal::CpuMaxQuota(ReadFile(cpu_ + "/cpu.max"));
}

TrialCgroup::~TrialCgroup() {
  for (int fd : join_fds_) close(fd);
  KillAll();
  for (const std::string& dir : dirs()) RemoveGroupDir(dir);
}

}  // namespace evoscale::trainer_adapter
