#include "service/scheduler/trial_sizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::service {

load_model::TrialParams ModelParams(const v1::Trial& trial) {
  load_model::TrialParams params;
  for (const v1::Parameter& p : trial.parameters()) {
    switch (p.value_case()) {
      case v1::Parameter::kDoubleValue:
        params[p.name()] = p.double_value();
        break;
      case v1::Parameter::kIntValue:
        params[p.name()] = static_cast<double>(p.int_value());
        break;
      case v1::Parameter::kStringValue:
        params[absl::StrCat(p.name(), "=", p.string_value())] = 1;
        break;
      default:
        break;
    }
  }
  return params;
}

bool TrialSizer::NeedsFit(const v1::Study& study) const {
  if (study.spec().trial_template().fixed_resources()) return false;
  absl::MutexLock lock(&mu_);
  auto it = models_.find(study.name());
  return it == models_.end() || it->second.completed != study.completed_trial_count();
}

void TrialSizer::Fit(const v1::Study& study, std::vector<v1::Trial> succeeded) {
  // Trials that ran to their end, in the order they ended: a stopped or failed run's peak is
  // only a lower bound of what a whole run needs.
  std::erase_if(succeeded, [](const v1::Trial& t) {
    return t.usage().peak_memory_bytes() <= 0 || t.usage().stopped();
  });
  std::stable_sort(succeeded.begin(), succeeded.end(), [](const v1::Trial& a, const v1::Trial& b) {
    return std::make_pair(a.end_time().seconds(), a.end_time().nanos()) <
           std::make_pair(b.end_time().seconds(), b.end_time().nanos());
  });
  auto model = std::make_unique<load_model::TrialResourceModel>();
  for (const v1::Trial& t : succeeded) {
    load_model::TrialTelemetry telemetry;
    telemetry.params = ModelParams(t);
    telemetry.peak_memory_bytes = static_cast<double>(t.usage().peak_memory_bytes());
    telemetry.peak_cpu_cores = t.usage().mean_cpu_cores();
    model->AddTrial(telemetry).IgnoreError();  // the store holds only validated usage
  }
  absl::MutexLock lock(&mu_);
  StudyModel& m = models_[study.name()];
  // OOM kills since the last fit still count against the margin.
  if (m.model != nullptr) model->MergeOutOfMemory(*m.model);
  m.model = std::move(model);
  m.completed = study.completed_trial_count();
}

v1::ResourceRequest TrialSizer::RequestFor(const v1::Study& study, const v1::Trial& trial) const {
  const v1::TrialTemplate& tt = study.spec().trial_template();
  v1::ResourceRequest r = tt.resources();
  if (!tt.fixed_resources()) {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(study.name());
    const load_model::TrialResourceModel* model =
        it == models_.end() ? nullptr : it->second.model.get();
    if (model != nullptr && model->num_trials() >= std::max(1, learn_after_trials_)) {
      const load_model::TrialResourceRequest predicted = model->Predict(ModelParams(trial));
      // CPU is throttled, not killed: never more cores than the template asks for.
      r.set_cpu_cores(tt.resources().cpu_cores() > 0
                          ? std::min(predicted.cpu_cores, tt.resources().cpu_cores())
                          : predicted.cpu_cores);
      r.set_memory_bytes(std::min(predicted.memory_bytes, memory_capacity_));
    }
  }
  // After an OOM kill, the trial's own (doubled) request is a floor.
  if (trial.usage().oom_kills() > 0) {
    r.set_memory_bytes(std::max(r.memory_bytes(), trial.resources().memory_bytes()));
  }
  return r;
}

void TrialSizer::AddOutOfMemory(const std::string& study, const v1::Trial& trial,
                                int64_t limit_bytes) {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(study);
  if (it != models_.end() && it->second.model != nullptr) {
    it->second.model->AddOutOfMemory(ModelParams(trial), static_cast<double>(limit_bytes));
  }
}

}  // namespace evoscale::service
