#include "service/scheduler/trial_sizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/study/study_limits.h"

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

void TrialSizer::Fit(const v1::Study& study, std::vector<v1::Trial> ended) {
  std::erase_if(ended, [](const v1::Trial& t) { return t.usage().peak_memory_bytes() <= 0; });
  std::stable_sort(ended.begin(), ended.end(), [](const v1::Trial& a, const v1::Trial& b) {
    return std::make_pair(a.end_time().seconds(), a.end_time().nanos()) <
           std::make_pair(b.end_time().seconds(), b.end_time().nanos());
  });
  auto model = std::make_unique<load_model::TrialResourceModel>();
  for (const v1::Trial& t : ended) {
    load_model::TrialTelemetry telemetry;
    telemetry.params = ModelParams(t);
    telemetry.peak_memory_bytes = static_cast<double>(t.usage().peak_memory_bytes());
    telemetry.peak_cpu_cores = t.usage().mean_cpu_cores();
    // A stopped or failed run's peak is only a lower bound of what a whole run needs; its
    // curve still teaches time up to where it stopped.
    telemetry.stopped = t.usage().stopped() || t.state() == v1::Trial::STOPPED;
    telemetry.cores_held = t.resources().cpu_cores();
    for (const v1::Measurement& m : t.measurements()) {
      telemetry.curve.push_back({.step = m.step(), .elapsed_seconds = m.elapsed_seconds()});
    }
    if (!load_model::ValidateTrialTelemetry(telemetry).ok()) telemetry.curve.clear();
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
    if (model != nullptr && model->num_usage_trials() >= std::max(1, learn_after_trials_)) {
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

std::map<std::string, std::string> TrialSizer::PredictionFor(
    const v1::Study& study, const v1::Trial& trial, const v1::ResourceRequest& request) const {
  std::map<std::string, std::string> noted;
  if (study.spec().trial_template().fixed_resources()) return noted;
  absl::MutexLock lock(&mu_);
  auto it = models_.find(study.name());
  if (it == models_.end() || it->second.model == nullptr) return noted;
  const load_model::TrialResourceModel& model = *it->second.model;
  const load_model::TrialResourceRequest predicted = model.Predict(ModelParams(trial));
  if (predicted.core_seconds_learned) {
    noted[kCostModelCoefficient] = absl::StrCat(predicted.core_seconds_coefficient);
    noted[kCostModelExponent] = absl::StrCat(predicted.step_exponent);
  }
  if (model.num_usage_trials() >= std::max(1, learn_after_trials_)) {
    noted[kCostModelMemory] = absl::StrCat(request.memory_bytes());
  }
  return noted;
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
