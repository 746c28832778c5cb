// Tests of the evoscale CLI (service/cli/): the pure parts, and Run() against an in-process
// StudyService on a real socket (port 0). The end-to-end test against evoscaled is in
// tests/e2e/.

#include "service/cli/cli.h"

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace evoscale::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << contents;
  return path;
}

struct RunResult {
  int code;
  std::string out;
  std::string err;
};

RunResult RunCli(const std::vector<std::string>& args, const Environment& env = {}) {
  std::ostringstream out, err;
  int code = Run(args, env, out, err);
  return {code, out.str(), err.str()};
}

// ---- metric=value --------------------------------------------------------------------------

TEST(ParseMetricTest, ParsesNameAndValue) {
  absl::StatusOr<std::pair<std::string, double>> metric = ParseMetric("loss=0.25");
  ASSERT_TRUE(metric.ok()) << metric.status();
  EXPECT_EQ(metric->first, "loss");
  EXPECT_EQ(metric->second, 0.25);
  EXPECT_EQ(ParseMetric("acc=-1e-3")->second, -1e-3);
}

TEST(ParseMetricTest, RejectsValueThatIsNotANumber) {
  absl::StatusOr<std::pair<std::string, double>> metric = ParseMetric("loss=abc");
  EXPECT_EQ(metric.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric.status().message(), "metric \"loss=abc\": value is not a number");
  EXPECT_EQ(ParseMetric("loss=").status().message(), "metric \"loss=\": value is not a number");
  EXPECT_EQ(ParseMetric("loss=nan").status().message(),
            "metric \"loss=nan\": value is not a number");
  EXPECT_EQ(ParseMetric("loss=inf").status().message(), "metric \"loss=inf\": value is not finite");
}

TEST(ParseMetricTest, RejectsMissingEqualsOrName) {
  EXPECT_EQ(ParseMetric("loss").status().message(), "metric \"loss\": expected NAME=VALUE");
  EXPECT_EQ(ParseMetric("=3").status().message(), "metric \"=3\": the name is empty");
}

TEST(ParseMetricsTest, CollectsAllAndRejectsDuplicates) {
  absl::StatusOr<std::map<std::string, double>> metrics = ParseMetrics({"loss=1", "acc=0.5"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, ElementsAre(Pair("acc", 0.5), Pair("loss", 1.0)));
  EXPECT_EQ(ParseMetrics({"loss=1", "loss=2"}).status().message(), "metric \"loss\" given twice");
}

// ---- names ---------------------------------------------------------------------------------

TEST(NormalizeStudyNameTest, AcceptsFullNameAndBareId) {
  EXPECT_EQ(*NormalizeStudyName("7"), "studies/7");
  EXPECT_EQ(*NormalizeStudyName("studies/7"), "studies/7");
}

TEST(NormalizeStudyNameTest, RejectsOtherShapes) {
  for (const char* bad : {"", "studies/", "studies/7/trials/1", "a/b"}) {
    absl::StatusOr<std::string> name = NormalizeStudyName(bad);
    EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(name.status().message(),
              absl::StrCat("study \"", bad, "\": expected studies/ID or ID"));
  }
}

TEST(ValidateTrialNameTest, AcceptsOnlyFullTrialNames) {
  EXPECT_EQ(*ValidateTrialName("studies/1/trials/3"), "studies/1/trials/3");
  for (const char* bad : {"3", "studies/1", "studies/1/trials/", "studies//trials/3",
                          "studies/1/trials/3/x", "projects/1/trials/3"}) {
    EXPECT_EQ(ValidateTrialName(bad).status().message(),
              absl::StrCat("trial \"", bad, "\": expected a trial name studies/ID/trials/ID"))
        << bad;
  }
}

// ---- command line --------------------------------------------------------------------------

TEST(ParseCommandLineTest, DefaultsWithoutFlagsOrEnvironment) {
  absl::StatusOr<CommandLine> line = ParseCommandLine({"study", "list"}, {});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->global.server, "127.0.0.1:50051");
  EXPECT_EQ(line->global.token, "");
  EXPECT_FALSE(line->global.json);
  EXPECT_EQ(line->global.timeout_seconds, 10.0);
  EXPECT_THAT(line->words, ElementsAre("study", "list"));
  EXPECT_TRUE(line->flags.empty());
}

