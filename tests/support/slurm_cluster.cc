#include "tests/support/slurm_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "trainer_adapter/internal/command.h"
#include "trainer_adapter/internal/slurm_text.h"


namespace evoscale::testing {
namespace {

using trainer_adapter::internal::CommandResult;
using trainer_adapter::internal::RunCommand;

constexpr absl::Duration kPoll = absl::Milliseconds(100);

// The program's path: in PATH, or in the sbin folders a non-login root shell may lack.
std::string FindProgram(const std::string& name) {
  const char* path = getenv("PATH");
  std::vector<std::string> dirs =
      absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty());
  for (const char* extra : {"/usr/sbin", "/sbin", "/usr/bin"}) dirs.push_back(extra);
  for (const std::string& dir : dirs) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The last `lines` lines of a file.
std::string Tail(const std::string& path, size_t lines) {
  std::vector<absl::string_view> all = absl::StrSplit(ReadWhole(path), '\n', absl::SkipEmpty());
  const size_t from = all.size() > lines ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + static_cast<std::ptrdiff_t>(from), all.end(), "\n");
}

// A TCP port nothing listens on now (bound to port 0, then released; another process could
// take it before slurmctld does, which start-up then reports).
absl::StatusOr<int> FreePort(const std::set<int>& taken) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof addr;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    if (port > 0 && !taken.contains(port)) return port;
  }
  return absl::InternalError("no free TCP port");
}

// Whether root may make a group in each cgroup v1 hierarchy task/cgroup uses; "" when it may.
std::string CgroupV1Problem() {
  for (const char* controller : {"memory", "freezer", "cpuset"}) {
    const std::string probe =
        absl::StrCat("/sys/fs/cgroup/", controller, "/evoscale-slurm-probe-", getpid());
    if (mkdir(probe.c_str(), 0755) != 0) {
      return absl::StrCat("cannot make a cgroup v1 group in /sys/fs/cgroup/", controller, ": ",
                          std::strerror(errno));
    }
    rmdir(probe.c_str());
  }
  return "";
}

int64_t MemTotalMb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb / 1024;
  }
  return 0;
}

}  // namespace

std::string SlurmCluster::CgroupUnavailableReason() { return CgroupV1Problem(); }

std::string SlurmCluster::UnavailableReason() {
  if (geteuid() != 0) return "a Slurm cluster starts only as root (slurmd runs jobs as root)";
  std::vector<std::string> missing;
  for (const char* program :
       {"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo"}) {
    if (FindProgram(program).empty()) missing.push_back(program);
  }
  if (!missing.empty()) {
    return absl::StrCat("not installed: ", absl::StrJoin(missing, ", "),
                        " (scripts/dev.sh deps installs slurm-wlm and munge)");
  }
  return "";
}

absl::StatusOr<std::unique_ptr<SlurmCluster>> SlurmCluster::Start(SlurmClusterOptions options) {
  if (std::string why = UnavailableReason(); !why.empty()) {
    return absl::FailedPreconditionError(why);
  }
  std::unique_ptr<SlurmCluster> cluster(new SlurmCluster());
  if (absl::Status st = cluster->Launch(options); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat(st.message(), "\n", cluster->LogTails()));
  }
  return cluster;
}

