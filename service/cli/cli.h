// evoscale: the command-line client of evoscaled's StudyService.
//
//   evoscale [--server HOST:PORT] [--token TOKEN] [-o table|json|yaml] [--timeout SECONDS]
//            COMMAND ...
//
// Main() is the whole program; main.cc only forwards to it. The pieces below it (command-line
// parsing with CLI11, name and metric parsing, study files, tables) are pure functions,
// declared here so that tests can call them directly. Nothing here is a class with state;
// every function is safe to call from any thread.
//
// Exit codes: 0 success; 1 the server answered an RPC with an error (or could not be reached);
// 2 bad usage or a bad local input (flags, arguments, the study file).

#ifndef EVOSCALE_SERVICE_CLI_CLI_H_
#define EVOSCALE_SERVICE_CLI_CLI_H_

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "evoscale/v1/study.pb.h"
#include "load_model/replay.h"
#include "service/cli/kubernetes.h"

namespace google::protobuf {
class Descriptor;
}  // namespace google::protobuf

namespace evoscale::cli {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";
inline constexpr double kDefaultTimeoutSeconds = 10.0;

// What the program takes from its surroundings. Main() fills it from the process
// (EVOSCALE_SERVER, EVOSCALE_TOKEN, gethostname(), getpid(), a random nonce); tests build one
// by hand.
struct Environment {
  std::string server;    // $EVOSCALE_SERVER; empty = unset
  std::string token;     // $EVOSCALE_TOKEN; empty = unset
  std::string tls_ca;    // $EVOSCALE_TLS_CA; empty = unset
  std::string hostname;  // these three make the default client id (DefaultClientId)
  int64_t pid = 0;
  std::string nonce;
};

// The client id a command asks for trials as when --client-id is not given: unique per
// process, "cli-HOSTNAME-PID-NONCE", so two workers on one host never take each other's
// trials (a fixed id would hand one worker's ACTIVE trials back to the other).
std::string DefaultClientId(const Environment& env);

// The version `evoscale --version` prints (the CMake project's).
std::string VersionText();

// Flags that apply to every command. They may appear anywhere on the command line.
struct GlobalOptions {
  std::string server = kDefaultServer;  // --server, else $EVOSCALE_SERVER
  std::string token;                    // --token, else $EVOSCALE_TOKEN; empty = send none
  // --tls-ca (else $EVOSCALE_TLS_CA): connect with TLS, trusting this PEM CA; --tls-cert and
  // --tls-key: this client's certificate, for a server that asks for one (mutual TLS).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // -o/--output: "table" (readable text), "json" (protobuf JSON, one message a line; --json
  // is short for it), "yaml" (the same fields as YAML documents), or "kubernetes" (recommend
  // only: a VerticalPodAutoscaler and a KEDA ScaledObject).
  std::string output = "table";
  bool version = false;  // --version
  bool structured() const { return output == "json" || output == "yaml"; }
  double timeout_seconds = kDefaultTimeoutSeconds;  // --timeout: deadline of each RPC
};

// The positional arguments and flags of the commands (see UsageText()). Each command fills
// only its own fields; the others keep their defaults.
struct CommandArguments {
  // Positional arguments, as given: STUDY ("studies/7" or "7"), TRIAL ("studies/7/trials/3"),
  // NAME or WORKLOAD ("default/ranker"), the STATE of `study state`, and the METRIC=VALUE...
  // of measure and complete.
  std::string study;
  std::string trial;
  std::string workload;
  v1::Study::State study_state = v1::Study::STATE_UNSPECIFIED;
  std::vector<std::string> metrics;

