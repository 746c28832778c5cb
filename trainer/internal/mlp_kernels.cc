#include "trainer/internal/mlp_kernels.h"

#include <cstdlib>
#include <cstring>

namespace evoscale::trainer::internal {

namespace baseline {
extern const MlpKernels kKernels;
}  // namespace baseline
#ifdef EVOSCALE_HAVE_AVX2_KERNELS
namespace avx2 {
extern const MlpKernels kKernels;
}  // namespace avx2
#endif
#ifdef EVOSCALE_HAVE_AVX512_KERNELS
namespace avx512 {
extern const MlpKernels kKernels;
}  // namespace avx512
#endif

namespace {
const MlpKernels* Select() {
  __builtin_cpu_init();
  // EVOSCALE_TRAINER_ISA=baseline|avx2 caps the choice (for comparisons); the CPU still decides.
  const char* cap = std::getenv("EVOSCALE_TRAINER_ISA");
  if (cap != nullptr && std::strcmp(cap, "baseline") == 0) return &baseline::kKernels;
#ifdef EVOSCALE_HAVE_AVX2_KERNELS
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (cap != nullptr && std::strcmp(cap, "avx2") == 0) {
    return avx2 ? &avx2::kKernels : &baseline::kKernels;
  }
#endif
#ifdef EVOSCALE_HAVE_AVX512_KERNELS
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("fma")) {
    return &avx512::kKernels;
  }
#endif
#ifdef EVOSCALE_HAVE_AVX2_KERNELS
  if (avx2) return &avx2::kKernels;
#endif
  return &baseline::kKernels;
}
}  // namespace

const MlpKernels& BestMlpKernels() {
  static const MlpKernels* const kBest = Select();
  return *kBest;
}

const MlpKernels& BaselineMlpKernels() { return baseline::kKernels; }

}  // namespace evoscale::trainer::internal
