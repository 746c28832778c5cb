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

// The GPU trainer, once CheckCudaAvailable has said yes (which it never does without CUDA).
absl::Status RunOnGpu(const TrainerConfig& config, const EventSink& sink, int64_t* step) {
#ifdef EVOSCALE_HAVE_CUDA
  return cuda::RunGpuTrainer(config, sink, step);
#else
  (void)config, (void)sink, (void)step;
  return CheckCudaAvailable();
#endif
}

}  // namespace

absl::Status RunTrainer(const TrainerConfig& config, const EventSink& to_caller) {
  // In a job of several processes the protocol's lines come from rank 0 only; another rank's
  // error line goes to its stderr.
  absl::StatusOr<Comm*> comm = Comm::World();
  const int rank = comm.ok() ? (*comm)->rank() : 0;
  const EventSink quiet = [](std::string_view) {};
  const EventSink& sink = rank == 0 ? to_caller : quiet;
  absl::Status status = comm.ok() ? ValidateConfig(config) : comm.status();
  if (status.ok() && config.device == "cuda" && (*comm)->distributed()) {
    status = absl::UnimplementedError(
        "--device cuda in a job of several processes: the GPU exchange (NCCL) is not built yet; "
        "run one process per GPU job, or several on the CPU");
  }
  // UNIMPLEMENTED without CUDA, FAILED_PRECONDITION without a device.
  if (status.ok() && config.device == "cuda") status = CheckCudaAvailable();
  std::optional<int64_t> step;  // once a trainer has started
  if (status.ok()) {
    int64_t steps_done = 0;
    status = config.device == "cuda" ? RunOnGpu(config, sink, &steps_done)
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