absl::Status SlurmCluster::Launch(const SlurmClusterOptions& options) {
  std::string templ = ::testing::TempDir() + "evoscale_slurm.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", templ, ": ", std::strerror(errno)));
  }
  dir_ = templ;
  for (const char* sub : {"state", "spool"}) {
    std::filesystem::create_directory(absl::StrCat(dir_, "/", sub));
  }
  conf_path_ = absl::StrCat(dir_, "/slurm.conf");
  jobcomp_path_ = absl::StrCat(dir_, "/jobcomp.txt");

  // Memory enforcement.
  bool cgroup = false;
  switch (options.memory) {
    case SlurmClusterOptions::MemoryEnforcement::kCgroup:
      cgroup = true;
      break;
    case SlurmClusterOptions::MemoryEnforcement::kOverMemoryKill:
      enforcement_ = "OverMemoryKill: asked for";
      break;
    case SlurmClusterOptions::MemoryEnforcement::kAuto:
      if (std::string problem = CgroupV1Problem(); problem.empty()) {
        cgroup = true;
      } else {
        enforcement_ = absl::StrCat("OverMemoryKill: ", problem);
      }
      break;
  }
  if (cgroup) enforcement_ = "task/cgroup";

  // The munge key, 1 KiB of random bytes, readable by root alone.
  const std::string key_path = absl::StrCat(dir_, "/munge.key");
  {
    std::random_device rd;
    std::string key(1024, '\0');
    for (char& c : key) c = static_cast<char>(rd());
    std::ofstream out(key_path, std::ios::binary);
    out << key;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", key_path));
  }
  chmod(key_path.c_str(), 0400);
  const std::string socket_path = absl::StrCat(dir_, "/munge.sock");

  std::set<int> taken;
  absl::StatusOr<int> ctld_port = FreePort(taken);
  if (!ctld_port.ok()) return ctld_port.status();
  taken.insert(*ctld_port);
  absl::StatusOr<int> slurmd_port = FreePort(taken);
  if (!slurmd_port.ok()) return slurmd_port.status();

  cpus_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t total_mb = MemTotalMb();
  // Slurm drains a node that reports less than RealMemory: leave a margin of 10% (512 MiB at
  // least) for the kernel and what else runs here.
  real_memory_mb_ = std::max<int64_t>(256, total_mb - std::max<int64_t>(512, total_mb / 10));

  std::vector<std::string> conf = {
      "# Generated by the tests' SlurmCluster fixture (tests/support/slurm_cluster.cc).",
      absl::StrCat("ClusterName=evoscale", *ctld_port),
      "SlurmctldHost=localhost",
      absl::StrCat("SlurmctldPort=", *ctld_port),
      absl::StrCat("SlurmdPort=", *slurmd_port),
      "SlurmUser=root",
      "SlurmdUser=root",
      "AuthType=auth/munge",
      "CredType=cred/munge",
      absl::StrCat("AuthInfo=socket=", socket_path),
      absl::StrCat("StateSaveLocation=", dir_, "/state"),
      absl::StrCat("SlurmdSpoolDir=", dir_, "/spool"),
      absl::StrCat("SlurmctldPidFile=", dir_, "/slurmctld.pid"),
      absl::StrCat("SlurmdPidFile=", dir_, "/slurmd.pid"),
      absl::StrCat("SlurmctldLogFile=", dir_, "/slurmctld.log"),
      absl::StrCat("SlurmdLogFile=", dir_, "/slurmd.log"),
      // Job ids of their own: clusters side by side share the cgroup tree (slurm_localhost/
      // uid_0/job_ID), where the same id would collide.
      absl::StrCat("FirstJobId=", *ctld_port * 1000),
      "SelectType=select/cons_tres",
      "SelectTypeParameters=CR_Core_Memory",
      cgroup ? "ProctrackType=proctrack/cgroup" : "ProctrackType=proctrack/linuxproc",
      cgroup ? "TaskPlugin=task/cgroup" : "TaskPlugin=task/none",
      "JobAcctGatherType=jobacct_gather/linux",
      "JobAcctGatherFrequency=1",
      "JobCompType=jobcomp/filetxt",
      absl::StrCat("JobCompLoc=", jobcomp_path_),
      "MpiDefault=none",
      "MailProg=/bin/true",
      "ReturnToService=2",
      "KillWait=5",
      absl::StrCat("NodeName=localhost CPUs=", cpus_, " RealMemory=", real_memory_mb_,
                   " State=UNKNOWN"),
      "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
  };
  if (!cgroup) conf.push_back("JobAcctGatherParams=OverMemoryKill");
  {
    std::ofstream out(conf_path_);
    out << absl::StrJoin(conf, "\n") << "\n";
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", conf_path_));
  }
  if (cgroup) {
    std::ofstream out(absl::StrCat(dir_, "/cgroup.conf"));
    out << "CgroupPlugin=cgroup/v1\nConstrainCores=yes\nConstrainRAMSpace=yes\n"
           "ConstrainSwapSpace=yes\nAllowedSwapSpace=0\n";
    if (!out.flush()) return absl::InternalError("cannot write cgroup.conf");
  }

  // munged, then its socket.
  absl::StatusOr<pid_t> munged = Spawn(
      {FindProgram("munged"), "--foreground", "--force", absl::StrCat("--socket=", socket_path),
       absl::StrCat("--key-file=", key_path), absl::StrCat("--pid-file=", dir_, "/munged.pid"),
       absl::StrCat("--log-file=", dir_, "/munged.log"),
       absl::StrCat("--seed-file=", dir_, "/munged.seed")},
      "munged.out");
  if (!munged.ok()) return munged.status();
  const absl::Time deadline = absl::Now() + options.start_timeout;
  auto daemons_alive = [&]() -> absl::Status {
    for (pid_t pid : daemons_) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        daemons_.erase(std::find(daemons_.begin(), daemons_.end(), pid));
        return absl::InternalError(absl::StrCat("a daemon (pid ", pid, ") ended during start-up"));
      }
    }
    return absl::OkStatus();
  };
  while (access(socket_path.c_str(), F_OK) != 0) {
    if (absl::Status st = daemons_alive(); !st.ok()) return st;
    if (absl::Now() > deadline) return absl::DeadlineExceededError("munged made no socket");
    absl::SleepFor(kPoll);
  }

  controller_ = daemons_.size();
  for (const auto& [program, log] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{FindProgram("slurmctld"), "-D", "-f", conf_path_}, "slurmctld.out"},
           {{FindProgram("slurmd"), "-D", "-N", "localhost", "-f", conf_path_}, "slurmd.out"}}) {
    absl::StatusOr<pid_t> pid = Spawn(program, log);
    if (!pid.ok()) return pid.status();
  }

  // The node idle in sinfo: both daemons up, and the node registered with the controller.
  std::string last;
  for (;;) {
    if (absl::Status st = daemons_alive(); !st.ok()) return st;
    absl::StatusOr<CommandResult> sinfo = Run({"sinfo", "--noheader", "--Node", "--format=%T"});
    if (sinfo.ok()) {
      last = std::string(absl::StripAsciiWhitespace(sinfo->out + sinfo->err));
      if (sinfo->exit_code == 0 && last == "idle") return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the node is not idle after ",
                                                      absl::FormatDuration(options.start_timeout),
                                                      "; sinfo says: ", last));
    }
    absl::SleepFor(kPoll);
  }
}

