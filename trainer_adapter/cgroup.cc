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

// This process's group folder in the v1 hierarchy that holds `controller`, or why there is
// none.
absl::StatusOr<std::string> OwnGroupFolder(const std::string& controller) {
  std::string path;
  bool found = false;
  std::istringstream cgroups(ReadFile("/proc/self/cgroup"));
  for (std::string line; std::getline(cgroups, line);) {
    // "ID:controllers:path"
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == controller) {
        path = parts[2];
        found = true;
      }
    }
  }
  if (!found) {
    return absl::FailedPreconditionError(
        absl::StrCat("no cgroup v1 \"", controller, "\" hierarchy in /proc/self/cgroup"));
  }
  std::istringstream mounts(ReadFile("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS"
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> head = absl::StrSplit(line.substr(0, dash), ' ');
    std::vector<std::string> tail = absl::StrSplit(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3 || tail[0] != "cgroup") continue;
    bool has = false;
    for (absl::string_view o : absl::StrSplit(tail[2], ',')) has = has || o == controller;
    if (!has) continue;
    const std::string& root = head[3];
    std::string relative = path;
    if (root != "/" && absl::StartsWith(relative, root)) relative = relative.substr(root.size());
    std::string folder = head[4];
    if (relative != "/") folder += relative;
    return folder;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("the cgroup v1 \"", controller, "\" hierarchy is not mounted here"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CgroupRoot>> CgroupRoot::Detect(const std::string& prefix) {
  std::string folders[3];
  const char* controllers[3] = {"memory", "cpu", "cpuacct"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> folder = OwnGroupFolder(controllers[i]);
    if (!folder.ok()) return folder.status();
    folders[i] = *folder;
    // Groups that a runner killed with SIGKILL left behind ("PREFIX-PID-N" whose PID is gone;
    // another live runner's are not touched): their processes are killed, then they go.
    if (DIR* dir = opendir(folders[i].c_str()); dir != nullptr) {
      for (dirent* e; (e = readdir(dir)) != nullptr;) {
        absl::string_view name = e->d_name;
        if (e->d_type != DT_DIR || !absl::ConsumePrefix(&name, prefix + "-")) continue;
        pid_t owner = 0;
        if (!absl::SimpleAtoi(name.substr(0, name.find('-')), &owner) || owner <= 0) continue;
        if (kill(owner, 0) == 0 || errno == EPERM) continue;  // its runner still lives
        const std::string stale = absl::StrCat(folders[i], "/", e->d_name);
        // What escaped its dead runner (a double-forked grandchild outlives PR_SET_PDEATHSIG)
        // must not run on beside the trial's next run: kill it first.
        for (int attempt = 0; attempt < 50; ++attempt) {
          std::istringstream procs(ReadFile(stale + "/cgroup.procs"));
          bool any = false;
          for (pid_t pid; procs >> pid;) {
            kill(pid, SIGKILL);
            any = true;
          }
          if (!any) break;
          absl::SleepFor(absl::Milliseconds(10));
        }
        for (int attempt = 0; attempt < 100 && rmdir(stale.c_str()) != 0 && errno == EBUSY;
             ++attempt) {
          absl::SleepFor(absl::Milliseconds(10));
        }
      }
      closedir(dir);
    }
    const std::string probe = absl::StrCat(folders[i], "/", prefix, "-probe-", getpid());
    if (mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot make a cgroup in ", folders[i], ": ", std::strerror(errno)));
    }
    rmdir(probe.c_str());
  }
  return std::unique_ptr<CgroupRoot>(new CgroupRoot(prefix, folders[0], folders[1], folders[2]));
}

std::string CgroupRoot::mode() const { return "cgroup v1 (memory, cpu, cpuacct)"; }

absl::StatusOr<std::unique_ptr<TrialCgroup>> CgroupRoot::Create(int64_t memory_bytes,
                                                               double cpu_cores) {
  int64_t n;
  {
    absl::MutexLock lock(&mu_);
    n = next_++;
  }
  const std::string name = absl::StrCat(prefix_, "-", getpid(), "-", n);
  std::unique_ptr<TrialCgroup> group(new TrialCgroup(
      absl::StrCat(memory_, "/", name), absl::StrCat(cpu_, "/", name),
      absl::StrCat(cpuacct_, "/", name)));
  for (const std::string* dir : {&group->memory_, &group->cpu_, &group->cpuacct_}) {
    if (mkdir(dir->c_str(), 0755) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("mkdir ", *dir, ": ", std::strerror(errno)));
    }
  }
  if (memory_bytes > 0) {
    if (absl::Status st = WriteFile(group->memory_ + "/memory.limit_in_bytes",
                                    absl::StrCat(memory_bytes));
        !st.ok()) {
      return st;
    }
    // With swap accounting the limit covers swap too, so a trial cannot swap past it.
    WriteFile(group->memory_ + "/memory.memsw.limit_in_bytes", absl::StrCat(memory_bytes))
        .IgnoreError();
  }
  if (cpu_cores > 0) {
    const int64_t quota = std::max<int64_t>(1000, std::llround(cpu_cores * kCpuPeriodUs));
    for (const auto& [file, value] : {std::pair{"/cpu.cfs_period_us", kCpuPeriodUs},
                                      std::pair{"/cpu.cfs_quota_us", quota}}) {
      if (absl::Status st = WriteFile(group->cpu_ + file, absl::StrCat(value)); !st.ok()) {
        return st;
      }
    }
  }
  for (const std::string* dir : {&group->memory_, &group->cpu_, &group->cpuacct_}) {
    const int fd = open((*dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(*dir, "/cgroup.procs: ", std::strerror(errno)));
    }
    group->join_fds_.push_back(fd);
  }
  return group;
}

void TrialCgroup::JoinFromChild(const std::vector<int>& fds) {
  // "0" is the writing process: the child moves itself before it execs.
  for (int fd : fds) {
    ssize_t ignored = write(fd, "0", 1);
    (void)ignored;
  }
}

std::vector<pid_t> TrialCgroup::Pids() const {
  std::vector<pid_t> pids;
  std::istringstream in(ReadFile(memory_ + "/cgroup.procs"));
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

bool TrialCgroup::KillAll(int attempts) const {
  for (int i = 0; i < attempts; ++i) {
    std::vector<pid_t> pids = Pids();
    if (pids.empty()) return true;
    for (pid_t pid : pids) kill(pid, SIGKILL);
    absl::SleepFor(absl::Milliseconds(10));
  }
  return Pids().empty();
}

int64_t TrialCgroup::oom_kills() const {
  std::istringstream in(ReadFile(memory_ + "/memory.oom_control"));
  for (std::string key; in >> key;) {
    int64_t value = 0;
    if (!(in >> value)) break;
    if (key == "oom_kill") return value;
  }
  return 0;
}

int64_t TrialCgroup::memory_bytes() const { return ReadInt(memory_ + "/memory.usage_in_bytes"); }

int64_t TrialCgroup::peak_memory_bytes() const {
  return ReadInt(memory_ + "/memory.max_usage_in_bytes");
}

double TrialCgroup::cpu_seconds() const {
  const int64_t ns = ReadInt(cpuacct_ + "/cpuacct.usage");
  return ns > 0 ? static_cast<double>(ns) / 1e9 : 0;
}

int64_t TrialCgroup::memory_limit_bytes() const {
  return ReadInt(memory_ + "/memory.limit_in_bytes");
}

int64_t TrialCgroup::cpu_quota_us() const { return ReadInt(cpu_ + "/cpu.cfs_quota_us"); }

TrialCgroup::~TrialCgroup() {
  for (int fd : join_fds_) close(fd);
  KillAll();
  // A group whose last process is still leaving cannot be removed yet: retry briefly.
  for (const std::string* dir : {&memory_, &cpu_, &cpuacct_}) {
    for (int i = 0; i < 100 && rmdir(dir->c_str()) != 0 && errno == EBUSY; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
}

}  // namespace evoscale::trainer_adapter