  // study create -f/--file and --name (unset: the file's display name).
  std::string file;
  std::optional<std::string> display_name;
  // trials list --state (unspecified: every state) and --page-size (0: the server's default).
  v1::Trial::State trial_state = v1::Trial::STATE_UNSPECIFIED;
  int32_t page_size = 0;
  // suggest --count and --client-id (empty: "cli-HOSTNAME").
  int32_t count = 1;
  std::string client_id;
  // measure --step.
  int64_t step = 0;
  // complete --infeasible.
  std::optional<std::string> infeasible_reason;
  // workload put --policy, --kind, --target-utilization, --min-replicas and --max-replicas.
  v1::Workload workload_settings;
  // The flags of `workload put` given on the line: only these change an existing workload.
  std::set<std::string> workload_flags;
  // recommend --prometheus-url (for -o kubernetes).
  KubernetesOptions kubernetes;
  // replay --trace, --path and --policy.
  load_model::ReplayOptions replay;
};

// A command line, parsed.
struct CommandLine {
  GlobalOptions global;
  std::string command;  // the command's words, "study create"; empty: none was given
  CommandArguments arguments;
  std::string help;  // what -h/--help or `help` asked to print; empty: run the command
};

// Parses `args` (argv without the program name) with CLI11: the command's words, then its
// positional arguments and flags in any order, and the global flags anywhere. Flags take
// "--flag value" and "--flag=value" (-f and -o also "-f FILE"); after "--", the positional
// arguments a command still needs may start with '-'. $EVOSCALE_SERVER and $EVOSCALE_TOKEN
// (from `env`) are the defaults of --server and --token. Fails with InvalidArgument on an
// unknown command, flag or argument, or a missing or bad value or argument; the message names
// the command and the flag or argument and ends with the command's usage, e.g.
// `suggest: --count: "0" is not an integer in [1, 1000] (usage: evoscale suggest STUDY
// [--count N] [--client-id ID])`.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const Environment& env);

// "7" -> "studies/7"; "studies/7" stays. InvalidArgument for anything else (empty, a trial
// name, extra path segments).
absl::StatusOr<std::string> NormalizeStudyName(absl::string_view name);

// A full trial name "studies/{s}/trials/{t}" (returned unchanged), or "{s}/{t}" (returned as
// the full name). InvalidArgument for anything else.
absl::StatusOr<std::string> ValidateTrialName(absl::string_view name);

// Parses "metric=value" into its name and value. InvalidArgument naming the argument when
// the '=' or the name is missing or the value is not a finite number, e.g.
// `metric "loss=abc": value is not a number`.
absl::StatusOr<std::pair<std::string, double>> ParseMetric(absl::string_view arg);

// ParseMetric() over all of `args`; a metric named twice is an error.
absl::StatusOr<std::map<std::string, double>> ParseMetrics(const std::vector<std::string>& args);

// Converts YAML text to JSON text. Plain scalars that look like YAML 1.2 numbers, booleans or
// nulls become JSON numbers, booleans and null; everything else, and every quoted scalar,
// becomes a string. With a `schema`, plain scalars that sit in string fields of that message
// (or in maps with string values, e.g. AlgorithmSpec.settings) stay strings, so
// `settings: {population_size: 50}` gives {"settings":{"population_size":"50"}}.
// Fails with InvalidArgument on a YAML syntax error ("line L, column C: ...").
absl::StatusOr<std::string> YamlToJson(absl::string_view yaml,
                                       const google::protobuf::Descriptor* schema = nullptr);

enum class StudyFileFormat { kJson, kYaml };

// The format a study file is read as: by its extension (.json; .yaml, .yml), else JSON when
// the text starts with '{', else YAML.
StudyFileFormat DetectStudyFileFormat(absl::string_view path, absl::string_view text);

// Parses a Study in protobuf JSON form (proto or lowerCamel field names) or the same
// structure in YAML. A bare StudySpec (a top-level "metrics" or "parameters" and no "spec")
// is taken as the study's spec. Unknown fields are errors. Errors are InvalidArgument and
// name `source` (the file name), e.g. `study file "s.yaml": line 3, column 1: ...`.
absl::StatusOr<v1::Study> ParseStudy(absl::string_view text, StudyFileFormat format,
                                     absl::string_view source);

// Reads and parses the study file at `path` (ParseStudy). A file that cannot be read gives
// NotFound / PermissionDenied / InvalidArgument naming the path and the reason.
absl::StatusOr<v1::Study> LoadStudyFile(const std::string& path);

// Parses telemetry samples: JSON lines (a TelemetrySample each, in protobuf JSON), or CSV (no
// quoting) whose first line names TelemetrySample fields. `time` may be unix seconds or RFC
// 3339; the earlier fields `timestamp` (unix seconds) and `latency_ms` (milliseconds) are
// read as `time` and `latency_seconds`. Blank lines and lines starting with '#' are skipped;
// a sample without a workload takes `default_workload`. INVALID_ARGUMENT names `source`, the
// line and the field, e.g. `t.csv:3: cpu_cores: "x" is not a number`.
absl::StatusOr<std::vector<v1::TelemetrySample>> ParseTelemetryText(
    absl::string_view text, absl::string_view source, const std::string& default_workload);

// Formats a number as printf's %g.
std::string FormatNumber(double value);

// Lays out a table: left-aligned columns two spaces apart, header first, one line per row,
// no trailing spaces. Empty cells print as "-". Rows shorter than the header are padded.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// "lr=0.001 layers=3 act=relu", in the trial's order; "-" when there are none.
std::string FormatParameters(const v1::Trial& trial);

// "loss=0.25 acc=0.9", sorted by metric name; "-" when there are none.
std::string FormatMetrics(const v1::Measurement& measurement);

// JSON text (an object, as protobuf's JSON printer writes it) as a YAML document in block
// style; strings that YAML would read as another type ("true", "1e3", "null", "") are quoted,
// so the YAML reads back as the same values. InvalidArgument when `json` does not parse.
absl::StatusOr<std::string> JsonToYaml(absl::string_view json);

// The usage of every command, printed by `evoscale help`, -h and --help.
std::string UsageText();

// Runs one invocation: `args` is argv without the program name. Writes results (and help) to
// `out` and errors (prefixed "evoscale: ") to `err`; returns the exit code (see top of file).
// No command at all prints UsageText() to `err` and exits 2.
int Run(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
        std::ostream& err);

// The program: reads the Environment from the process and calls Run().
int Main(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_CLI_H_
