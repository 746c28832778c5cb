// Tests of the evoscale CLI (service/cli/): the pure parts, and Run() against an in-process
// evoscaled (service/server.h) on a real socket (port 0) and a SQLite file in a temp dir,
// checking both what the CLI prints and what the server then holds. The end-to-end test of
// the `evoscale` binary against the evoscaled binary is in tests/e2e/.

#include "service/cli/cli.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "load_model/replay.h"
#include "service/common/clock.h"
#include "service/server.h"
#include "tests/service/test_support.h"

namespace evoscale::cli {
namespace {

using ::evoscale::service::testing::GrpcOk;
using ::evoscale::service::testing::StudyClient;
using ::evoscale::testing::StatusIs;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// A file of this test's own (ctest runs the tests as processes side by side).
std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = absl::StrCat(::testing::TempDir(), "/", test->name(), ".", name);
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

TEST(ValidateTrialNameTest, AcceptsFullTrialNamesAndTheTwoIds) {
  EXPECT_EQ(*ValidateTrialName("studies/1/trials/3"), "studies/1/trials/3");
  EXPECT_EQ(*ValidateTrialName("1/3"), "studies/1/trials/3");
  for (const char* bad : {"3", "studies/1", "studies/1/trials/", "studies//trials/3",
                          "studies/1/trials/3/x", "projects/1/trials/3", "1/", "/3"}) {
    EXPECT_EQ(ValidateTrialName(bad).status().message(),
              absl::StrCat("trial \"", bad,
                           "\": expected a trial name studies/ID/trials/ID, or STUDY/TRIAL ids "
                           "(1/3)"))
        << bad;
  }
}

// ---- command line --------------------------------------------------------------------------

// ParseCommandLine() of `args`, which must succeed.
CommandLine MustParse(const std::vector<std::string>& args, const Environment& env = {}) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(args, env);
  EXPECT_TRUE(line.ok()) << absl::StrJoin(args, " ") << ": " << line.status();
  return line.ok() ? *std::move(line) : CommandLine{};
}

// The message of ParseCommandLine()'s error for `args`, which must fail.
std::string ParseError(const std::vector<std::string>& args) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(args, {});
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument) << absl::StrJoin(args, " ");
  return std::string(line.status().message());
}

TEST(ParseCommandLineTest, DefaultsWithoutFlagsOrEnvironment) {
  CommandLine line = MustParse({"study", "list"});
  EXPECT_EQ(line.global.server, "127.0.0.1:50051");
  EXPECT_EQ(line.global.token, "");
  EXPECT_EQ(line.global.output, "table");
  EXPECT_EQ(line.global.timeout_seconds, 10.0);
  EXPECT_EQ(line.command, "study list");
  EXPECT_EQ(line.help, "");
}

TEST(ParseCommandLineTest, GlobalFlagsAnywhereAndCommandFlagsKept) {
  CommandLine line = MustParse({"suggest", "--json", "7", "--count=3", "--server", "h:1", "--token",
                                "t", "--timeout", "2.5", "--client-id", "me"});
  EXPECT_EQ(line.global.server, "h:1");
  EXPECT_EQ(line.global.token, "t");
  EXPECT_EQ(line.global.output, "json");
  EXPECT_EQ(line.global.timeout_seconds, 2.5);
  EXPECT_EQ(line.command, "suggest");
  EXPECT_EQ(line.arguments.study, "7");
  EXPECT_EQ(line.arguments.count, 3);
  EXPECT_EQ(line.arguments.client_id, "me");

  line = MustParse({"--server=h:2", "--timeout=3", "study", "--json", "get", "--token=u", "8"});
  EXPECT_EQ(line.global.server, "h:2");
  EXPECT_EQ(line.global.timeout_seconds, 3.0);
  EXPECT_EQ(line.global.output, "json");
  EXPECT_EQ(line.global.token, "u");
  EXPECT_EQ(line.command, "study get");
  EXPECT_EQ(line.arguments.study, "8");
}

TEST(ParseCommandLineTest, EnvironmentGivesDefaultsThatFlagsOverride) {
  Environment env{.server = "env:5", .token = "env-token", .hostname = "h"};
  CommandLine line = MustParse({"study", "list"}, env);
  EXPECT_EQ(line.global.server, "env:5");
  EXPECT_EQ(line.global.token, "env-token");
  line = MustParse({"--server=flag:6", "--token", "flag-token", "study", "list"}, env);
  EXPECT_EQ(line.global.server, "flag:6");
  EXPECT_EQ(line.global.token, "flag-token");
}

TEST(ParseCommandLineTest, ShortFlagsNegativeNumbersAndDoubleDash) {
  CommandLine line = MustParse({"study", "create", "-f", "s.yaml"});
  EXPECT_EQ(line.arguments.file, "s.yaml");
  line = MustParse({"recommend", "default/ranker", "-o", "kubernetes"});
  EXPECT_EQ(line.global.output, "kubernetes");
  line = MustParse({"measure", "-3", "--step", "1", "--", "--json=1"});
  EXPECT_EQ(line.global.output, "table");
  EXPECT_EQ(line.arguments.trial, "-3");
  EXPECT_THAT(line.arguments.metrics, ElementsAre("--json=1"));
}

