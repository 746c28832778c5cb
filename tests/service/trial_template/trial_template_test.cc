// The trial template's room (service/trial_template/trial_template.h): names, runner,
// expansion, the resume rule and CreateStudy's checks.
#include "service/trial_template/trial_template.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::service {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::UnorderedElementsAre;

v1::StudySpec ConditionalSpec() {
  v1::StudySpec spec;
  v1::ParameterSpec* opt = spec.add_parameters();
  opt->set_name("optimizer");
  opt->mutable_categorical_spec()->add_values("sgd");
  opt->mutable_categorical_spec()->add_values("adam");
  auto* child = opt->add_children();
  child->add_parent_categorical_values("adam");
  child->mutable_parameter_spec()->set_name("beta");
  child->mutable_parameter_spec()->mutable_double_spec()->set_min(0.8);
  child->mutable_parameter_spec()->mutable_double_spec()->set_max(0.999);
  spec.mutable_trial_template()->set_command("evoscale-trainer");
  return spec;
}

TEST(ExpandArgsTest, SubstitutesNamesAndRejectsUnknownOnes) {
  absl::StatusOr<std::vector<std::string>> out =
      ExpandArgs({"--lr=${lr}", "${a}${b}", "$${lr}", "echo $$ $1 $HOME", "cost $5", "plain"},
                 {{"lr", "0.01"}, {"a", "x"}, {"b", "y"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre("--lr=0.01", "xy", "${lr}", "echo $$ $1 $HOME", "cost $5",
                                "plain"));
  absl::Status st = ExpandArgs({"ok", "--x=${nope}"}, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "args[1] \"--x=${nope}\": unknown name \"nope\"");
  st = ExpandArgs({"${open"}, {{"open", "1"}}).status();
  EXPECT_EQ(st.message(), "args[0] \"${open\": unclosed \"${\"");
}

TEST(TrialTemplateTest, NamesAreEveryParameterAtAnyDepthAndTheTrialsOwn) {
  EXPECT_THAT(TemplateNames(ConditionalSpec()),
              UnorderedElementsAre(Key("optimizer"), Key("beta"), Key("trial"), Key("trial_id"),
                                   Key("study"), Key("checkpoint_dir")));
}

TEST(TrialTemplateTest, ValuesAreTheTrialsParametersWithDoublesThatReadBackExactly) {
  v1::Study study;
  study.set_name("studies/4");
  v1::Trial trial;
  trial.set_name("studies/4/trials/9");
  trial.set_id(9);
  v1::Parameter* lr = trial.add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.1 + 0.2);  // 0.30000000000000004: every digit it needs
  v1::Parameter* dim = trial.add_parameters();
  dim->set_name("dim");
  dim->set_int_value(16);
  v1::Parameter* opt = trial.add_parameters();
  opt->set_name("optimizer");
  opt->set_string_value("adam");
  const std::map<std::string, std::string> values = TemplateValues(study, trial, "/ck/4/9");
  EXPECT_EQ(values.at("lr"), "0.30000000000000004");
  EXPECT_EQ(values.at("dim"), "16");
  EXPECT_EQ(values.at("optimizer"), "adam");
  EXPECT_EQ(values.at("trial"), "studies/4/trials/9");
  EXPECT_EQ(values.at("trial_id"), "9");
  EXPECT_EQ(values.at("study"), "studies/4");
  EXPECT_EQ(values.at("checkpoint_dir"), "/ck/4/9");
  EXPECT_FALSE(values.contains("beta"));  // a conditional parameter the trial does not have
}

TEST(TrialTemplateTest, RunnerIsLocalByDefaultAndOtherNamesAreRefused) {
  v1::TrialTemplate t;
  EXPECT_EQ(*RunnerOf(t), Runner::kLocal);
  t.set_runner("local");
  EXPECT_EQ(*RunnerOf(t), Runner::kLocal);
  t.set_runner("slurm");
  EXPECT_EQ(*RunnerOf(t), Runner::kSlurm);
  t.set_runner("kubernetes");
  EXPECT_EQ(RunnerOf(t).status().message(),
            "spec.trial_template.runner: \"kubernetes\" is not local or slurm");
}

TEST(TrialTemplateTest, OnlyATemplateUsingCheckpointDirResumes) {
  v1::TrialTemplate t;
  t.add_args("--lr=${lr}");
  EXPECT_FALSE(ResumesFromCheckpoint(t));
  t.add_args("--checkpoint-dir=${checkpoint_dir}");
  EXPECT_TRUE(ResumesFromCheckpoint(t));
}

TEST(TrialTemplateTest, ValidationNamesTheField) {
  v1::StudySpec spec = ConditionalSpec();
  spec.mutable_trial_template()->add_args("--beta=${beta}");
  EXPECT_TRUE(ValidateTrialTemplate(spec).ok());
  spec.mutable_trial_template()->add_args("--x=${nope}");
  EXPECT_THAT(ValidateTrialTemplate(spec).message(),
              HasSubstr("spec.trial_template.args[1] \"--x=${nope}\": unknown name \"nope\""));
  spec = ConditionalSpec();
  spec.mutable_trial_template()->set_parallel_trials(1001);
  EXPECT_EQ(ValidateTrialTemplate(spec).message(),
            "spec.trial_template.parallel_trials: 1001 must be in [0, 1000]");
  spec = ConditionalSpec();
  spec.mutable_trial_template()->mutable_slurm()->set_partition("debug");
  EXPECT_EQ(ValidateTrialTemplate(spec).message(),
            "spec.trial_template.slurm: set, but the runner is not \"slurm\"");
  spec.mutable_trial_template()->set_runner("slurm");
  EXPECT_TRUE(ValidateTrialTemplate(spec).ok());
}

}  // namespace
}  // namespace evoscale::service
