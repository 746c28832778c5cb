#include "trainer/comm.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

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
        failed = absl::UnavailableError(absl::StrCat(
            "this MPI gives thread level ", provided, ", the trainer needs MPI_THREAD_SERIALIZED"));
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

absl::Status Comm::FirstFailure(const absl::Status& mine) {
  if (size_ == 1) return mine;
  const int64_t first = AllReduceMin(int64_t(mine.ok() ? size_ : rank_));
  if (first == size_) return absl::OkStatus();
  int64_t code = first == rank_ ? int64_t(mine.code()) : 0;
  std::string message = first == rank_ ? std::string(mine.message()) : "";
#ifdef EVOSCALE_HAVE_MPI
  int64_t length = int64_t(message.size());
  MPI_Bcast(&code, 1, MPI_INT64_T, int(first), MPI_COMM_WORLD);
  MPI_Bcast(&length, 1, MPI_INT64_T, int(first), MPI_COMM_WORLD);
  message.resize(size_t(length));
  MPI_Bcast(message.data(), int(length), MPI_CHAR, int(first), MPI_COMM_WORLD);
#endif
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat("rank ", first, ": ", message));
}

void Comm::Abort(int code) {
#ifdef EVOSCALE_HAVE_MPI
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  (void)code;
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
MPI_Datatype MpiType<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype MpiType<double>() { return MPI_DOUBLE; }
template <>
MPI_Datatype MpiType<int64_t>() { return MPI_INT64_T; }
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

}  // namespace evoscale::trainer