// Every command and flag of UsageText() and README.md, each flag given a value that differs
// from its default.
TEST(ParseCommandLineTest, EveryDocumentedCommandAndFlagParses) {
  CommandLine line = MustParse({"study", "create", "-f", "s.yaml", "--name", "lr sweep"});
  EXPECT_EQ(line.command, "study create");
  EXPECT_EQ(line.arguments.file, "s.yaml");
  EXPECT_EQ(line.arguments.display_name, "lr sweep");
  line = MustParse({"study", "create", "--file=s.json"});
  EXPECT_EQ(line.arguments.file, "s.json");
  EXPECT_EQ(line.arguments.display_name, std::nullopt);

  EXPECT_EQ(MustParse({"study", "list"}).command, "study list");
  for (const char* command : {"get", "delete"}) {
    line = MustParse({"study", command, "studies/7"});
    EXPECT_EQ(line.command, absl::StrCat("study ", command));
    EXPECT_EQ(line.arguments.study, "studies/7");
  }
  line = MustParse({"study", "state", "7", "Inactive"});
  EXPECT_EQ(line.command, "study state");
  EXPECT_EQ(line.arguments.study, "7");
  EXPECT_EQ(line.arguments.study_state, v1::Study::INACTIVE);

  line = MustParse({"trials", "list", "7", "--state", "succeeded", "--page-size=50"});
  EXPECT_EQ(line.command, "trial list");  // the plural noun is the same group
  EXPECT_EQ(line.arguments.study, "7");
  EXPECT_EQ(line.arguments.trial_state, v1::Trial::SUCCEEDED);
  EXPECT_EQ(line.arguments.page_size, 50);

  line = MustParse({"suggest", "studies/1", "--count", "2", "--client-id=worker-1"});
  EXPECT_EQ(line.arguments.count, 2);
  EXPECT_EQ(line.arguments.client_id, "worker-1");

  line = MustParse({"measure", "studies/1/trials/1", "--step", "100", "logloss=0.47", "auc=0.7"});
  EXPECT_EQ(line.command, "measure");
  EXPECT_EQ(line.arguments.trial, "studies/1/trials/1");
  EXPECT_EQ(line.arguments.step, 100);
  EXPECT_THAT(line.arguments.metrics, ElementsAre("logloss=0.47", "auc=0.7"));

  line = MustParse({"complete", "studies/1/trials/1", "logloss=0.45"});
  EXPECT_THAT(line.arguments.metrics, ElementsAre("logloss=0.45"));
  EXPECT_EQ(line.arguments.infeasible_reason, std::nullopt);
  line = MustParse({"complete", "studies/1/trials/1", "--infeasible", "out of memory"});
  EXPECT_THAT(line.arguments.metrics, IsEmpty());
  EXPECT_EQ(line.arguments.infeasible_reason, "out of memory");

  for (const char* command : {"stop", "should-stop"}) {
    line = MustParse({command, "studies/1/trials/4"});
    EXPECT_EQ(line.command, command);
    EXPECT_EQ(line.arguments.trial, "studies/1/trials/4");
  }
  line = MustParse({"optimal", "studies/1"});
  EXPECT_EQ(line.command, "optimal");
  EXPECT_EQ(line.arguments.study, "studies/1");

  line = MustParse({"workload", "put", "default/ranker", "--policy", "vpa", "--kind=training",
                    "--target-utilization", "0.6", "--min-replicas", "2", "--max-replicas=9"});
  EXPECT_EQ(line.command, "workload put");
  EXPECT_EQ(line.arguments.workload, "default/ranker");
  EXPECT_EQ(line.arguments.workload_settings.policy(), v1::Workload::VPA);
  EXPECT_EQ(line.arguments.workload_settings.kind(), v1::Workload::TRAINING);
  EXPECT_EQ(line.arguments.workload_settings.target_utilization(), 0.6);
  EXPECT_EQ(line.arguments.workload_settings.min_replicas(), 2);
  EXPECT_EQ(line.arguments.workload_settings.max_replicas(), 9);
  line = MustParse({"workload", "put", "w", "--oom-rate", "0.001", "--throttle-rate=0.01",
                    "--request-percentile", "0.95", "--startup-delay-seconds", "180",
                    "--demand-quantile", "0.6"});
  EXPECT_EQ(line.arguments.workload_settings.oom_rate(), 0.001);
  EXPECT_EQ(line.arguments.workload_settings.throttle_rate(), 0.01);
  EXPECT_EQ(line.arguments.workload_settings.request_percentile(), 0.95);
  EXPECT_EQ(line.arguments.workload_settings.startup_delay_seconds(), 180);
  EXPECT_EQ(line.arguments.workload_settings.demand_quantile(), 0.6);
  EXPECT_TRUE(line.arguments.workload_flags.contains("request_percentile"));
  EXPECT_EQ(MustParse({"workload", "list"}).command, "workload list");
  line = MustParse({"workload", "get", "default/ranker"});
  EXPECT_EQ(line.command, "workload get");
  EXPECT_EQ(line.arguments.workload, "default/ranker");

  line = MustParse(
      {"recommend", "default/ranker", "--output=json", "--prometheus-url", "http://prom:9090"});
  EXPECT_EQ(line.command, "recommend");
  EXPECT_EQ(line.arguments.workload, "default/ranker");
  EXPECT_EQ(line.global.output, "json");
  EXPECT_EQ(line.arguments.kubernetes.prometheus_url, "http://prom:9090");

  line = MustParse({"replay", "--trace", "azure-llm", "--path=/traces/azure", "--policy", "hpa"});
  EXPECT_EQ(line.command, "replay");
  EXPECT_EQ(line.arguments.replay.trace, load_model::TraceKind::kAzureLlm);
  EXPECT_EQ(line.arguments.replay.path, "/traces/azure");
  EXPECT_EQ(line.arguments.replay.policy, load_model::Policy::kHpa);
  line = MustParse({"replay", "--trace", "alibaba-genai", "--path", "p"});
  EXPECT_EQ(line.arguments.replay.trace, load_model::TraceKind::kAlibabaGenAi);
  EXPECT_EQ(line.arguments.replay.policy, load_model::Policy::kEvoscale);
  EXPECT_EQ(line.arguments.replay.startup_delay, absl::ZeroDuration());
  line = MustParse({"replay", "--trace", "alibaba-genai", "--path", "p", "--startup-delay", "3m"});
  EXPECT_EQ(line.arguments.replay.startup_delay, absl::Minutes(3));

  for (const std::vector<std::string>& help :
       {std::vector<std::string>{"help"}, {"-h"}, {"--help"}, {"--json", "help", "suggest"}}) {
    line = MustParse(help);
    EXPECT_EQ(line.help, UsageText()) << absl::StrJoin(help, " ");
    EXPECT_EQ(line.command, "");
  }
}

