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
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

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

absl::StatusOr<Comm*> Comm::World() {
  static Comm* world = nullptr;
  static absl::Status failed;
  static std::once_flag once;
  std::call_once(once, [] {
    auto* c = new Comm();
    const int launched = LauncherWorldSize();
    if (launched > 1) {
#ifdef EVOSCALE_HAVE_MPI
      // Collectives run from whichever worker thread completes a step's barrier, one at a time.
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        failed = absl::UnavailableError("MPI_Init_thread failed");
        delete c;
        return;
      }
      if (provided < MPI_THREAD_SERIALIZED) {
        failed = absl::UnavailableError(absl::StrCat("this MPI gives thread level ", provided,
                                                     ", the trainer needs MPI_THREAD_SERIALIZED"));
        delete c;
        return;
      }
      MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &c->size_);
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
#else
      failed = absl::FailedPreconditionError(absl::StrCat(
          "launched as ", launched,
          " processes, but this evoscale-trainer was built without MPI (install libopenmpi-dev "
          "and rebuild)"));
      delete c;
      return;
#endif
    }
    world = c;
  });
  if (world == nullptr) return failed;
  return world;
}

absl::Status FirstFailureOver(
    int rank, int size, const absl::Status& mine,
    absl::FunctionRef<absl::StatusOr<int64_t>(int64_t)> min,
    absl::FunctionRef<absl::Status(void* data, size_t bytes, int root)> broadcast) {
  if (size == 1) return mine;
  const absl::StatusOr<int64_t> first = min(int64_t(mine.ok() ? size : rank));
  if (!first.ok()) return first.status();
  if (*first == size) return absl::OkStatus();
  // The failing rank's code and message length, then its message.
  const int root = int(*first);
  int64_t head[2] = {root == rank ? int64_t(mine.code()) : 0,
                     root == rank ? int64_t(mine.message().size()) : 0};
  absl::Status status = broadcast(head, sizeof(head), root);
  if (!status.ok()) return status;
  std::string message = root == rank ? std::string(mine.message()) : "";
  message.resize(size_t(std::max<int64_t>(head[1], 0)));
  if (!message.empty()) status = broadcast(message.data(), message.size(), root);
  if (!status.ok()) return status;
  return absl::Status(static_cast<absl::StatusCode>(head[0]),
                      absl::StrCat("rank ", root, ": ", message));
}

absl::Status Comm::FirstFailure(const absl::Status& mine) {
  return FirstFailureOver(
      rank_, size_, mine, [this](int64_t v) -> absl::StatusOr<int64_t> { return AllReduceMin(v); },
      [this](void* data, size_t bytes, int root) {
        Broadcast(data, bytes, root);
        return absl::OkStatus();
      });
}

#ifdef EVOSCALE_HAVE_MPI
namespace {
int Checked(int64_t n) {
  if (n > std::numeric_limits<int>::max()) {
    std::fprintf(stderr, "evoscale-trainer: an exchange of %lld bytes is over MPI's int count\n",
                 static_cast<long long>(n));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return int(n);
}
}  // namespace
#endif

void Comm::ExchangeCounts(const std::vector<int64_t>& send_counts,
                          std::vector<int64_t>* recv_counts) {
  if (size_ == 1) {
    (*recv_counts)[0] = send_counts[0];
    return;
  }
#ifdef EVOSCALE_HAVE_MPI
  MPI_Alltoall(send_counts.data(), 1, MPI_INT64_T, recv_counts->data(), 1, MPI_INT64_T,
               MPI_COMM_WORLD);
  bytes_sent_ += int64_t(sizeof(int64_t)) * (size_ - 1);
#endif
}

void Comm::AllToAllVBytes(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                          const std::vector<int64_t>& recv_counts, size_t elem_bytes) {
  if (size_ == 1) {
    (void)recv_counts;
    if (send_counts[0] > 0) std::memcpy(recv, send, size_t(send_counts[0]) * elem_bytes);
    return;
  }
#ifdef EVOSCALE_HAVE_MPI
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
#endif
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
}  // namespace
#endif

template <typename T>
void Comm::AllReduceSumOf(T* data, size_t n) {
  (void)data, (void)n;
  if (size_ == 1) return;
#ifdef EVOSCALE_HAVE_MPI
  MPI_Allreduce(MPI_IN_PLACE, data, Checked(int64_t(n)), MpiType<T>(), MPI_SUM, MPI_COMM_WORLD);
  bytes_sent_ += int64_t(n * sizeof(T));
#endif
}

void Comm::AllReduceSum(float* data, size_t n) { AllReduceSumOf(data, n); }
void Comm::AllReduceSum(double* data, size_t n) { AllReduceSumOf(data, n); }
void Comm::AllReduceSum(int64_t* data, size_t n) { AllReduceSumOf(data, n); }

int64_t Comm::AllReduceMin(int64_t v) {
#ifdef EVOSCALE_HAVE_MPI
  if (size_ > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
#endif
  return v;
}

int64_t Comm::AllReduceMax(int64_t v) {
#ifdef EVOSCALE_HAVE_MPI
  if (size_ > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
#endif
  return v;
}

double Comm::AllReduceMax(double v) {
#ifdef EVOSCALE_HAVE_MPI
  if (size_ > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
  return v;
}

void Comm::GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) {
  if (size_ == 1) {
    *all = mine;
    return;
  }
#ifdef EVOSCALE_HAVE_MPI
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
#endif
}

void Comm::GatherToRoot(int64_t mine, std::vector<int64_t>* all) {
  all->assign(size_, mine);
#ifdef EVOSCALE_HAVE_MPI
  if (size_ > 1) {
    MPI_Gather(&mine, 1, MPI_INT64_T, all->data(), 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  }
#endif
}

void Comm::Broadcast(void* data, size_t bytes, int root) {
  (void)data, (void)bytes, (void)root;
#ifdef EVOSCALE_HAVE_MPI
  if (size_ > 1) {
    MPI_Bcast(data, Checked(int64_t(bytes)), MPI_BYTE, root, MPI_COMM_WORLD);
    if (rank_ == root) bytes_sent_ += int64_t(bytes) * (size_ - 1);
  }
#endif
}

}  // namespace evoscale::trainer
