// Pod requests and typical pods as the placement tests write them.
#ifndef EVOSCALE_TESTS_PLACEMENT_REQUESTS_H_
#define EVOSCALE_TESTS_PLACEMENT_REQUESTS_H_

#include <cstdint>

#include "placement/cluster.h"
#include "placement/fragmentation.h"

namespace evoscale::placement::testing {

inline PodRequest Pod(int64_t cpu, int num_gpus, int milli) {
  PodRequest pod;
  pod.cpu_milli = cpu;
  pod.num_gpus = num_gpus;
  pod.gpu_milli = milli;
  return pod;
}

inline TypicalPod Typical(int64_t cpu, int num_gpus, int milli, double frequency) {
  TypicalPod pod;
  pod.request = Pod(cpu, num_gpus, milli);
  pod.frequency = frequency;
  return pod;
}

}  // namespace evoscale::placement::testing

#endif  // EVOSCALE_TESTS_PLACEMENT_REQUESTS_H_