TEST(ParseCommandLineTest, GlobalFlagsAnywhereAndCommandFlagsKept) {
  absl::StatusOr<CommandLine> line =
      ParseCommandLine({"suggest", "--json", "7", "--count=3", "--server", "h:1", "--token", "t",
                        "--timeout", "2.5", "--client-id", "me"},
                       {});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->global.server, "h:1");
  EXPECT_EQ(line->global.token, "t");
  EXPECT_TRUE(line->global.json);
  EXPECT_EQ(line->global.timeout_seconds, 2.5);
  EXPECT_THAT(line->words, ElementsAre("suggest", "7"));
  EXPECT_THAT(line->flags, ElementsAre(Pair("client-id", "me"), Pair("count", "3")));
}

TEST(ParseCommandLineTest, EnvironmentGivesDefaultsThatFlagsOverride) {
  Environment env{.server = "env:5", .token = "env-token", .hostname = "h"};
  absl::StatusOr<CommandLine> line = ParseCommandLine({"study", "list"}, env);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->global.server, "env:5");
  EXPECT_EQ(line->global.token, "env-token");
  line = ParseCommandLine({"--server=flag:6", "--token", "flag-token", "study", "list"}, env);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->global.server, "flag:6");
  EXPECT_EQ(line->global.token, "flag-token");
}

TEST(ParseCommandLineTest, ShortFlagsNegativeNumbersAndDoubleDash) {
  absl::StatusOr<CommandLine> line =
      ParseCommandLine({"study", "create", "-f", "s.yaml", "-h", "-3", "--", "--json"}, {});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->global.help);
  EXPECT_FALSE(line->global.json);
  EXPECT_THAT(line->words, ElementsAre("study", "create", "-3", "--json"));
  EXPECT_THAT(line->flags, ElementsAre(Pair("file", "s.yaml")));
}

TEST(ParseCommandLineTest, RejectsBadFlags) {
  auto message = [](std::vector<std::string> args) {
    return std::string(ParseCommandLine(args, {}).status().message());
  };
  EXPECT_EQ(message({"--bogus"}), "unknown flag --bogus");
  EXPECT_EQ(message({"-x"}), "unknown flag -x");
  EXPECT_EQ(message({"suggest", "7", "--count"}), "flag --count needs a value");
  EXPECT_EQ(message({"--json=yes"}), "flag --json takes no value");
  EXPECT_EQ(message({"--count", "1", "--count", "2"}), "flag --count given twice");
  EXPECT_EQ(message({"--timeout", "0"}),
            "flag --timeout: \"0\" is not a number of seconds in (0, 86400]");
  EXPECT_EQ(message({"--timeout", "soon"}),
            "flag --timeout: \"soon\" is not a number of seconds in (0, 86400]");
  EXPECT_EQ(message({"--server="}), "flag --server: the address is empty");
}

// ---- YAML to JSON --------------------------------------------------------------------------

TEST(YamlToJsonTest, PlainScalarsBecomeNumbersBoolsAndNulls) {
  absl::StatusOr<std::string> json = YamlToJson(
      "i: 42\nneg: -7\nplus: +3\nf: 1.5\ne: 1e-4\ndot: .5\ntrail: 2.\nlead: 007\n"
      "hex: 0x1F\noct: 0o17\nt: true\nF: False\nn: ~\ne2: null\ninf: -.inf\nnan: .nan\n"
      "s: hello world\nyes: yes\nver: 1.2.3\n");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, R"({"i":42,"neg":-7,"plus":3,"f":1.5,"e":1e-4,"dot":0.5,"trail":2,"lead":7,)"
                   R"("hex":31,"oct":15,"t":true,"F":false,"n":null,"e2":null,"inf":"-Infinity",)"
                   R"("nan":"NaN","s":"hello world","yes":"yes","ver":"1.2.3"})");
}

TEST(YamlToJsonTest, QuotedAndTaggedScalarsStayStrings) {
  absl::StatusOr<std::string> json =
      YamlToJson("a: \"42\"\nb: 'true'\nc: !!str 1.5\nd: \"say \\\"hi\\\"\\n\"\ne: [1, \"2\"]\n");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, R"({"a":"42","b":"true","c":"1.5","d":"say \"hi\"\n","e":[1,"2"]})");
}

TEST(YamlToJsonTest, SchemaKeepsScalarsOfStringFieldsAsStrings) {
  absl::StatusOr<std::string> json = YamlToJson(
      "display_name: 2024\n"
      "spec:\n"
      "  max_trials: 20\n"
      "  parameters:\n"
      "    - name: units\n"
      "      categorical_spec: {values: [32, 64, wide]}\n"
      "  algorithm: {algorithm: NSGA2, seed: 5, settings: {population_size: 50}}\n"
      "  trialTemplate: {args: [--epochs, 3], env: {OMP_NUM_THREADS: 4}}\n",
      v1::Study::descriptor());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            R"({"display_name":"2024","spec":{"max_trials":20,"parameters":[{"name":"units",)"
            R"("categorical_spec":{"values":["32","64","wide"]}}],"algorithm":{"algorithm":)"
            R"("NSGA2","seed":5,"settings":{"population_size":"50"}},"trialTemplate":{"args":)"
            R"(["--epochs","3"],"env":{"OMP_NUM_THREADS":"4"}}}})");
}