TEST(ParseCommandLineTest, HelpAfterACommandDescribesItsFlags) {
  CommandLine line = MustParse({"suggest", "--help"});
  EXPECT_EQ(line.command, "");
  EXPECT_THAT(line.help, HasSubstr("Usage: evoscale suggest [OPTIONS] STUDY"));
  EXPECT_THAT(line.help, HasSubstr("--count N"));
  EXPECT_THAT(line.help, HasSubstr("--client-id ID"));
  line = MustParse({"study", "create", "-h"});  // -f is required, but help comes first
  EXPECT_THAT(line.help, HasSubstr("Usage: evoscale study create [OPTIONS]"));
  EXPECT_THAT(line.help, HasSubstr("-f,--file FILE REQUIRED"));
}

TEST(ParseCommandLineTest, BadFlagsAreErrorsNamingTheFlag) {
  EXPECT_EQ(ParseError({"--bogus"}), "unknown flag --bogus (see evoscale help)");
  EXPECT_EQ(ParseError({"-x"}), "unknown flag -x (see evoscale help)");
  EXPECT_EQ(ParseError({"-x", "study", "list"}),
            "study list: unknown flag -x (usage: evoscale study list)");
  EXPECT_EQ(ParseError({"study", "list", "--bogus=1"}),
            "study list: unknown flag --bogus (usage: evoscale study list)");
  EXPECT_EQ(ParseError({"suggest", "7", "--step", "1"}),
            "suggest: flag --step does not apply (usage: evoscale suggest STUDY [--count N] "
            "[--client-id ID])");
  EXPECT_EQ(ParseError({"suggest", "7", "--count"}),
            "suggest: --count: 1 required N missing (usage: evoscale suggest STUDY [--count N] "
            "[--client-id ID])");
  EXPECT_EQ(ParseError({"suggest", "7", "--count", "1", "--count", "2"}),
            "suggest: --count: At Most 1 required but received 2 (usage: evoscale suggest STUDY "
            "[--count N] [--client-id ID])");
  EXPECT_EQ(ParseError({"--timeout", "0", "study", "list"}),
            "study list: --timeout: \"0\" is not a number of seconds in (0, 86400] (usage: "
            "evoscale study list)");
  EXPECT_EQ(ParseError({"study", "list", "--timeout=soon"}),
            "study list: --timeout: \"soon\" is not a number of seconds in (0, 86400] (usage: "
            "evoscale study list)");
  EXPECT_EQ(ParseError({"--server", "", "study", "list"}),
            "study list: --server: the address is empty (usage: evoscale study list)");
  EXPECT_EQ(ParseError({"study", "create"}),
            "study create: --file is required (usage: evoscale study create -f FILE [--name "
            "DISPLAY_NAME])");
  EXPECT_EQ(ParseError({"recommend", "w", "-o", "xml"}),
            "recommend: --output: \"xml\" is not table, json, yaml or kubernetes (usage: evoscale "
            "recommend WORKLOAD [-o table|json|yaml|kubernetes] [--prometheus-url URL])");
  EXPECT_EQ(ParseError({"study", "list", "-o", "kubernetes"}),
            "study list: -o kubernetes: only recommend prints Kubernetes objects (use table, json "
            "or yaml)");
  EXPECT_THAT(ParseError({"workload", "put", "w", "--kind", "batch"}),
              StartsWith("workload put: --kind: unknown kind \"batch\"; expected serving or "
                         "training (usage: evoscale workload put NAME "));
  EXPECT_THAT(ParseError({"workload", "put", "w", "--max-replicas", "-1"}),
              StartsWith("workload put: --max-replicas: \"-1\" is not an integer in [0, 100000]"));
  EXPECT_THAT(ParseError({"workload", "put", "w", "--request-percentile", "1"}),
              StartsWith("workload put: --request-percentile: \"1\" is not in [0, 1)"));
  EXPECT_THAT(ParseError({"workload", "put", "w", "--oom-rate", "0.6"}),
              StartsWith("workload put: --oom-rate: \"0.6\" is not in [0, 0.5]"));
  EXPECT_THAT(ParseError({"replay", "--path", "p", "--trace", "alibaba-genai", "--startup-delay",
                          "soon"}),
              StartsWith("replay: --startup-delay: \"soon\" is not a duration >= 0 such as 3m "
                         "or 90s (usage: evoscale replay "));
  EXPECT_THAT(ParseError({"replay", "--path", "p", "--trace", "alibaba-genai", "--startup-delay",
                          "-1m"}),
              StartsWith("replay: --startup-delay: \"-1m\" is not a duration >= 0"));
  EXPECT_THAT(ParseError({"replay", "--path", "p", "--trace", "borg"}),
              StartsWith("replay: --trace: trace \"borg\": must be bitbrains, alibaba-genai or "
                         "azure-llm (usage: evoscale replay "));
}

// ---- YAML to JSON --------------------------------------------------------------------------

TEST(YamlToJsonTest, PlainScalarsBecomeNumbersBoolsAndNulls) {
  absl::StatusOr<std::string> json = YamlToJson(
      "i: 42\nneg: -7\nplus: +3\nf: 1.5\ne: 1e-4\ndot: .5\ntrail: 2.\nlead: 007\n"
      "hex: 0x1F\noct: 0o17\nt: true\nF: False\nn: ~\ne2: null\ninf: -.inf\nnan: .nan\n"
      "s: hello world\nyes: yes\nver: 1.2.3\n");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, R"({"i":42,"neg":-7,"plus":3,"f":1.5,"e":0.0001,"dot":0.5,"trail":2,"lead":7,)"
                   R"("hex":31,"oct":15,"t":true,"F":false,"n":null,"e2":null,"inf":"-Infinity",)"
                   R"("nan":"NaN","s":"hello world","yes":"yes","ver":"1.2.3"})");
}

