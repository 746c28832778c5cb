// TrialSizer: the resource request each waiting managed trial runs with, from its study's load
// model (load_model::TrialResourceModel) fitted on the usage of the study's trials that ran to
// their end.
//
// A study's trials request the template's `resources` until `learn_after_trials` of them have
// ended (a fit on fewer extrapolates badly, and an OOM kill costs a whole rerun), or always when
// the template says `fixed_resources`; then what the model predicts for the trial's parameters:
// no more cores than the template asks for (CPU is throttled, not killed) and no more memory
// than the capacity. A trial that was OOM-killed asks for at least its own (doubled) request.
//
// Thread-safe (one mutex; no call waits on anything else). Fitting reads nothing itself: the
// caller fetches the study's SUCCEEDED trials (with no lock of its own held) and hands them to
// Fit, so that the study core is never called under a lock.
#ifndef EVOSCALE_SERVICE_SCHEDULER_TRIAL_SIZER_H_
#define EVOSCALE_SERVICE_SCHEDULER_TRIAL_SIZER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/study.pb.h"
#include "load_model/trial_resource_model.h"

namespace evoscale::service {

// A trial's parameters as the load model's features: numbers as they are, a categorical value
// as a one-hot "name=value".
load_model::TrialParams ModelParams(const v1::Trial& trial);

class TrialSizer {
 public:
  // `memory_capacity_bytes`: no trial asks for more (> 0).
  TrialSizer(int learn_after_trials, int64_t memory_capacity_bytes)
      : learn_after_trials_(learn_after_trials), memory_capacity_(memory_capacity_bytes) {}

  // Whether the study's model must be (re)fitted before RequestFor: it has none yet, or the
  // study's completed_trial_count moved since. False for fixed_resources templates.
  bool NeedsFit(const v1::Study& study) const;
  // Fits the study's model on `ended` (its SUCCEEDED and STOPPED trials, any order, taken in
  // the order they ended; those without usage are left out): the runs that ended on their own
  // teach memory and cores, every one with measurements teaches time (its curve of steps and
  // elapsed seconds). Keeps the OOM kills the previous fit had seen.
  void Fit(const v1::Study& study, std::vector<v1::Trial> ended);
  // The request `trial` of `study` runs with (the header comment's rule). Cheap: a fitted
  // model predicts in O(features).
  v1::ResourceRequest RequestFor(const v1::Study& study, const v1::Trial& trial) const;
  // What the study's cost model predicts for `trial` now, as the metadata keys the study core
  // reports the model's accuracy from (study_limits.h's kCostModel*): its core-seconds curve
  // once a trial has taught time, and `request`'s memory (RequestFor's answer, the one it runs
  // with) once that is the model's. Empty before, and for fixed_resources templates.
  std::map<std::string, std::string> PredictionFor(const v1::Study& study, const v1::Trial& trial,
                                                   const v1::ResourceRequest& request) const;
  // A run of `trial` was OOM-killed at `limit_bytes`: the study's margin grows. No-op before
  // the study's first fit.
  void AddOutOfMemory(const std::string& study, const v1::Trial& trial, int64_t limit_bytes);

 private:
  struct StudyModel {
    int64_t completed = -1;  // the study's completed_trial_count when fitted
    std::unique_ptr<load_model::TrialResourceModel> model;
  };

  const int learn_after_trials_;
  const int64_t memory_capacity_;
  mutable absl::Mutex mu_;
  // By study name. Predict refits lazily, so reading a model needs mu_ too.
  std::map<std::string, StudyModel> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_SCHEDULER_TRIAL_SIZER_H_
