#include "trainer/trainer.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/comm.h"
#include "trainer/cpu_trainer.h"
#include "trainer/gpu.h"
#ifdef EVOSCALE_HAVE_CUDA
#include "trainer/cuda/gpu_trainer.h"
#endif

namespace evoscale::trainer {
namespace {

// The GPU trainer, once CheckCudaAvailable has said yes (which it never does without CUDA). The
// job's ranks come from MPI's launcher (`comm`) or the environment (`env`), else it is one.
absl::Status RunOnGpu(const TrainerConfig& config, Collectives* comm, const EnvironmentRanks& env,
                      const EventSink& sink, int64_t* step) {
#ifdef EVOSCALE_HAVE_CUDA
  cuda::GpuJob job;
  if (comm->distributed()) {
    job.rank = comm->rank();
    job.size = comm->size();
    job.local_rank = LauncherLocalRank();
    job.mpi = comm;
  } else {
    job.rank = env.rank;
    job.size = env.size;
    job.local_rank = env.local_rank;
    job.rendezvous_file = env.rendezvous_file;
  }
  return cuda::RunGpuTrainer(config, job, sink, step);
#else
  (void)config, (void)comm, (void)env, (void)sink, (void)step;
  return CheckCudaAvailable();
#endif
}

}  // namespace

absl::Status RunTrainer(const TrainerConfig& config, const EventSink& to_caller) {
  // In a job of several processes the protocol's lines come from rank 0 only; another rank's
  // error line goes to its stderr.
  // A GPU job may also be started without MPI, its ranks in the environment (comm.h).
  absl::StatusOr<Collectives*> comm = JobWorld();
  const absl::StatusOr<EnvironmentRanks> env = RanksFromEnvironment();
  const int rank = comm.ok() && (*comm)->distributed() ? (*comm)->rank() : env.ok() ? env->rank : 0;
  const EventSink quiet = [](std::string_view) {};
  const EventSink& sink = rank == 0 ? to_caller : quiet;
  absl::Status status = !comm.ok()  ? comm.status()
                        : !env.ok() ? env.status()
                                    : ValidateConfig(config);
  if (status.ok() && env->size > 1 && config.device != "cuda") {
    status =
        absl::InvalidArgumentError(absl::StrCat("EVOSCALE_WORLD_SIZE=", env->size,
                                                " starts a job of GPUs (--device cuda); on the CPU "
                                                "start the ranks with mpirun -np N"));
  }
  // UNIMPLEMENTED without CUDA, FAILED_PRECONDITION without a device.
  if (status.ok() && config.device == "cuda") status = CheckCudaAvailable();
  std::optional<int64_t> step;  // once a trainer has started
  if (status.ok()) {
    int64_t steps_done = 0;
    status = config.device == "cuda" ? RunOnGpu(config, *comm, *env, sink, &steps_done)
                                     : RunCpuTrainer(config, sink, &steps_done);
    step = steps_done;
  }
  if (!status.ok()) {
    if (rank == 0) {
      sink(ErrorLine(status, step));
    } else {
      // A job's failure already names its rank ("rank R: ..."); this rank's own does not.
      const absl::Status named =
          absl::StartsWith(status.message(), "rank ")
              ? status
              : absl::Status(status.code(), absl::StrCat("rank ", rank, ": ", status.message()));
      std::fprintf(stderr, "%s\n", ErrorLine(named, step).c_str());
    }
  }
  return status;
}

}  // namespace evoscale::trainer