TEST(YamlToJsonTest, SyntaxErrorGivesPosition) {
  absl::StatusOr<std::string> json = YamlToJson("a: [1, 2\nb: 3\n");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("line "));
  EXPECT_THAT(json.status().message(), HasSubstr(", column "));
}

// ---- study files ---------------------------------------------------------------------------

constexpr char kStudyJson[] =
    R"({"display_name":"x","spec":{"metrics":[{"name":"loss","goal":"MINIMIZE"}],)"
    R"("parameters":[{"name":"lr","double_spec":{"min":1e-4,"max":1},"scale":"LOG"}],)"
    R"("algorithm":{"algorithm":"RANDOM"},"max_trials":20}})";

constexpr char kStudyYaml[] = R"(# the same study as kStudyJson
display_name: x
spec:
  metrics:
    - name: loss
      goal: MINIMIZE
  parameters:
    - name: lr
      double_spec: {min: 1e-4, max: 1}
      scale: LOG
  algorithm:
    algorithm: RANDOM
  max_trials: 20
)";

// The message kStudyJson and kStudyYaml describe, field by field.
void ExpectIsExampleStudy(const v1::Study& study) {
  EXPECT_EQ(study.display_name(), "x");
  EXPECT_EQ(study.name(), "");
  ASSERT_EQ(study.spec().metrics_size(), 1);
  EXPECT_EQ(study.spec().metrics(0).name(), "loss");
  EXPECT_EQ(study.spec().metrics(0).goal(), v1::MetricSpec::MINIMIZE);
  EXPECT_FALSE(study.spec().metrics(0).has_safety_threshold());
  ASSERT_EQ(study.spec().parameters_size(), 1);
  const v1::ParameterSpec& lr = study.spec().parameters(0);
  EXPECT_EQ(lr.name(), "lr");
  ASSERT_TRUE(lr.has_double_spec());
  EXPECT_EQ(lr.double_spec().min(), 1e-4);
  EXPECT_EQ(lr.double_spec().max(), 1.0);
  EXPECT_EQ(lr.scale(), v1::ParameterSpec::LOG);
  EXPECT_EQ(study.spec().algorithm().algorithm(), v1::AlgorithmSpec::RANDOM);
  EXPECT_EQ(study.spec().max_trials(), 20);
}

TEST(StudyFileTest, LoadsJson) {
  absl::StatusOr<v1::Study> study = LoadStudyFile(WriteTempFile("study.json", kStudyJson));
  ASSERT_TRUE(study.ok()) << study.status();
  ExpectIsExampleStudy(*study);
}

TEST(StudyFileTest, LoadsYaml) {
  absl::StatusOr<v1::Study> study = LoadStudyFile(WriteTempFile("study.yaml", kStudyYaml));
  ASSERT_TRUE(study.ok()) << study.status();
  ExpectIsExampleStudy(*study);
}

TEST(StudyFileTest, DetectsFormatWithoutKnownExtension) {
  absl::StatusOr<v1::Study> json = LoadStudyFile(WriteTempFile("study-json.txt", kStudyJson));
  ASSERT_TRUE(json.ok()) << json.status();
  ExpectIsExampleStudy(*json);
  absl::StatusOr<v1::Study> yaml = LoadStudyFile(WriteTempFile("study-yaml.txt", kStudyYaml));
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ExpectIsExampleStudy(*yaml);
  EXPECT_EQ(DetectStudyFileFormat("a.YML", "{"), StudyFileFormat::kYaml);
  EXPECT_EQ(DetectStudyFileFormat("a", "  {}"), StudyFileFormat::kJson);
}