// Found by study_file_fuzz: an alias inside its own anchor made yaml-cpp build a cycle that the
// conversion followed until the stack overflowed; aliases of aliases can expand exponentially.
TEST(YamlToJsonTest, RecursiveAndExplodingAliasesAreErrorsNotCrashes) {
  absl::StatusOr<std::string> cycle = YamlToJson("display_name: &n [{name: *n, goal: MINIMIZE}]\n");
  EXPECT_THAT(cycle.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nested deeper than 64 levels (an alias inside its own "
                                 "anchor?)")));
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const std::string name(1, c), previous(1, static_cast<char>(c - 1));
    absl::StrAppend(&laughs, name, ": &", name, " [");
    for (int i = 0; i < 10; ++i) absl::StrAppend(&laughs, i > 0 ? ", " : "", "*", previous);
    absl::StrAppend(&laughs, "]\n");
  }
  EXPECT_THAT(YamlToJson(laughs).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expands to more than 100000 values")));
  // A study file with anchors and aliases used as intended still converts.
  EXPECT_TRUE(YamlToJson("x: &v [1, 2]\ny: *v\n").ok());
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

TEST(YamlToJsonTest, KeyGivenTwiceIsAnErrorWithPosition) {
  absl::StatusOr<std::string> json = YamlToJson("a: 1\nb: 2\na: 3\n");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(json.status().message(), "line 3, column 1: key \"a\" given twice");
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
              HasSubstr(absl::StrCat("study file \"", json_path,
                                     "\": invalid JSON: parse error at line 1, column 23: ")));

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

TEST(StudyFileTest, JsonThatIsNotAnObjectIsAnError) {
  EXPECT_EQ(ParseStudy("[1, 2]", StudyFileFormat::kJson, "s.json").status().message(),
            "study file \"s.json\": expected an object of Study fields");
  EXPECT_EQ(ParseStudy(" \n", StudyFileFormat::kJson, "s.json").status().message(),
            "study file \"s.json\": the file holds no study");
}

TEST(StudyFileTest, TextThatIsNotUtf8IsAnError) {
  absl::StatusOr<v1::Study> study =
      ParseStudy("display_name: \"a\xff\"\n", StudyFileFormat::kYaml, "s.yaml");
  EXPECT_EQ(study.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(study.status().message(), "study file \"s.yaml\": invalid UTF-8 byte at index 1: 0xFF");
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
  EXPECT_THAT(UsageText(), HasSubstr("trial list STUDY [--state STATE] [--page-size N]"));
  EXPECT_THAT(UsageText(), HasSubstr("trial should-stop TRIAL"));
  EXPECT_THAT(UsageText(), HasSubstr("suggest, measure, complete, stop, should-stop, optimal"));
}

TEST(CliRunTest, VersionPrintsTheProjectVersion) {
  RunResult result = RunCli({"--version"});
  EXPECT_EQ(result.code, 0);
  EXPECT_THAT(result.out, ::testing::MatchesRegex("evoscale [0-9]+\\.[0-9]+\\.[0-9]+\n"));
  EXPECT_EQ(result.out, VersionText());
}

TEST(DefaultClientIdTest, UniquePerProcess) {
  const Environment a{.hostname = "h", .pid = 10, .nonce = "00aa"};
  const Environment b{.hostname = "h", .pid = 11, .nonce = "00aa"};
  const Environment c{.hostname = "h", .pid = 10, .nonce = "00bb"};  // a reused pid
  EXPECT_EQ(DefaultClientId(a), "cli-h-10-00aa");
  EXPECT_NE(DefaultClientId(a), DefaultClientId(b));
  EXPECT_NE(DefaultClientId(a), DefaultClientId(c));
  EXPECT_EQ(DefaultClientId({}), "cli");
}

TEST(JsonToYamlTest, BlockStyleWithAmbiguousStringsQuoted) {
  absl::StatusOr<std::string> yaml = JsonToYaml(
      R"({"name":"studies/1","count":3,"ok":true,"looks_numeric":"1e3","word":"true",)"
      R"("empty":"","list":[{"a":1.5},"x"],"nested":{"k":"v"}})");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml,
            "name: studies/1\n"
            "count: 3\n"
            "ok: true\n"
            "looks_numeric: \"1e3\"\n"
            "word: \"true\"\n"
            "empty: \"\"\n"
            "list:\n"
            "  - a: 1.5\n"
            "  - x\n"
            "nested:\n"
            "  k: v\n");
  // Reads back as the same values (JSON is YAML: the CLI's own YAML reader gives JSON back).
  absl::StatusOr<std::string> json = YamlToJson(*yaml);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr(R"("looks_numeric":"1e3")"));
  EXPECT_THAT(*json, HasSubstr(R"("word":"true")"));
  EXPECT_THAT(*json, HasSubstr(R"("count":3)"));
  EXPECT_EQ(JsonToYaml("{not json").status().code(), absl::StatusCode::kInvalidArgument);
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
      {{"measure", "studies/1/trials/3", "loss=1"},
       "evoscale: measure: --step is required (usage: evoscale measure TRIAL --step N "
       "METRIC=VALUE...)\n"},
      {{"measure", "studies/1/trials/3", "--step", "x", "loss=1"},
       "evoscale: measure: --step: \"x\" is not an integer in [0, 9223372036854775807] (usage: "
       "evoscale measure TRIAL --step N METRIC=VALUE...)\n"},
      {{"measure", "3", "--step", "1", "loss=1"},
       "evoscale: measure: trial \"3\": expected a trial name studies/ID/trials/ID, or "
       "STUDY/TRIAL ids (1/3)\n"},
      {{"measure", "studies/1/trials/3", "--step", "1"},
       "evoscale: measure: METRIC=VALUE is required (usage: evoscale measure TRIAL --step N "
       "METRIC=VALUE...)\n"},
      {{"complete", "studies/1/trials/3", "loss=1", "--infeasible", "oom"},
       "evoscale: complete: give either metrics or --infeasible REASON, not both\n"},
      {{"complete", "studies/1/trials/3", "--infeasible", ""},
       "evoscale: complete: --infeasible: the reason is empty (usage: evoscale complete TRIAL "
       "[METRIC=VALUE...] | TRIAL --infeasible REASON)\n"},
      {{"suggest", "7", "--count", "0"},
       "evoscale: suggest: --count: \"0\" is not an integer in [1, 1000] (usage: evoscale "
       "suggest STUDY [--count N] [--client-id ID])\n"},
      {{"suggest", "7", "--step", "1"},
       "evoscale: suggest: flag --step does not apply (usage: evoscale suggest STUDY [--count N] "
       "[--client-id ID])\n"},
      {{"suggest"},
       "evoscale: suggest: STUDY is required (usage: evoscale suggest STUDY [--count N] "
       "[--client-id ID])\n"},
      {{"suggest", "7", "stop", "8"},
       "evoscale: suggest: unexpected argument \"stop\" (usage: evoscale suggest STUDY "
       "[--count N] [--client-id ID])\n"},
      {{"study", "get", "7", "8"},
       "evoscale: study get: unexpected argument \"8\" (usage: evoscale study get STUDY)\n"},
      {{"study", "get", "studies/7/trials/1"},
       "evoscale: study get: study \"studies/7/trials/1\": expected studies/ID or ID\n"},
      {{"study", "state", "7", "paused"},
       "evoscale: study state: STATE: unknown study state \"paused\"; expected active, inactive "
       "or completed (usage: evoscale study state STUDY active|inactive|completed)\n"},
      {{"trials", "list", "7", "--state", "done"},
       "evoscale: trial list: --state: unknown trial state \"done\"; expected requested, "
       "active, stopping, succeeded, stopped, infeasible or failed (usage: evoscale trial list "
       "STUDY [--state STATE] [--page-size N])\n"},
      {{"study", "create"},
       "evoscale: study create: --file is required (usage: evoscale study create -f FILE "
       "[--name DISPLAY_NAME])\n"},
      {{"study"},
       "evoscale: study: missing subcommand (one of create, list, get, delete, state, optimal)\n"},
      {{"study", "show"},
       "evoscale: study: unknown subcommand \"show\" (one of create, list, get, delete, "
       "state, optimal)\n"},
      {{"trials"},
       "evoscale: trial: missing subcommand (one of list, get, suggest, measure, complete, stop, "
       "should-stop, delete)\n"},
      {{"frobnicate"}, "evoscale: unknown command \"frobnicate\" (see evoscale help)\n"},
      {{"--bogus"}, "evoscale: unknown flag --bogus (see evoscale help)\n"},
      {{"study", "list", "--bogus"},
       "evoscale: study list: unknown flag --bogus (usage: evoscale study list)\n"},
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

// A real socket on port 0 that takes connections (the kernel completes them) but never reads
// or answers, standing in for a server that hangs: the call can only end at its deadline.
// evoscaled always answers a loopback call within gRPC's millisecond deadline resolution, so
// a short --timeout against it is not reliably exceeded.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) {
      ADD_FAILURE() << "socket: " << std::strerror(errno);
      return;
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "bind/listen on 127.0.0.1:0: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() {
    if (fd_ >= 0) close(fd_);
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A server that accepts the connection and never answers: the call ends in
// DEADLINE_EXCEEDED (exit 1). With the default 10 s deadline this would take 10 s, so ctest's
// per-test timeout is what notices a --timeout that is not applied; no timing is asserted here.
TEST(CliTimeoutTest, CallThatIsNeverAnsweredEndsAtTheTimeout) {
  SilentListener silent;
  ASSERT_GT(silent.port(), 0);
  Environment env{.server = absl::StrCat("127.0.0.1:", silent.port()), .hostname = "testhost"};
  RunResult result = RunCli({"study", "list", "--timeout", "0.05"}, env);
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_THAT(result.err, StartsWith("evoscale: ListStudies: DEADLINE_EXCEEDED: "));
}

// ---- against an in-process evoscaled -------------------------------------------------------

// The study the trial tests use: trials print as "act=relu lr=0.001" (parameters in name
// order, as the service stores them). No max_trials, so any number of trials fits.
constexpr char kTrialStudySpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  parameters {
    name: "lr"
    double_spec { min: 1e-4 max: 1 }
    scale: LOG
  }
  parameters {
    name: "act"
    categorical_spec { values: "relu" values: "tanh" }
  }
  algorithm { algorithm: RANDOM seed: 7 }
)pb";

