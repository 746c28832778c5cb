// Fuzzes the study spec's validation: protobuf bytes -> v1::StudySpec -> ToProblem. A spec that
// validates must build its designer, and every suggestion must pass the same checks a client's
// trial does (ToParameterDict), before and after the designer learns from finished trials.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "evoscale/v1/study.pb.h"
#include "search/designers.h"
#include "service/study/study_converter.h"

namespace {

using evoscale::search::ParameterDict;

[[noreturn]] void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "spec_fuzz: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace v1 = evoscale::v1;
  v1::StudySpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return -1;  // not a StudySpec
  absl::StatusOr<evoscale::search::ProblemStatement> problem = evoscale::service::ToProblem(spec);
  if (!problem.ok()) return 0;
  evoscale::service::ToEarlyStopping(spec);
  absl::StatusOr<std::unique_ptr<evoscale::search::Designer>> designer =
      evoscale::search::CreateDesigner(*problem);
  if (!designer.ok()) return 0;  // e.g. an unknown setting: the service rejects the study
  int64_t trials = 0;
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<std::vector<ParameterDict>> suggested = (*designer)->Suggest(2, trials);
    if (!suggested.ok()) return 0;                  // an exhausted space
    std::vector<evoscale::search::Trial> finished;  // in this round, fed to the designer
    for (const ParameterDict& params : *suggested) {
      ++trials;
      v1::Trial trial;
      evoscale::service::SetParameters(params, &trial);
      absl::StatusOr<ParameterDict> back =
          evoscale::service::ToParameterDict(problem->space, trial.parameters(), "suggestion");
      if (!back.ok()) Fail("a suggestion of a valid spec does not validate", back.status());
      for (const v1::MetricSpec& metric : spec.metrics()) {
        v1::Measurement* m = trial.mutable_final_measurement();
        (*m->mutable_metrics())[metric.name()] = static_cast<double>(trials % 3);
      }
      trial.set_id(trials);
      trial.set_state(v1::Trial::SUCCEEDED);
      finished.push_back(evoscale::service::ToSearchTrial(trial));
    }
    (*designer)->Update(finished, {});
  }
  return 0;
}
