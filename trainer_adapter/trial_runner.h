// TrialRunner: runs one managed trial (a local process or a Kubernetes Job).
// The implementation arrives with the managed-trials issue; this header marks the module.
#ifndef EVOSCALE_TRAINER_ADAPTER_TRIAL_RUNNER_H_
#define EVOSCALE_TRAINER_ADAPTER_TRIAL_RUNNER_H_

namespace evoscale::trainer_adapter {}  // namespace evoscale::trainer_adapter

#endif  // EVOSCALE_TRAINER_ADAPTER_TRIAL_RUNNER_H_