// Owns an in-process evoscaled (service/server.h) on a fresh SQLite file in a temp dir, with
// a ManualClock, and a StudyClient to set up and inspect its state beside the CLI.
class CliServerTest : public ::testing::Test {
 protected:
  using Stub = StudyClient::Stub;

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  virtual service::ServerOptions Options() {
    service::ServerOptions options;
    options.db_path = dir_.File("evoscale.db");
    options.grpc_address = "127.0.0.1:0";
    options.http_address = "127.0.0.1:0";
    options.clock = &clock_;
    return options;
  }

  void StartServer() {
    absl::StatusOr<std::unique_ptr<service::Server>> server = service::Server::Start(Options());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->grpc_port(), 0);
    const std::string address = absl::StrCat("127.0.0.1:", server_->grpc_port());
    client_ = std::make_unique<StudyClient>(address);
    env_.server = address;
    env_.hostname = "testhost";
    env_.pid = 4242;
    env_.nonce = "0badcafe";
  }

  RunResult Cli(const std::vector<std::string>& args) { return RunCli(args, env_); }

  // Creates a study of kTrialStudySpec (or `spec`) named `display_name`; returns its name.
  std::string CreateStudy(const std::string& display_name = "trials",
                          const std::string& spec = kTrialStudySpec) {
    v1::StudySpec parsed;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(spec, &parsed));
    return client_->MustCreateStudy(parsed, display_name).name();
  }

  // Creates a trial of a kTrialStudySpec study with the given parameters: REQUESTED, or
  // SUCCEEDED with final loss `loss` when one is given.
  v1::Trial CreateTrial(const std::string& study, double lr, const std::string& act,
                        std::optional<double> loss = std::nullopt) {
    v1::Trial trial;
    v1::Parameter* lr_parameter = trial.add_parameters();
    lr_parameter->set_name("lr");
    lr_parameter->set_double_value(lr);
    v1::Parameter* act_parameter = trial.add_parameters();
    act_parameter->set_name("act");
    act_parameter->set_string_value(act);
    if (loss.has_value()) (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = *loss;
    return client_->MustCreateTrial(study, trial);
  }

  // Hands out `count` trials of `study` to `client_id` (REQUESTED ones first), making them
  // ACTIVE.
  std::vector<v1::Trial> Suggest(const std::string& study, int count,
                                 const std::string& client_id = "worker") {
    const v1::SuggestTrialsResponse response = client_->MustSuggest(study, count, client_id);
    EXPECT_EQ(response.trials_size(), count);
    return {response.trials().begin(), response.trials().end()};
  }

  std::vector<std::string> StudyNames() {
    const v1::ListStudiesResponse response = client_->MustListStudies();
    std::vector<std::string> names;
    for (const v1::Study& study : response.studies()) names.push_back(study.name());
    return names;
  }

  // The time the ManualClock shows throughout, as the service stamps it.
  static constexpr int64_t kNowUnixSeconds = 1700000000;
  static constexpr char kNowText[] = "2023-11-14T22:13:20Z";

  service::testing::ScopedTempDir dir_;
  service::ManualClock clock_{absl::FromUnixSeconds(kNowUnixSeconds)};
  std::unique_ptr<service::Server> server_;
  std::unique_ptr<StudyClient> client_;  // set by StartServer(); no token unless set
  Environment env_;  // what the CLI runs with: the server's address, hostname "testhost"
};