TEST(StudyFileTest, BareSpecBecomesTheStudysSpec) {
  absl::StatusOr<v1::Study> json =
      ParseStudy(R"({"metrics":[{"name":"acc","goal":"MAXIMIZE"}],"maxTrials":3})",
                 StudyFileFormat::kJson, "spec.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->spec().metrics(0).name(), "acc");
  EXPECT_EQ(json->spec().metrics(0).goal(), v1::MetricSpec::MAXIMIZE);
  EXPECT_EQ(json->spec().max_trials(), 3);

  absl::StatusOr<v1::Study> yaml =
      ParseStudy("parameters:\n  - name: act\n    categorical_spec: {values: [relu, 1]}\n",
                 StudyFileFormat::kYaml, "spec.yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_EQ(yaml->spec().parameters_size(), 1);
  EXPECT_THAT(yaml->spec().parameters(0).categorical_spec().values(), ElementsAre("relu", "1"));
}

TEST(StudyFileTest, UnknownFieldIsAnErrorNamingTheFile) {
  absl::StatusOr<v1::Study> json =
      ParseStudy(R"({"display_name":"x","spec":{"budget":3}})", StudyFileFormat::kJson, "s.json");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("study file \"s.json\": not a valid Study: "));
  EXPECT_THAT(json.status().message(), HasSubstr("budget"));

  absl::StatusOr<v1::Study> yaml =
      ParseStudy("spec:\n  metrics: []\n  colour: red\n", StudyFileFormat::kYaml, "s.yaml");
  EXPECT_EQ(yaml.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(yaml.status().message(), HasSubstr("study file \"s.yaml\": not a valid Study: "));
  EXPECT_THAT(yaml.status().message(), HasSubstr("colour"));
}

TEST(StudyFileTest, BadEnumNameIsAnError) {
  absl::StatusOr<v1::Study> study =
      ParseStudy("metrics: [{name: loss, goal: SMALLER}]\n", StudyFileFormat::kYaml, "s.yaml");
  EXPECT_EQ(study.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(study.status().message(), HasSubstr("study file \"s.yaml\": not a valid Study"));
}

TEST(StudyFileTest, MalformedFileIsAnErrorNamingTheFile) {
  std::string json_path = WriteTempFile("broken.json", R"({"display_name": "x", )");
  absl::StatusOr<v1::Study> json = LoadStudyFile(json_path);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(),
              HasSubstr(absl::StrCat("study file \"", json_path, "\": invalid JSON: ")));

  std::string yaml_path = WriteTempFile("broken.yaml", "spec:\n  metrics: [\n");
  absl::StatusOr<v1::Study> yaml = LoadStudyFile(yaml_path);
  EXPECT_EQ(yaml.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(yaml.status().message(),
              HasSubstr(absl::StrCat("study file \"", yaml_path, "\": line ")));

  std::string list_path = WriteTempFile("list.yaml", "- a\n- b\n");
  EXPECT_EQ(LoadStudyFile(list_path).status().message(),
            absl::StrCat("study file \"", list_path, "\": expected a mapping of Study fields"));
  std::string empty_path = WriteTempFile("empty.yaml", "");
  EXPECT_EQ(LoadStudyFile(empty_path).status().message(),
            absl::StrCat("study file \"", empty_path, "\": the file holds no study"));
}

TEST(StudyFileTest, UnreadableFileNamesThePath) {
  std::string path = absl::StrCat(::testing::TempDir(), "/no-such-study.yaml");
  absl::StatusOr<v1::Study> study = LoadStudyFile(path);
  EXPECT_EQ(study.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(study.status().message(),
            absl::StrCat("cannot read study file \"", path, "\": No such file or directory"));
  EXPECT_EQ(LoadStudyFile(::testing::TempDir()).status().code(),
            absl::StatusCode::kInvalidArgument);  // a directory
}

// ---- output --------------------------------------------------------------------------------

TEST(CliFormatTest, TableAlignsColumnsWithoutTrailingBlanks) {
  EXPECT_EQ(FormatTable({"NAME", "STATE", "METRICS"}, {{"studies/1/trials/10", "ACTIVE", ""},
                                                       {"studies/1/trials/2", "SUCCEEDED"}}),
            "NAME                 STATE      METRICS\n"
            "studies/1/trials/10  ACTIVE     -\n"
            "studies/1/trials/2   SUCCEEDED  -\n");
  EXPECT_EQ(FormatTable({"A", "B"}, {}), "A  B\n");
}

TEST(CliFormatTest, NumbersUsePercentG) {
  EXPECT_EQ(FormatNumber(0.0001), "0.0001");
  EXPECT_EQ(FormatNumber(1e-7), "1e-07");
  EXPECT_EQ(FormatNumber(123456789.0), "1.23457e+08");
  EXPECT_EQ(FormatNumber(3), "3");
}

TEST(CliFormatTest, ParametersInOrderAndMetricsSorted) {
  v1::Trial trial;
  EXPECT_EQ(FormatParameters(trial), "-");
  v1::Parameter* lr = trial.add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.001);
  v1::Parameter* layers = trial.add_parameters();
  layers->set_name("layers");
  layers->set_int_value(3);
  v1::Parameter* act = trial.add_parameters();
  act->set_name("act");
  act->set_string_value("relu");
  EXPECT_EQ(FormatParameters(trial), "lr=0.001 layers=3 act=relu");

  v1::Measurement measurement;
  EXPECT_EQ(FormatMetrics(measurement), "-");
  (*measurement.mutable_metrics())["loss"] = 0.25;
  (*measurement.mutable_metrics())["acc"] = 0.9;
  EXPECT_EQ(FormatMetrics(measurement), "acc=0.9 loss=0.25");
}

// ---- usage errors (no server needed: they fail before any call) ----------------------------

TEST(CliRunTest, HelpPrintsUsageToStdout) {
  for (const char* flag : {"help", "--help", "-h"}) {
    RunResult result = RunCli({flag});
    EXPECT_EQ(result.code, 0);
    EXPECT_EQ(result.out, UsageText());
    EXPECT_EQ(result.err, "");
  }
  EXPECT_THAT(UsageText(), HasSubstr("trials list STUDY [--state STATE] [--page-size N]"));
  EXPECT_THAT(UsageText(), HasSubstr("should-stop TRIAL"));
}

TEST(CliRunTest, NoArgumentsPrintsUsageAndExits2) {
  RunResult result = RunCli({});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, UsageText());
}

TEST(CliRunTest, UsageErrorsExit2WithMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const Case cases[] = {
      {{"measure", "studies/1/trials/3", "--step", "1", "loss=abc"},
       "evoscale: measure: metric \"loss=abc\": value is not a number\n"},
      {{"measure", "studies/1/trials/3", "--step", "1", "loss"},
       "evoscale: measure: metric \"loss\": expected NAME=VALUE\n"},
      {{"measure", "studies/1/trials/3", "loss=1"}, "evoscale: measure: --step N is required\n"},
      {{"measure", "studies/1/trials/3", "--step", "x", "loss=1"},
       "evoscale: measure: flag --step: \"x\" is not an integer in [0, 9223372036854775807]\n"},
      {{"measure", "3", "--step", "1", "loss=1"},
       "evoscale: measure: trial \"3\": expected a trial name studies/ID/trials/ID\n"},
      {{"measure", "studies/1/trials/3", "--step", "1"},
       "evoscale: measure: missing arguments; expected TRIAL --step N METRIC=VALUE...\n"},
      {{"complete", "studies/1/trials/3", "loss=1", "--infeasible", "oom"},
       "evoscale: complete: give either metrics or --infeasible REASON, not both\n"},
      {{"suggest", "7", "--count", "0"},
       "evoscale: suggest: flag --count: \"0\" is not an integer in [1, 1000]\n"},
      {{"suggest", "7", "--step", "1"},
       "evoscale: suggest: flag --step does not apply (usage: evoscale suggest STUDY [--count N] "
       "[--client-id ID])\n"},
      {{"suggest"}, "evoscale: suggest: missing arguments; expected STUDY\n"},
      {{"study", "get", "7", "8"},
       "evoscale: study get: unexpected argument \"8\"; expected STUDY\n"},
      {{"study", "get", "studies/7/trials/1"},
       "evoscale: study get: study \"studies/7/trials/1\": expected studies/ID or ID\n"},
      {{"study", "state", "7", "paused"},
       "evoscale: study state: unknown state \"paused\"; expected active, inactive or completed\n"},
      {{"trials", "list", "7", "--state", "done"},
       "evoscale: trials list: flag --state: unknown trial state \"done\"; expected requested, "
       "active, stopping, succeeded, infeasible or failed\n"},
      {{"study", "create"}, "evoscale: study create: -f FILE is required\n"},
      {{"study"},
       "evoscale: study: missing subcommand (one of create, list, get, delete, state)\n"},
      {{"study", "show"},
       "evoscale: study: unknown subcommand \"show\" (one of create, list, get, delete, state)\n"},
      {{"trials"}, "evoscale: trials: missing subcommand (one of list)\n"},
      {{"frobnicate"}, "evoscale: unknown command \"frobnicate\" (see evoscale help)\n"},
      {{"study", "list", "--bogus"}, "evoscale: unknown flag --bogus (see evoscale help)\n"},
  };
  for (const Case& c : cases) {
    RunResult result = RunCli(c.args);
    EXPECT_EQ(result.code, 2) << c.err;
    EXPECT_EQ(result.err, c.err);
    EXPECT_EQ(result.out, "");
  }
}

TEST(CliRunTest, UnreadableStudyFileExits2NamingThePath) {
  std::string path = absl::StrCat(::testing::TempDir(), "/missing-spec.yaml");
  RunResult result = RunCli({"study", "create", "-f", path});
  EXPECT_EQ(result.code, 2);
  EXPECT_EQ(result.err, absl::StrCat("evoscale: study create: cannot read study file \"", path,
                                     "\": No such file or directory\n"));
}

// ---- against an in-process StudyService ----------------------------------------------------

// Answers just enough of StudyService for the CLI's calls, and records what it was sent.
class FakeStudyService final : public v1::StudyService::Service {
 public:
  grpc::Status CreateStudy(grpc::ServerContext* context, const v1::CreateStudyRequest* request,
                           v1::Study* response) override {
    Record(context, *request);
    *response = request->study();
    response->set_name("studies/1");
    response->set_state(v1::Study::ACTIVE);
    return grpc::Status::OK;
  }
  grpc::Status GetStudy(grpc::ServerContext* context, const v1::GetStudyRequest* request,
                        v1::Study* response) override {
    Record(context, *request);
    if (request->name() != "studies/1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("study \"", request->name(), "\" not found"));
    }
    response->set_name("studies/1");
    response->set_display_name("x");
    response->set_state(v1::Study::ACTIVE);
    response->mutable_spec()->set_max_trials(20);
    v1::MetricSpec* metric = response->mutable_spec()->add_metrics();
    metric->set_name("loss");
    metric->set_goal(v1::MetricSpec::MINIMIZE);
    return grpc::Status::OK;
  }
  grpc::Status ListStudies(grpc::ServerContext* context, const v1::ListStudiesRequest* request,
                           v1::ListStudiesResponse* response) override {
    Record(context, *request);
    v1::Study* study = response->add_studies();
    study->set_name("studies/1");
    study->set_display_name("first study");
    study->set_state(v1::Study::COMPLETED);
    study->set_trial_count(12);
    study->set_completed_trial_count(10);
    study = response->add_studies();
    study->set_name("studies/2");
    study->set_state(v1::Study::ACTIVE);
    return grpc::Status::OK;
  }
  // Two pages: trials 1 and 2, then trial 3.
  grpc::Status ListTrials(grpc::ServerContext* context, const v1::ListTrialsRequest* request,
                          v1::ListTrialsResponse* response) override {
    Record(context, *request);
    if (request->page_token().empty()) {
      *response->add_trials() = MakeTrial(1, v1::Trial::SUCCEEDED);
      *response->add_trials() = MakeTrial(2, v1::Trial::ACTIVE);
      response->set_next_page_token("page-2");
    } else if (request->page_token() == "page-2") {
      *response->add_trials() = MakeTrial(3, v1::Trial::INFEASIBLE);
    } else {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_token: unknown");
    }
    return grpc::Status::OK;
  }
  grpc::Status SuggestTrials(grpc::ServerContext* context, const v1::SuggestTrialsRequest* request,
                             v1::SuggestTrialsResponse* response) override {
    Record(context, *request);
    for (int i = 0; i < request->suggestion_count(); ++i) {
      *response->add_trials() = MakeTrial(10 + i, v1::Trial::ACTIVE);
    }
    response->set_study_state(v1::Study::ACTIVE);
    return grpc::Status::OK;
  }
  grpc::Status AddTrialMeasurement(grpc::ServerContext* context,
                                   const v1::AddTrialMeasurementRequest* request,
                                   v1::Trial* response) override {
    Record(context, *request);
    *response = MakeTrial(3, v1::Trial::ACTIVE);
    response->clear_final_measurement();
    *response->add_measurements() = request->measurement();
    return grpc::Status::OK;
  }
  grpc::Status CompleteTrial(grpc::ServerContext* context, const v1::CompleteTrialRequest* request,
                             v1::Trial* /*response*/) override {
    Record(context, *request);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "trial \"studies/1/trials/3\" is SUCCEEDED, not ACTIVE");
  }
  grpc::Status CheckTrialEarlyStoppingState(
      grpc::ServerContext* context, const v1::CheckTrialEarlyStoppingStateRequest* request,
      v1::CheckTrialEarlyStoppingStateResponse* response) override {
    Record(context, *request);
    response->set_should_stop(request->trial_name() == "studies/1/trials/3");
    return grpc::Status::OK;
  }

  // What the last call carried. Read only after the call returned.
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }
  std::string last_authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_authorization_;
  }
  std::chrono::system_clock::duration last_deadline_left() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_deadline_left_;
  }
  std::vector<std::string> page_tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return page_tokens_;
  }

  static v1::Trial MakeTrial(int id, v1::Trial::State state) {
    v1::Trial trial;
    trial.set_name(absl::StrCat("studies/1/trials/", id));
    trial.set_id(id);
    trial.set_state(state);
    v1::Parameter* lr = trial.add_parameters();
    lr->set_name("lr");
    lr->set_double_value(0.001 * id);
    v1::Parameter* act = trial.add_parameters();
    act->set_name("act");
    act->set_string_value("relu");
    if (state == v1::Trial::SUCCEEDED)
      (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
    if (state == v1::Trial::INFEASIBLE) trial.set_infeasible_reason("oom");
    return trial;
  }

 private:
  void Record(grpc::ServerContext* context, const google::protobuf::Message& request) {
    std::lock_guard<std::mutex> lock(mu_);
    last_request_ = request.ShortDebugString();
    auto it = context->client_metadata().find("authorization");
    last_authorization_ = it == context->client_metadata().end()
                              ? ""
                              : std::string(it->second.data(), it->second.size());
    last_deadline_left_ = context->deadline() - std::chrono::system_clock::now();
    if (const auto* list = dynamic_cast<const v1::ListTrialsRequest*>(&request)) {
      page_tokens_.push_back(list->page_token());
    }
  }

  std::mutex mu_;
  std::string last_request_;                                  // guarded by mu_
  std::string last_authorization_;                            // guarded by mu_
  std::chrono::system_clock::duration last_deadline_left_{};  // guarded by mu_
  std::vector<std::string> page_tokens_;                      // guarded by mu_
};

class CliServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    env_.server = absl::StrCat("127.0.0.1:", port_);
    env_.hostname = "testhost";
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  RunResult Cli(const std::vector<std::string>& args) { return RunCli(args, env_); }

  FakeStudyService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  Environment env_;
};

TEST_F(CliServerTest, CreateSendsTheFileAndPrintsTheStudy) {
  std::string path = WriteTempFile("create.yaml", kStudyYaml);
  RunResult result = Cli({"study", "create", "-f", path, "--name", "renamed"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out,
            "NAME       DISPLAY_NAME  STATE   TRIALS  COMPLETED\n"
            "studies/1  renamed       ACTIVE  0       0\n");
  v1::CreateStudyRequest expected;
  ASSERT_TRUE(ParseStudy(kStudyYaml, StudyFileFormat::kYaml, "x").ok());
  *expected.mutable_study() = *ParseStudy(kStudyYaml, StudyFileFormat::kYaml, "x");
  expected.mutable_study()->set_display_name("renamed");
  EXPECT_EQ(service_.last_request(), expected.ShortDebugString());
}

TEST_F(CliServerTest, SendsBearerTokenAndDeadline) {
  RunResult result = Cli({"study", "get", "1", "--token", "s3cret", "--timeout", "3"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(service_.last_authorization(), "Bearer s3cret");
  // gRPC rounds the timeout it sends up a little; the bounds only tell 3 s from 10 s.
  EXPECT_LE(service_.last_deadline_left(), std::chrono::seconds(4));
  EXPECT_GT(service_.last_deadline_left(), std::chrono::seconds(1));

  env_.token = "from-env";
  result = Cli({"study", "get", "studies/1"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(service_.last_authorization(), "Bearer from-env");
  EXPECT_LE(service_.last_deadline_left(), std::chrono::seconds(11));
  EXPECT_GT(service_.last_deadline_left(), std::chrono::seconds(5));

  env_.token = "";
  result = Cli({"study", "get", "1"});
  EXPECT_EQ(service_.last_authorization(), "");
}

TEST_F(CliServerTest, GetPrintsASummary) {
  RunResult result = Cli({"study", "get", "1"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "name:          studies/1\n"
            "display_name:  x\n"
            "state:         ACTIVE\n"
            "created:       -\n"
            "trials:        0 (0 completed)\n"
            "max_trials:    20\n"
            "algorithm:     GENETIC (default)\n"
            "metric:        loss MINIMIZE\n");
}

TEST_F(CliServerTest, RpcErrorExits1WithCodeName) {
  RunResult result = Cli({"study", "get", "9"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "evoscale: GetStudy: NOT_FOUND: study \"studies/9\" not found\n");

  result = Cli({"complete", "studies/1/trials/3", "loss=0.1"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "evoscale: CompleteTrial: FAILED_PRECONDITION: trial \"studies/1/trials/3\" is "
            "SUCCEEDED, not ACTIVE\n");
  EXPECT_EQ(service_.last_request(),
            "name: \"studies/1/trials/3\" final_measurement { metrics { key: \"loss\" value: 0.1 "
            "} }");
}

TEST_F(CliServerTest, InfeasibleCompletionSendsTheReason) {
  Cli({"complete", "studies/1/trials/4", "--infeasible", "out of memory"});
  EXPECT_EQ(service_.last_request(),
            "name: \"studies/1/trials/4\" trial_infeasible: true infeasible_reason: \"out of "
            "memory\"");
}

TEST_F(CliServerTest, UnreachableServerExits1) {
  server_->Shutdown();
  server_.reset();
  RunResult result = Cli({"study", "list"});
  EXPECT_EQ(result.code, 1);
  EXPECT_THAT(result.err, ::testing::StartsWith("evoscale: ListStudies: UNAVAILABLE: "));
}

TEST_F(CliServerTest, StudyListPrintsATable) {
  RunResult result = Cli({"study", "list"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME       DISPLAY_NAME  STATE      TRIALS  COMPLETED\n"
            "studies/1  first study   COMPLETED  12      10\n"
            "studies/2  -             ACTIVE     0       0\n");
}

TEST_F(CliServerTest, TrialsListFollowsPageTokens) {
  RunResult result = Cli({"trials", "list", "1", "--state", "active", "--page-size", "2"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(service_.page_tokens(), ElementsAre("", "page-2"));
  EXPECT_EQ(service_.last_request(),
            "parent: \"studies/1\" state: ACTIVE page_size: 2 page_token: \"page-2\"");
  EXPECT_EQ(result.out,
            "NAME                STATE             PARAMETERS         METRICS\n"
            "studies/1/trials/1  SUCCEEDED         lr=0.001 act=relu  loss=0.5\n"
            "studies/1/trials/2  ACTIVE            lr=0.002 act=relu  -\n"
            "studies/1/trials/3  INFEASIBLE (oom)  lr=0.003 act=relu  -\n");
}

TEST_F(CliServerTest, TrialsListJsonHoldsAllPages) {
  RunResult result = Cli({"--json", "trials", "list", "studies/1"});
  EXPECT_EQ(result.code, 0) << result.err;
  v1::ListTrialsResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &response).ok())
      << result.out;
  ASSERT_EQ(response.trials_size(), 3);
  EXPECT_EQ(response.trials(2).name(), "studies/1/trials/3");
  EXPECT_EQ(response.next_page_token(), "");
  EXPECT_THAT(result.out, HasSubstr("\"infeasible_reason\":\"oom\""));  // proto field names
}

TEST_F(CliServerTest, SuggestUsesHostnameClientIdByDefault) {
  RunResult result = Cli({"suggest", "7", "--count", "2"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(service_.last_request(),
            "parent: \"studies/7\" suggestion_count: 2 client_id: \"cli-testhost\"");
  EXPECT_EQ(result.out,
            "NAME                 PARAMETERS\n"
            "studies/1/trials/10  lr=0.01 act=relu\n"
            "studies/1/trials/11  lr=0.011 act=relu\n");

  Cli({"suggest", "studies/7", "--client-id", "worker-3"});
  EXPECT_EQ(service_.last_request(),
            "parent: \"studies/7\" suggestion_count: 1 client_id: \"worker-3\"");
}

TEST_F(CliServerTest, MeasureSendsStepAndMetrics) {
  RunResult result = Cli({"measure", "studies/1/trials/3", "--step", "5", "loss=0.25", "acc=-1"});
  EXPECT_EQ(result.code, 0) << result.err;
  v1::AddTrialMeasurementRequest request;
  request.set_trial_name("studies/1/trials/3");
  request.mutable_measurement()->set_step(5);
  (*request.mutable_measurement()->mutable_metrics())["loss"] = 0.25;
  (*request.mutable_measurement()->mutable_metrics())["acc"] = -1;
  EXPECT_EQ(service_.last_request(), request.ShortDebugString());
  EXPECT_EQ(result.out,
            "NAME                STATE   PARAMETERS         METRICS\n"
            "studies/1/trials/3  ACTIVE  lr=0.003 act=relu  step 5: acc=-1 loss=0.25\n");
}

TEST_F(CliServerTest, ShouldStopPrintsTrueOrFalse) {
  RunResult result = Cli({"should-stop", "studies/1/trials/3"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "true\n");
  result = Cli({"should-stop", "studies/1/trials/4"});
  EXPECT_EQ(result.out, "false\n");
  result = Cli({"should-stop", "studies/1/trials/4", "--json"});
  EXPECT_EQ(result.out, "{\"should_stop\":false}\n");
}

}  // namespace
}  // namespace evoscale::cli