absl::StatusOr<pid_t> SlurmCluster::Spawn(const std::vector<std::string>& argv,
                                          const std::string& log) {
  std::map<std::string, std::string> env = trainer_adapter::internal::ProcessEnvironment();
  env["SLURM_CONF"] = conf_path_;
  const trainer_adapter::internal::ExecStrings exec(argv, env);
  const std::string log_path = absl::StrCat(dir_, "/", log);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("open ", log_path));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // a crashed test leaves no cluster behind
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(exec.argv[0], exec.argv.data(), exec.envp.data());
    _exit(127);
  }
  close(log_fd);
  daemons_.push_back(pid);
  return pid;
}

void SlurmCluster::StopDaemon(pid_t pid) {
  kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

SlurmCluster::~SlurmCluster() {
  if (daemons_.size() == 3) {
    // Jobs first: their slurmstepd processes outlive slurmd otherwise.
    (void)Run({"scancel", "--full", "--user=root"});
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      absl::StatusOr<CommandResult> q = Run({"squeue", "--noheader", "--format=%i"});
      if (!q.ok() || q->exit_code != 0 || absl::StripAsciiWhitespace(q->out).empty()) break;
      absl::SleepFor(kPoll);
    }
  }
  for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) StopDaemon(*it);
  if (!dir_.empty() && getenv("EVOSCALE_KEEP_SLURM_DIR") == nullptr) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::StatusOr<CommandResult> SlurmCluster::Run(const std::vector<std::string>& argv,
                                                absl::Duration timeout) const {
  return RunCommand(argv, env(), timeout);
}

absl::StatusOr<std::map<std::string, std::string>> SlurmCluster::ShowJob(
    const std::string& job_id) const {
  absl::StatusOr<CommandResult> r = Run({"scontrol", "show", "job", "--oneliner", job_id});
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::NotFoundError(
        trainer_adapter::internal::DescribeFailure({"scontrol", "show", "job", job_id}, *r));
  }
  return trainer_adapter::internal::ParseSlurmRecord(r->out);
}

absl::StatusOr<std::map<std::string, std::string>> SlurmCluster::AwaitJobEnd(
    const std::string& job_id, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    std::vector<std::map<std::string, std::string>> records =
        trainer_adapter::internal::JobCompRecords(ReadWhole(jobcomp_path_), job_id);
    if (!records.empty()) return records.back();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("job ", job_id, " not ended after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(kPoll);
  }
}

absl::Status SlurmCluster::RestartController(bool clear_state) {
  if (controller_ >= daemons_.size()) return absl::FailedPreconditionError("no controller");
  StopDaemon(daemons_[controller_]);
  std::vector<std::string> argv = {FindProgram("slurmctld"), "-D", "-f", conf_path_};
  if (clear_state) argv.push_back("-c");
  absl::StatusOr<pid_t> pid = Spawn(argv, "slurmctld-restarted.out");
  if (!pid.ok()) return pid.status();
  daemons_.pop_back();  // Spawn appended it: it takes the old one's place
  daemons_[controller_] = *pid;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (;;) {
    absl::StatusOr<CommandResult> ping = Run({"scontrol", "ping"});
    if (ping.ok() && ping->exit_code == 0 && absl::StrContains(ping->out, "UP")) {
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("slurmctld does not answer after its restart");
    }
    absl::SleepFor(kPoll);
  }
}

std::string SlurmCluster::LogTails() const {
  std::string text;
  for (const char* log :
       {"munged.log", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"}) {
    const std::string path = absl::StrCat(dir_, "/", log);
    if (access(path.c_str(), R_OK) != 0) continue;
    absl::StrAppend(&text, "--- ", log, " (last lines)\n", Tail(path, 8), "\n");
  }
  return text;
}

void SlurmClusterTest::SetUp() {
  if (std::string why = SlurmCluster::UnavailableReason(); !why.empty()) {
    GTEST_SKIP() << "no Slurm cluster here: " << why;
  }
  absl::StatusOr<std::unique_ptr<SlurmCluster>> cluster = SlurmCluster::Start(cluster_options());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = *std::move(cluster);
}

}  // namespace evoscale::testing
