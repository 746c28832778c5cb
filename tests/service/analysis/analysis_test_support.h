// What the analysis tests and the HTTP routes' tests share: a study with a conditional
// parameter and succeeded trials of it, built here.
#ifndef EVOSCALE_TESTS_SERVICE_ANALYSIS_ANALYSIS_TEST_SUPPORT_H_
#define EVOSCALE_TESTS_SERVICE_ANALYSIS_ANALYSIS_TEST_SUPPORT_H_

#include <cstdint>
#include <string>

#include "evoscale/v1/study.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace evoscale::service::testing {

// loss (minimised) over x in [0, 1] and opt in {adam, sgd}; sgd has a momentum in [0, 1].
inline constexpr char kAnalysisSpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  parameters { name: "x" double_spec { min: 0 max: 1 } }
  parameters {
    name: "opt"
    categorical_spec { values: "adam" values: "sgd" }
    children {
      parent_categorical_values: "sgd"
      parameter_spec { name: "momentum" double_spec { min: 0 max: 1 } }
    }
  }
)pb";

inline v1::Study MakeStudy(const char* spec = kAnalysisSpec) {
  v1::Study s;
  s.set_name("studies/1");
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(spec, s.mutable_spec()));
  return s;
}

// Trial `id` of studies/1, SUCCEEDED with `loss` at x, opt (momentum 0.9 under sgd).
inline v1::Trial Succeeded(int64_t id, double loss, double x, const std::string& opt = "adam") {
  v1::Trial t;
  t.set_id(id);
  t.set_name("studies/1/trials/" + std::to_string(id));
  t.set_state(v1::Trial::SUCCEEDED);
  auto* px = t.add_parameters();
  px->set_name("x");
  px->set_double_value(x);
  auto* po = t.add_parameters();
  po->set_name("opt");
  po->set_string_value(opt);
  if (opt == "sgd") {
    auto* pm = t.add_parameters();
    pm->set_name("momentum");
    pm->set_double_value(0.9);
  }
  (*t.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
  return t;
}

}  // namespace evoscale::service::testing

#endif  // EVOSCALE_TESTS_SERVICE_ANALYSIS_ANALYSIS_TEST_SUPPORT_H_
