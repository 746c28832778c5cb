#include "trainer/trainer.h"

#include <cstdint>
#include <optional>

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

absl::Status RunTrainer(const TrainerConfig& config, const EventSink& sink) {
  absl::Status status = ValidateConfig(config);
  // UNIMPLEMENTED without CUDA, FAILED_PRECONDITION without a device.
  if (status.ok() && config.device == "cuda") status = CheckCudaAvailable();
  std::optional<int64_t> step;  // once a trainer has started
  if (status.ok()) {
    int64_t steps_done = 0;
    status = config.device == "cuda" ? RunOnGpu(config, sink, &steps_done)
                                     : RunCpuTrainer(config, sink, &steps_done);
    step = steps_done;
  }
  if (!status.ok()) sink(ErrorLine(status, step));
  return status;
}

}  // namespace evoscale::trainer
