// evoscale: the command-line client of evoscaled's StudyService, AutoscalerService and
// AdminService.
//
//   evoscale [--server HOST:PORT] [--token TOKEN] [-o table|json|yaml] [--timeout SECONDS]
//            COMMAND ...
//
// Main() is the whole program; main.cc only forwards to it. The pieces below it (command-line
// parsing with CLI11, name and metric parsing, study files, tables) are pure functions,
// declared here so that tests can call them directly. What this header declares holds no
// state (the structs are plain values) and is safe to call from any thread.
//
// This header, with the three it includes (command_line.h: the parsed line's types;
// arguments.h: study, trial and metric arguments; format.h: tables and YAML), is the folder's
// contract. Behind Run(), service/cli/ is laid out as:
//   cli.cc          the command table (joined from the nouns' files), parsing against it, the
//                   usage generated from it and from the global flags' table, and dispatch
//   command.h       the table's row (Command) and Invocation, the one class: what a single
//                   run of a command holds (its line, the stubs, the output stream)
//   study_commands.cc, trial_commands.cc, workload_commands.cc (and recommend),
//   telemetry_commands.cc, admin_commands.cc, replay_commands.cc
//                   one file per noun, returning its commands: their flags, RPCs and output
//   validators.h    the checks on flag values the nouns share (arguments.h: on arguments)
//   channel.h       the gRPC channel: plaintext or TLS
//   format.cc, study_file.cc, telemetry_file.cc, kubernetes.cc   the formats printed and read
// command.h, validators.h and channel.h are private to the folder; none of them, nor what
// they include, includes this header (tests/lint/include_graph.py: no unit cycles).
//
// Exit codes: 0 success; 1 the server answered an RPC with an error (or could not be reached);
// 2 bad usage or a bad local input (flags, arguments, the study file).

#ifndef EVOSCALE_SERVICE_CLI_CLI_H_
#define EVOSCALE_SERVICE_CLI_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "evoscale/v1/study.pb.h"
#include "service/cli/arguments.h"     // NormalizeStudyName, ValidateTrialName, ParseMetric(s)
#include "service/cli/command_line.h"  // Environment, GlobalOptions, CommandLine, ...
#include "service/cli/format.h"        // FormatNumber, FormatTable, ..., JsonToYaml

namespace google::protobuf {
class Descriptor;
}  // namespace google::protobuf

namespace evoscale::cli {

// The client id a command asks for trials as when --client-id is not given: unique per
// process, "cli-HOSTNAME-PID-NONCE", so two workers on one host never take each other's
// trials (a fixed id would hand one worker's ACTIVE trials back to the other).
std::string DefaultClientId(const Environment& env);

// The version `evoscale --version` prints (the CMake project's).
std::string VersionText();

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

// The usage of every command, printed by `evoscale help`, -h and --help: generated from the
// command table (each command's synopsis and summary) and the global flags' table.
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
