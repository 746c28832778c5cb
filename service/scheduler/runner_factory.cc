#include "service/scheduler/runner_factory.h"

#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/trial_template/trial_template.h"
#include "trainer_adapter/slurm_runner.h"

namespace evoscale::service {
namespace {

namespace ta = ::evoscale::trainer_adapter;

class LocalAndSlurmFactory : public RunnerFactory {
 public:
  LocalAndSlurmFactory(ta::LocalRunnerOptions local, std::string slurm_conf,
                       std::string slurm_output_dir)
      : local_(ta::NewLocalProcessRunner([&] {
          local.die_with_starting_thread = true;  // each driving thread outlives its trial
          return local;
        }())),
        slurm_conf_(std::move(slurm_conf)),
        slurm_output_dir_(std::move(slurm_output_dir)) {}

  absl::StatusOr<ta::TrialRunner*> RunnerFor(const v1::Study& study) override {
    const v1::TrialTemplate& tt = study.spec().trial_template();
    if (RunnerOf(tt).value_or(Runner::kLocal) != Runner::kSlurm) return local_.get();
    absl::MutexLock lock(&mu_);
    std::unique_ptr<ta::TrialRunner>& runner = slurm_[study.name()];
    if (runner != nullptr) return runner.get();
    ta::SlurmRunnerOptions options;
    options.slurm_conf = slurm_conf_;
    options.partition = tt.slurm().partition();
    options.account = tt.slurm().account();
    options.extra_args.assign(tt.slurm().extra_args().begin(), tt.slurm().extra_args().end());
    options.output_dir = slurm_output_dir_;
    std::error_code ec;
    std::filesystem::create_directories(options.output_dir, ec);
    absl::StatusOr<std::unique_ptr<ta::TrialRunner>> made = ta::NewSlurmRunner(options);
    if (!made.ok()) return made.status();
    runner = *std::move(made);
    return runner.get();
  }

  std::string enforcement() const override { return local_->enforcement(); }

 private:
  const std::unique_ptr<ta::TrialRunner> local_;
  const std::string slurm_conf_;
  const std::string slurm_output_dir_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<ta::TrialRunner>> slurm_ ABSL_GUARDED_BY(mu_);  // by study
};

}  // namespace

std::unique_ptr<RunnerFactory> NewRunnerFactory(ta::LocalRunnerOptions local,
                                                std::string slurm_conf,
                                                std::string slurm_output_dir) {
  return std::make_unique<LocalAndSlurmFactory>(std::move(local), std::move(slurm_conf),
                                                std::move(slurm_output_dir));
}

}  // namespace evoscale::service
