// RunnerFactory: the trainer_adapter::TrialRunner that runs a managed study's trials. The real
// one (NewRunnerFactory) runs them as local processes, or, for a study whose
// trial_template.runner is "slurm", as Slurm batch jobs through a runner of the study's own;
// tests give the scheduler a factory of their own so that they drive it without processes.
#ifndef EVOSCALE_SERVICE_SCHEDULER_RUNNER_FACTORY_H_
#define EVOSCALE_SERVICE_SCHEDULER_RUNNER_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "evoscale/v1/study.pb.h"
#include "trainer_adapter/trial_runner.h"

namespace evoscale::service {

// Thread-safe: RunnerFor is called from the threads that drive trials.
class RunnerFactory {
 public:
  virtual ~RunnerFactory() = default;
  // The runner of `study`'s trials, owned by the factory and alive as long as it.
  // FAILED_PRECONDITION (or the runner's own error) when it cannot be made, e.g. Slurm does
  // not answer.
  virtual absl::StatusOr<trainer_adapter::TrialRunner*> RunnerFor(const v1::Study& study) = 0;
  // How local trials are contained: "cgroup v1 (...)" or "sampling /proc every ...: WHY".
  virtual std::string enforcement() const = 0;
};

// Local processes with `local` (each trial's first process dies with the thread that started
// it: the scheduler's driving threads outlive their trials), and per study a Slurm runner
// with `slurm_conf` (empty: Slurm's default) writing its scripts and output to
// `slurm_output_dir`, made at the study's first trial.
std::unique_ptr<RunnerFactory> NewRunnerFactory(trainer_adapter::LocalRunnerOptions local,
                                                std::string slurm_conf,
                                                std::string slurm_output_dir);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_SCHEDULER_RUNNER_FACTORY_H_