TEST_F(CliServerTest, CreateStoresTheFileAndPrintsTheStudy) {
  std::string path = WriteTempFile("create.yaml", kStudyYaml);
  RunResult result = Cli({"study", "create", "-f", path, "--name", "renamed"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out,
            "NAME       DISPLAY_NAME  STATE   TRIALS  COMPLETED\n"
            "studies/1  renamed       ACTIVE  0       0\n");

  EXPECT_THAT(StudyNames(), ElementsAre("studies/1"));
  v1::Study stored = client_->MustGetStudy("studies/1");
  EXPECT_EQ(stored.display_name(), "renamed");
  EXPECT_EQ(stored.state(), v1::Study::ACTIVE);
  EXPECT_EQ(stored.create_time().seconds(), kNowUnixSeconds);
  absl::StatusOr<v1::Study> sent = ParseStudy(kStudyYaml, StudyFileFormat::kYaml, "x");
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_TRUE(MessageDifferencer::Equals(stored.spec(), sent->spec()))
      << "stored: " << stored.spec().ShortDebugString()
      << "\nsent: " << sent->spec().ShortDebugString();
}

TEST_F(CliServerTest, GetPrintsASummary) {
  ASSERT_EQ(CreateStudy("x", R"pb(metrics { name: "loss" goal: MINIMIZE }
                                  parameters {
                                    name: "lr"
                                    double_spec { min: 1e-4 max: 1 }
                                    scale: LOG
                                  }
                                  max_trials: 20)pb"),
            "studies/1");
  v1::CreateTrialRequest request;
  request.set_parent("studies/1");
  v1::Parameter* lr = request.mutable_trial()->add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.01);
  v1::Trial trial;
  ASSERT_THAT(client_->Call(&Stub::CreateTrial, request, &trial), GrpcOk());
  (*request.mutable_trial()->mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
  ASSERT_THAT(client_->Call(&Stub::CreateTrial, request, &trial), GrpcOk());

  RunResult result = Cli({"study", "get", "1"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out, absl::StrCat("name:          studies/1\n"
                                     "display_name:  x\n"
                                     "state:         ACTIVE\n"
                                     "created:       ",
                                     kNowText,
                                     "\n"
                                     "trials:        2 (1 completed)\n"
                                     "max_trials:    20\n"
                                     "algorithm:     GENETIC (default)\n"
                                     "metric:        loss MINIMIZE\n"
                                     "parameter:     lr double [0.0001, 1] LOG\n"));
}

TEST_F(CliServerTest, RpcErrorExits1WithCodeName) {
  RunResult result = Cli({"study", "get", "9"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "evoscale: GetStudy: NOT_FOUND: study \"studies/9\" not found\n");

  const std::string study = CreateStudy();
  const v1::Trial done = CreateTrial(study, 0.001, "relu", 0.5);
  ASSERT_EQ(done.state(), v1::Trial::SUCCEEDED);
  result = Cli({"complete", done.name(), "loss=0.1"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            "evoscale: CompleteTrial: FAILED_PRECONDITION: trial \"studies/1/trials/1\" is "
            "already SUCCEEDED\n");
  EXPECT_TRUE(
      MessageDifferencer::Equals(client_->MustGetTrial(done.name()), done));  // left as it was

  result = Cli({"measure", "studies/1/trials/2", "--step", "1", "loss=1"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "evoscale: AddTrialMeasurement: NOT_FOUND: trial \"studies/1/trials/2\" not found\n");
}

TEST_F(CliServerTest, CompleteWithMetricsSucceedsTheTrial) {
  const std::string study = CreateStudy();
  CreateTrial(study, 0.001, "relu");
  const v1::Trial active = Suggest(study, 1).at(0);
  ASSERT_EQ(active.state(), v1::Trial::ACTIVE);

  RunResult result = Cli({"complete", active.name(), "loss=0.125"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME                STATE      PARAMETERS         METRICS\n"
            "studies/1/trials/1  SUCCEEDED  act=relu lr=0.001  loss=0.125\n");

  v1::Trial stored = client_->MustGetTrial(active.name());
  EXPECT_EQ(stored.state(), v1::Trial::SUCCEEDED);
  EXPECT_THAT(stored.final_measurement().metrics(), ElementsAre(Pair("loss", 0.125)));
  EXPECT_EQ(stored.end_time().seconds(), kNowUnixSeconds);
  EXPECT_EQ(client_->MustGetStudy(study).completed_trial_count(), 1);
}

TEST_F(CliServerTest, InfeasibleCompletionStoresTheReason) {
  const std::string study = CreateStudy();
  CreateTrial(study, 0.002, "tanh");
  const v1::Trial active = Suggest(study, 1).at(0);

  RunResult result = Cli({"complete", active.name(), "--infeasible", "out of memory"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME                STATE                       PARAMETERS         METRICS\n"
            "studies/1/trials/1  INFEASIBLE (out of memory)  act=tanh lr=0.002  -\n");

  v1::Trial stored = client_->MustGetTrial(active.name());
  EXPECT_EQ(stored.state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(stored.infeasible_reason(), "out of memory");
  EXPECT_TRUE(stored.final_measurement().metrics().empty());
}

TEST_F(CliServerTest, UnreachableServerExits1) {
  server_->Shutdown();
  server_.reset();
  RunResult result = Cli({"study", "list"});
  EXPECT_EQ(result.code, 1);
  EXPECT_THAT(result.err, StartsWith("evoscale: ListStudies: UNAVAILABLE: "));
}

TEST_F(CliServerTest, StudyListPrintsATable) {
  const std::string first = CreateStudy("first study");
  CreateTrial(first, 0.001, "relu", 0.5);
  CreateTrial(first, 0.002, "relu");
  v1::SetStudyStateRequest close;
  close.set_name(first);
  close.set_state(v1::Study::COMPLETED);
  v1::Study closed;
  ASSERT_THAT(client_->Call(&Stub::SetStudyState, close, &closed), GrpcOk());
  CreateStudy("");

  RunResult result = Cli({"study", "list"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME       DISPLAY_NAME  STATE      TRIALS  COMPLETED\n"
            "studies/1  first study   COMPLETED  2       1\n"
            "studies/2  -             ACTIVE     0       0\n");
}

// Trial 1 SUCCEEDED, 2 ACTIVE, 3 INFEASIBLE ("oom"), 4 REQUESTED.
class CliTrialsListTest : public CliServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(CliServerTest::SetUp());
    const std::string study = CreateStudy();
    ASSERT_EQ(study, "studies/1");
    CreateTrial(study, 0.001, "relu", 0.5);
    CreateTrial(study, 0.002, "relu");
    CreateTrial(study, 0.003, "tanh");
    std::vector<v1::Trial> active = Suggest(study, 2);
    ASSERT_EQ(active.size(), 2u);
    ASSERT_EQ(active[1].name(), "studies/1/trials/3");
    v1::CompleteTrialRequest infeasible;
    infeasible.set_name(active[1].name());
    infeasible.set_trial_infeasible(true);
    infeasible.set_infeasible_reason("oom");
    v1::Trial trial;
    ASSERT_THAT(client_->Call(&Stub::CompleteTrial, infeasible, &trial), GrpcOk());
    CreateTrial(study, 0.004, "relu");
  }
};

TEST_F(CliTrialsListTest, TableHoldsEveryPage) {
  RunResult result = Cli({"trials", "list", "1", "--page-size", "3"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME                STATE             PARAMETERS         METRICS\n"
            "studies/1/trials/1  SUCCEEDED         act=relu lr=0.001  loss=0.5\n"
            "studies/1/trials/2  ACTIVE            act=relu lr=0.002  -\n"
            "studies/1/trials/3  INFEASIBLE (oom)  act=tanh lr=0.003  -\n"
            "studies/1/trials/4  REQUESTED         act=relu lr=0.004  -\n");
}

TEST_F(CliServerTest, TrialsListShowsRequestedAgainstUsedMemoryAndCpu) {
  // The template's resources are each trial's request; the usage comes with its completion.
  const std::string study =
      CreateStudy("sized", absl::StrCat(kTrialStudySpec, R"pb(
                    trial_template { resources { cpu_cores: 2 memory_bytes: 536870912 } }
                  )pb"));
  std::vector<v1::Trial> active = Suggest(study, 2);
  ASSERT_EQ(active.size(), 2u);
  v1::CompleteTrialRequest done;
  done.set_name(active[0].name());
  (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 0.25;
  done.mutable_usage()->set_peak_memory_bytes(int64_t{300} << 20);
  done.mutable_usage()->set_mean_cpu_cores(1.5);
  v1::Trial trial;
  ASSERT_THAT(client_->Call(&Stub::CompleteTrial, done, &trial), GrpcOk());

  RunResult result = Cli({"trials", "list", study});
  EXPECT_EQ(result.code, 0) << result.err;
  std::istringstream lines(result.out);
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_THAT(header, HasSubstr("MEMORY REQUESTED / PEAK  CPU REQUESTED / USED"));
  EXPECT_THAT(first, ::testing::EndsWith("512 MiB / 300 MiB        2 / 1.5"));
  EXPECT_THAT(second, ::testing::EndsWith("512 MiB / -              2 / -"));  // still running
}

TEST_F(CliTrialsListTest, StateFilterAppliesOnEveryPage) {
  RunResult result =
      Cli({"trials", "list", "studies/1", "--state", "requested", "--page-size", "1"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME                STATE      PARAMETERS         METRICS\n"
            "studies/1/trials/4  REQUESTED  act=relu lr=0.004  -\n");
}

TEST_F(CliTrialsListTest, JsonHoldsAllPages) {
  RunResult result = Cli({"--json", "trials", "list", "studies/1", "--page-size", "2"});
  EXPECT_EQ(result.code, 0) << result.err;
  v1::ListTrialsResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &response).ok())
      << result.out;
  ASSERT_EQ(response.trials_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(
        response.trials(i), client_->MustGetTrial(absl::StrCat("studies/1/trials/", i + 1))))
        << i;
  }
  EXPECT_EQ(response.next_page_token(), "");
  EXPECT_THAT(result.out, HasSubstr("\"infeasible_reason\":\"oom\""));  // proto field names
}

TEST_F(CliServerTest, TrialsListFollowsPageTokensThroughEveryTrialOnce) {
  const std::string study = CreateStudy();
  constexpr int kTrials = 250;  // the server's default page holds 100
  for (int i = 1; i <= kTrials; ++i) CreateTrial(study, 0.001 * i, i % 2 == 0 ? "relu" : "tanh");

  for (const std::vector<std::string>& page_size :
       {std::vector<std::string>{}, std::vector<std::string>{"--page-size", "7"}}) {
    std::vector<std::string> args = {"--json", "trials", "list", study};
    args.insert(args.end(), page_size.begin(), page_size.end());
    RunResult result = Cli(args);
    ASSERT_EQ(result.code, 0) << result.err;
    v1::ListTrialsResponse response;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &response).ok());
    ASSERT_EQ(response.trials_size(), kTrials);
    for (int i = 0; i < kTrials; ++i) {
      const v1::Trial& trial = response.trials(i);
      EXPECT_EQ(trial.id(), i + 1);  // in order, so each exactly once
      ASSERT_EQ(trial.parameters_size(), 2);
      EXPECT_EQ(trial.parameters(1).double_value(), 0.001 * (i + 1));
    }
  }
}

TEST_F(CliServerTest, SuggestHandsOutTrialsToThisProcesssOwnClientByDefault) {
  const std::string study = CreateStudy();
  ASSERT_EQ(study, "studies/1");
  CreateTrial(study, 0.01, "relu");
  CreateTrial(study, 0.011, "tanh");

  RunResult result = Cli({"suggest", "1", "--count", "2"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME                PARAMETERS\n"
            "studies/1/trials/1  act=relu lr=0.01\n"
            "studies/1/trials/2  act=tanh lr=0.011\n");
  for (const char* name : {"studies/1/trials/1", "studies/1/trials/2"}) {
    v1::Trial stored = client_->MustGetTrial(name);
    EXPECT_EQ(stored.state(), v1::Trial::ACTIVE) << name;
    EXPECT_EQ(stored.client_id(), "cli-testhost-4242-0badcafe") << name;
  }

  // No REQUESTED trial is left: the designer proposes a new one.
  result = Cli({"suggest", "studies/1", "--client-id", "worker-3"});
  EXPECT_EQ(result.code, 0) << result.err;
  v1::Trial proposed = client_->MustGetTrial("studies/1/trials/3");
  EXPECT_EQ(proposed.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(proposed.client_id(), "worker-3");
  EXPECT_EQ(result.out, FormatTable({"NAME", "PARAMETERS"},
                                    {{"studies/1/trials/3", FormatParameters(proposed)}}));
}

TEST_F(CliServerTest, MeasureStoresStepAndMetrics) {
  const std::string study = CreateStudy();
  CreateTrial(study, 0.003, "relu");
  const v1::Trial active = Suggest(study, 1).at(0);

  RunResult result = Cli({"measure", active.name(), "--step", "5", "loss=0.25", "acc=-1"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME                STATE   PARAMETERS         METRICS\n"
            "studies/1/trials/1  ACTIVE  act=relu lr=0.003  step 5: acc=-1 loss=0.25\n");

  v1::Trial stored = client_->MustGetTrial(active.name());
  EXPECT_EQ(stored.state(), v1::Trial::ACTIVE);
  ASSERT_EQ(stored.measurements_size(), 1);
  EXPECT_EQ(stored.measurements(0).step(), 5);
  EXPECT_THAT(stored.measurements(0).metrics(),
              UnorderedElementsAre(Pair("loss", 0.25), Pair("acc", -1.0)));
}

TEST_F(CliServerTest, ShouldStopPrintsTrueOrFalse) {
  const std::string study = CreateStudy();
  CreateTrial(study, 0.001, "relu");
  CreateTrial(study, 0.002, "relu");
  std::vector<v1::Trial> active = Suggest(study, 2);
  ASSERT_EQ(active.size(), 2u);
  v1::StopTrialRequest stop;
  stop.set_name(active[0].name());
  v1::Trial stopping;
  ASSERT_THAT(client_->Call(&Stub::StopTrial, stop, &stopping), GrpcOk());
  ASSERT_EQ(stopping.state(), v1::Trial::STOPPING);

  RunResult result = Cli({"should-stop", active[0].name()});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "true\n");
  result = Cli({"should-stop", active[1].name()});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "false\n");
  result = Cli({"should-stop", active[1].name(), "--json"});
  EXPECT_EQ(result.out, "{\"should_stop\":false}\n");
}

// The same, with bearer tokens: an admin token for the client, a reader token for the CLI.
class CliAuthServerTest : public CliServerTest {
 protected:
  static constexpr char kAdminToken[] = "cli-test-admin-token";
  static constexpr char kReaderToken[] = "cli-test-reader-token";

  void SetUp() override {
    std::ofstream(tokens_path_) << "# tokens for the CLI tests\n"
                                << kAdminToken << " admin\n"
                                << kReaderToken << " reader\n";
    ASSERT_NO_FATAL_FAILURE(CliServerTest::SetUp());
    client_->set_token(kAdminToken);
  }

  service::ServerOptions Options() override {
    service::ServerOptions options = CliServerTest::Options();
    options.auth_tokens_path = tokens_path_;
    return options;
  }

  const std::string tokens_path_ = dir_.File("tokens");
};

TEST_F(CliAuthServerTest, TokenFromFlagOrEnvironmentIsSentAsBearer) {
  CreateStudy("x");
  const std::string expected =
      "NAME       DISPLAY_NAME  STATE   TRIALS  COMPLETED\n"
      "studies/1  x             ACTIVE  0       0\n";

  RunResult result = Cli({"study", "list", "--token", kReaderToken});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, expected);

  env_.token = kReaderToken;
  result = Cli({"study", "list"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, expected);

  result = Cli({"study", "list", "--token", "not-a-known-token"});  // the flag wins
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "evoscale: ListStudies: UNAUTHENTICATED: authorization: unknown token\n");
}

TEST_F(CliAuthServerTest, NoTokenExits1Unauthenticated) {
  RunResult result = Cli({"study", "list"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err,
            "evoscale: ListStudies: UNAUTHENTICATED: missing \"authorization: Bearer TOKEN\"\n");

  result = Cli({"study", "create", "-f", WriteTempFile("auth.yaml", kStudyYaml)});
  EXPECT_EQ(result.code, 1);
  EXPECT_THAT(result.err, StartsWith("evoscale: CreateStudy: UNAUTHENTICATED: "));
  EXPECT_THAT(StudyNames(), IsEmpty());
}

TEST_F(CliAuthServerTest, ReaderMayNotWrite) {
  RunResult result = Cli(
      {"study", "create", "-f", WriteTempFile("reader.yaml", kStudyYaml), "--token", kReaderToken});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.err,
            "evoscale: CreateStudy: PERMISSION_DENIED: role \"reader\" may not do this; needs "
            "\"writer\"\n");
  EXPECT_THAT(StudyNames(), IsEmpty());

  result = Cli(
      {"study", "create", "-f", WriteTempFile("admin.yaml", kStudyYaml), "--token", kAdminToken});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_THAT(StudyNames(), ElementsAre("studies/1"));
}

}  // namespace
}  // namespace evoscale::cli
