#include "trainer/comm.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#ifdef EVOSCALE_HAVE_MPI
#include <mpi.h>
#endif

namespace evoscale::trainer {

int LauncherWorldSize() {
  // Open MPI's mpirun, then PMI/PMIx launchers (Slurm's srun, MPICH's hydra).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(name);
    int n = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n > 0) return n;
  }
  return 1;
}

namespace {

// The value of `name` as an int in [lo, hi]; nullopt when unset.
absl::StatusOr<std::optional<int>> IntFromEnvironment(const char* name, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::optional<int>();
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < lo || n > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=\"", v, "\": expected an integer in [", lo, ", ", hi, "]"));
  }
  return std::optional<int>(n);
}

}  // namespace

int LauncherLocalRank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    int n = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n >= 0) return n;
  }
  return 0;
}

absl::StatusOr<EnvironmentRanks> RanksFromEnvironment() {
  constexpr int kMaxRanks = 1 << 16;
  absl::StatusOr<std::optional<int>> size = IntFromEnvironment("EVOSCALE_WORLD_SIZE", 1, kMaxRanks);
  if (!size.ok()) return size.status();
  const char* file = std::getenv("EVOSCALE_RENDEZVOUS_FILE");
  EnvironmentRanks ranks;
  if (!size->has_value()) {
    for (const char* name : {"EVOSCALE_RANK", "EVOSCALE_LOCAL_RANK", "EVOSCALE_RENDEZVOUS_FILE"}) {
      if (std::getenv(name) != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " is set but EVOSCALE_WORLD_SIZE is not: set the job's size too"));
      }
    }
    return ranks;
  }
  ranks.size = **size;
  if (ranks.size > 1 && LauncherWorldSize() > 1) {
    return absl::InvalidArgumentError(
        "EVOSCALE_WORLD_SIZE is set in a process an MPI launcher started: the launcher gives the "
        "ranks; unset EVOSCALE_WORLD_SIZE, EVOSCALE_RANK and EVOSCALE_RENDEZVOUS_FILE");
  }
  absl::StatusOr<std::optional<int>> rank = IntFromEnvironment("EVOSCALE_RANK", 0, ranks.size - 1);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<std::optional<int>> local =
      IntFromEnvironment("EVOSCALE_LOCAL_RANK", 0, kMaxRanks);
  if (!local.ok()) return local.status();
  if (ranks.size > 1) {
    if (!rank->has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("EVOSCALE_WORLD_SIZE=", ranks.size,
                       " but EVOSCALE_RANK is not set: give every process "
                       "its rank, 0 to ",
                       ranks.size - 1));
    }
    if (file == nullptr || *file == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat("EVOSCALE_WORLD_SIZE=", ranks.size,
                       " but EVOSCALE_RENDEZVOUS_FILE is not set: give "
                       "every rank the same path of a file that does not exist yet"));
    }
    ranks.rendezvous_file = file;
  }
  ranks.rank = rank->value_or(0);
  ranks.local_rank = local->value_or(ranks.rank);
  return ranks;
}

absl::StatusOr<std::string> ShareThroughFile(const std::string& path, int rank,
                                             const std::string& mine, size_t bytes,
                                             double timeout_s) {
  const auto named = [&](absl::StatusCode code, const std::string& what) {
    return absl::Status(code, absl::StrCat("EVOSCALE_RENDEZVOUS_FILE \"", path, "\": ", what));
  };
  if (rank == 0) {
    if (mine.size() != bytes) {
      return absl::InternalError(
          absl::StrCat("rendezvous: ", mine.size(), " bytes, expected ", bytes));
    }
    const std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      return named(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("cannot write beside it: ", std::strerror(errno)));
    }
    const bool written = write(fd, mine.data(), mine.size()) == ssize_t(mine.size());
    const int write_errno = errno;
    close(fd);
    // link() does not replace: a file already there stays, and this job does not start.
    const bool linked = written && link(tmp.c_str(), path.c_str()) == 0;
    const int link_errno = errno;
    unlink(tmp.c_str());
    if (!written) {
      return named(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("cannot write beside it: ", std::strerror(write_errno)));
    }
    if (!linked && link_errno == EEXIST) {
      return named(absl::StatusCode::kAlreadyExists,
                   "already exists (left by an earlier job?): remove it or give the job a new "
                   "path, so that no rank reads an old job's id");
    }
    if (!linked) {
      return named(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("cannot create it: ", std::strerror(link_errno)));
    }
    return mine;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::string got(bytes + 1, '\0');
      const ssize_t n = read(fd, got.data(), got.size());
      close(fd);
      if (n != ssize_t(bytes)) {
        return named(absl::StatusCode::kFailedPrecondition,
                     absl::StrCat("holds ", n, " bytes, expected ", bytes,
                                  ": not a rendezvous file of this trainer"));
      }
      got.resize(bytes);
      return got;
    }
    if (errno != ENOENT) {
      return named(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("cannot read it: ", std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return named(absl::StatusCode::kDeadlineExceeded,
                   absl::StrCat("rank ", rank, " waited ", timeout_s,
                                " s and rank 0 did not write it (not started, failed, or the "
                                "path is not shared)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

#ifdef EVOSCALE_HAVE_MPI
namespace {

template <typename T>
MPI_Datatype MpiType();
template <>
MPI_Datatype MpiType<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype MpiType<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype MpiType<int64_t>() {
  return MPI_INT64_T;
}

// An MPI count. One over int on one rank would leave its peers waiting in the collective: the
// job ends instead.
int Checked(int64_t n) {
  if (n > std::numeric_limits<int>::max()) {
    std::fprintf(stderr, "evoscale-trainer: an exchange of %lld bytes is over MPI's int count\n",
                 static_cast<long long>(n));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return int(n);
}

// MPI_COMM_WORLD's collectives. Every call answers OK: MPI's errors end the job.
class MpiComm final : public Collectives {
 public:
  MpiComm(int rank, int size) : rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  PayloadMemory payload_memory() const override { return PayloadMemory::kHost; }
  int64_t bytes_sent() const override { return bytes_sent_; }

  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                         const std::vector<int64_t>& recv_counts, size_t elem_bytes) override {
    std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
    int64_t so = 0, ro = 0;
    for (int r = 0; r < size_; ++r) {
      sc[r] = Checked(send_counts[r] * int64_t(elem_bytes));
      sd[r] = Checked(so);
      rc[r] = Checked(recv_counts[r] * int64_t(elem_bytes));
      rd[r] = Checked(ro);
      so += sc[r];
      ro += rc[r];
      if (r != rank_) bytes_sent_ += sc[r];
    }
    MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                  MPI_COMM_WORLD);
    return absl::OkStatus();
  }
  absl::Status AllReduceSum(float* data, size_t n) override { return Reduce(data, n, MPI_SUM); }
  absl::Status AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) override {
    recv->resize(size_);
    MPI_Alltoall(send.data(), 1, MPI_INT64_T, recv->data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
    bytes_sent_ += int64_t(sizeof(int64_t)) * (size_ - 1);
    return absl::OkStatus();
  }
  absl::Status AllReduceSum(int64_t* v, size_t n) override { return Reduce(v, n, MPI_SUM); }
  absl::Status AllReduceMin(int64_t* v, size_t n) override { return Reduce(v, n, MPI_MIN); }
  absl::Status AllReduceMax(int64_t* v, size_t n) override { return Reduce(v, n, MPI_MAX); }
  absl::Status AllReduceMax(double* v, size_t n) override { return Reduce(v, n, MPI_MAX); }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    MPI_Bcast(data, Checked(int64_t(bytes)), MPI_BYTE, root, MPI_COMM_WORLD);
    if (rank_ == root) bytes_sent_ += int64_t(bytes) * (size_ - 1);
    return absl::OkStatus();
  }
  absl::Status GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) override;

 private:
  // In place. Sums count as sent bytes; a minimum or maximum (a few agreement values) does not.
  template <typename T>
  absl::Status Reduce(T* data, size_t n, MPI_Op op) {
    MPI_Allreduce(MPI_IN_PLACE, data, Checked(int64_t(n)), MpiType<T>(), op, MPI_COMM_WORLD);
    if (op == MPI_SUM) bytes_sent_ += int64_t(n * sizeof(T));
    return absl::OkStatus();
  }

  const int rank_, size_;
  int64_t bytes_sent_ = 0;
};

absl::Status MpiComm::GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) {
  int n = Checked(int64_t(mine.size()));
  std::vector<int> counts(size_), displs(size_);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[r] = Checked(total);
    total += counts[r];
  }
  if (rank_ == 0) all->resize(size_t(total));
  MPI_Gatherv(mine.data(), n, MPI_FLOAT, rank_ == 0 ? all->data() : nullptr, counts.data(),
              displs.data(), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (rank_ != 0) bytes_sent_ += int64_t(mine.size() * sizeof(float));
  return absl::OkStatus();
}

// MPI's world, or why it cannot start.
absl::StatusOr<Collectives*> StartMpi() {
  // Collectives run from whichever worker thread completes a step's barrier, one at a time.
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return absl::UnavailableError("MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    return absl::UnavailableError(absl::StrCat("this MPI gives thread level ", provided,
                                               ", the trainer needs MPI_THREAD_SERIALIZED"));
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  return new MpiComm(rank, size);
}

}  // namespace
#endif

absl::StatusOr<Collectives*> JobWorld() {
  static const absl::StatusOr<Collectives*>* world = [] {
    const int launched = LauncherWorldSize();
    if (launched <= 1) return new absl::StatusOr<Collectives*>(new OneProcess());
#ifdef EVOSCALE_HAVE_MPI
    return new absl::StatusOr<Collectives*>(StartMpi());
#else
    return new absl::StatusOr<Collectives*>(absl::FailedPreconditionError(absl::StrCat(
        "launched as ", launched,
        " processes, but this evoscale-trainer was built without MPI (install libopenmpi-dev "
        "and rebuild)")));
#endif
  }();
  return *world;
}

}  // namespace evoscale::trainer
