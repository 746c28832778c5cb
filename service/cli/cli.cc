// The evoscale command line: the command table joined from the nouns' files, parsing against
// it (CLI11), the usage printed from it, and the dispatch of one run. The commands themselves
// are in the nouns' files (see command.h); the channel in channel.cc.

#include "service/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/admin.grpc.pb.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/channel.h"
#include "service/cli/command.h"
#include "service/cli/format.h"
#include "service/cli/validators.h"

namespace evoscale::cli {
namespace {

// ---- The command table ---------------------------------------------------------------------

// The nouns' files, in the order the usage lists their commands.
using Noun = std::vector<Command> (*)();
constexpr Noun kNouns[] = {StudyCommands, TrialCommands,  WorkloadCommands, TelemetryCommands,
                           AdminCommands, ReplayCommands, PlaceCommands};

// Short forms kept from earlier releases (scripts use them): each is the command it names,
// under a name of its own. In the order the usage lists them.
constexpr std::pair<const char*, const char*> kShortForms[] = {
    {"suggest", "trial suggest"}, {"measure", "trial measure"},
    {"complete", "trial complete"}, {"stop", "trial stop"},
    {"should-stop", "trial should-stop"}, {"optimal", "study optimal"}};

// The plural nouns are the same groups (kubectl takes both: `get study`, `get studies`).
constexpr std::pair<const char*, const char*> kPlurals[] = {
    {"study", "studies"}, {"trial", "trials"}, {"workload", "workloads"}};

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const kCommands = [] {
    auto* commands = new std::vector<Command>;
    for (Noun noun : kNouns) {
      std::vector<Command> rows = noun();
      commands->insert(commands->end(), rows.begin(), rows.end());
    }
    for (const auto& [short_name, full_name] : kShortForms) {
      auto full = std::find_if(commands->begin(), commands->end(),
                               [&](const Command& command) { return command.name == full_name; });
      Command alias = *full;  // every short form names a command of the nouns' rows
      alias.name = short_name;
      alias.summary = absl::StrCat("Short for ", full_name, ".");
      alias.short_for = full_name;
      commands->push_back(std::move(alias));
    }
    return commands;
  }();
  return *kCommands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

// The commands of a group ("study"): "create, list, get, delete, state".
std::string SubcommandsOf(absl::string_view group) {
  std::vector<absl::string_view> names;
  for (const Command& command : Commands()) {
    std::pair<absl::string_view, absl::string_view> words =
        absl::StrSplit(command.name, absl::MaxSplits(' ', 1));
    if (words.first == group) names.push_back(words.second);
  }
  return absl::StrJoin(names, ", ");
}

// ---- Global flags --------------------------------------------------------------------------

// The most a deadline may be; keeps the chrono arithmetic far from overflow.
constexpr double kMaxTimeoutSeconds = 24 * 3600;

CLI::Validator TimeoutSeconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double seconds;
        if (absl::SimpleAtod(text, &seconds) && seconds > 0 && seconds <= kMaxTimeoutSeconds) {
          return "";
        }
        return absl::StrCat("\"", text, "\" is not a number of seconds in (0, ", kMaxTimeoutSeconds,
                            "]");
      },
      "");
}

// One line (or a few) of the usage's global flags. `define` declares the flag's options on
// the root, bound to GlobalOptions, and returns the one the usage names, with its value:
// "-o, --output FORMAT". `help` is the usage's text, a line each, and (joined) the
// description of that option; the other options `define` declares are the line's companions
// (--tls-cert and --tls-key beside --tls-ca, --json beside -o).
struct GlobalFlag {
  std::vector<std::string> help;
  CLI::Option* (*define)(CLI::App& app, GlobalOptions& global, const std::string& description);
};

const std::vector<GlobalFlag>& GlobalFlags() {
  static const auto* const kFlags = new std::vector<GlobalFlag>{
      {{absl::StrCat("evoscaled's gRPC address (default $EVOSCALE_SERVER, else ", kDefaultServer,
                     "); several replicas as IP:PORT,IP:PORT: the first live one")},
       [](CLI::App& app, GlobalOptions& global, const std::string& description) {
         return app.add_option("--server", global.server, description)
             ->type_name("HOST:PORT[,...]")
             ->check(NotEmpty("the address"));
       }},
      {{"bearer token sent with every call (default $EVOSCALE_TOKEN)"},
       [](CLI::App& app, GlobalOptions& global, const std::string& description) {
         return app.add_option("--token", global.token, description)->type_name("TOKEN");
       }},
      {{"connect with TLS trusting this PEM CA (default $EVOSCALE_TLS_CA);",
        "--tls-cert FILE --tls-key FILE: a client certificate"},
       [](CLI::App& app, GlobalOptions& global, const std::string& description) {
         CLI::Option* ca = app.add_option("--tls-ca", global.tls_ca, description)->type_name("FILE");
         app.add_option("--tls-cert", global.tls_cert, "this client's PEM certificate (mutual TLS)")
             ->type_name("FILE");
         app.add_option("--tls-key", global.tls_key, "the PEM key of --tls-cert")->type_name("FILE");
         return ca;
       }},
      {{"table (default); json (protobuf JSON, one message a",
        "line; --json is short for it); yaml; kubernetes", "(recommend only)"},
       [](CLI::App& app, GlobalOptions& global, const std::string& description) {
         CLI::Option* output =
             app.add_option("-o,--output", global.output, description)
                 ->type_name("FORMAT")
                 ->check(OneOf({"table", "json", "yaml", "kubernetes"},
                               "table, json, yaml or kubernetes"));
         app.add_flag_callback(
             "--json", [&global] { global.output = "json"; }, "short for -o json");
         return output;
       }},
      {{"print the version"},
       [](CLI::App& app, GlobalOptions& global, const std::string& description) {
         return app.add_flag("--version", global.version, description);
       }},
      {{absl::StrCat("deadline of each call (default ", FormatNumber(kDefaultTimeoutSeconds), ")")},
       [](CLI::App& app, GlobalOptions& global, const std::string& description) {
         return app.add_option("--timeout", global.timeout_seconds, description)
             ->type_name("SECONDS")
             ->check(TimeoutSeconds());
       }},
      // CLI11's own -h, --help, whose description the commands' --help inherit: kept as is.
      {{"print this text; after a command, that command's flags"},
       [](CLI::App& app, GlobalOptions&, const std::string&) { return app.get_help_ptr(); }},
  };
  return *kFlags;
}

// Declares every global flag on `app`; returns, for each GlobalFlags() entry, its option.
std::vector<const CLI::Option*> DefineGlobalFlags(CLI::App& app, GlobalOptions& global) {
  std::vector<const CLI::Option*> options;
  for (const GlobalFlag& flag : GlobalFlags()) {
    options.push_back(flag.define(app, global, absl::StrJoin(flag.help, " ")));
  }
  return options;
}

// How the usage names an option: "-o, --output FORMAT", "--version".
std::string Spelling(const CLI::Option& option) {
  std::vector<std::string> names;
  for (const std::string& name : option.get_snames()) names.push_back(absl::StrCat("-", name));
  for (const std::string& name : option.get_lnames()) names.push_back(absl::StrCat("--", name));
  std::string spelling = absl::StrJoin(names, ", ");
  if (option.get_type_size() != 0 && !option.get_type_name().empty()) {
    absl::StrAppend(&spelling, " ", option.get_type_name());
  }
  return spelling;
}

// ---- The usage -----------------------------------------------------------------------------

// Each command of the table, its synopsis and summary; the short forms on one line.
std::string CommandsUsage() {
  std::vector<std::string> plurals;
  for (const auto& [noun, plural] : kPlurals) plurals.push_back(plural);
  std::string text = absl::StrCat("Commands (the nouns take their plural too: ",
                                  absl::StrJoin(plurals, ", "), "):\n");
  std::vector<const Command*> short_forms;
  for (const Command& command : Commands()) {
    if (!command.short_for.empty()) {
      short_forms.push_back(&command);
      continue;
    }
    absl::StrAppend(&text, "  ", command.name, command.synopsis.empty() ? "" : " ",
                    command.synopsis, "\n      ", command.summary, "\n");
  }
  if (!short_forms.empty()) {
    absl::StrAppend(&text, "  ",
                    absl::StrJoin(short_forms, ", ",
                                  [](std::string* out, const Command* command) {
                                    absl::StrAppend(out, command->name);
                                  }),
                    "\n      Short for ", short_forms.front()->short_for, ", ..., and ",
                    short_forms.back()->short_for, ".\n");
  }
  absl::StrAppend(&text,
                  "  help\n"
                  "      Print this text.\n");
  return text;
}

// Each global flag, its help in a column beside it.
std::string GlobalFlagsUsage() {
  constexpr size_t kHelpColumn = 22;
  const std::string line_break = absl::StrCat("\n", std::string(kHelpColumn, ' '));
  CLI::App app;  // a scratch root: what is declared on it is only read
  GlobalOptions global;
  const std::vector<const CLI::Option*> options = DefineGlobalFlags(app, global);
  std::string text = "Global flags (anywhere on the line):\n";
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string spelling = absl::StrCat("  ", Spelling(*options[i]));
    // At least one space, even after a spelling as wide as the column.
    const size_t pad = spelling.size() < kHelpColumn ? kHelpColumn - spelling.size() : 1;
    absl::StrAppend(&text, spelling, std::string(pad, ' '),
                    absl::StrJoin(GlobalFlags()[i].help, line_break), "\n");
  }
  return text;
}

// ---- Command-line parsing ------------------------------------------------------------------

// The CLI11 subcommand `name` of `parent`, made on first use.
CLI::App* Subcommand(CLI::App& parent, const std::string& name, const std::string& summary) {
  std::vector<CLI::App*> existing =
      parent.get_subcommands([&name](CLI::App* sub) { return sub->get_name() == name; });
  if (!existing.empty()) return existing.front();
  return parent.add_subcommand(name, summary)
      ->footer("Global flags (--server, --token, -o/--json, --timeout): see evoscale help.");
}

// The subcommand the parse reached: the deepest one given, or `root` when there was none.
const CLI::App& Reached(const CLI::App& root) {
  const CLI::App* app = &root;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return *app;
}

// The words that name `app` below the root: "study create"; "" for the root.
std::string CommandWords(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::App* a = &app; a->get_parent() != nullptr; a = a->get_parent()) {
    words.insert(words.begin(), a->get_name());
  }
  return absl::StrJoin(words, " ");
}

// Whether `app` or any of its subcommands has the flag `name` ("--step", "-f").
bool DefinesFlag(CLI::App& app, const std::string& name) {
  if (app.get_option_no_throw(name) != nullptr) return true;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (DefinesFlag(*sub, name)) return true;
  }
  return false;
}

// "-x", "--x=1"; not "-" alone or a negative number ("-5", "-.5").
bool LooksLikeFlag(absl::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && !absl::ascii_isdigit(arg[1]) && arg[1] != '.';
}

// What was wrong with arguments nothing took, e.g. `unknown flag --bogus`.
std::string DescribeExtras(CLI::App& root, const CLI::App& reached) {
  const std::vector<std::string> extras = root.remaining(/*recurse=*/true);
  if (auto flag = std::find_if(extras.begin(), extras.end(), LooksLikeFlag); flag != extras.end()) {
    const std::string name = flag->substr(0, flag->find('='));
    return DefinesFlag(root, name) ? absl::StrCat("flag ", name, " does not apply")
                                   : absl::StrCat("unknown flag ", name);
  }
  if (extras.empty()) return "unexpected arguments";
  if (&reached == &root) return absl::StrCat("unknown command \"", extras.front(), "\"");
  if (FindCommand(CommandWords(reached)) == nullptr) {
    return absl::StrCat("unknown subcommand \"", extras.front(), "\"");
  }
  return absl::StrCat("unexpected argument \"", extras.front(), "\"");
}

// The message for a command line CLI11 refused: the command it reached, what was wrong
// (CLI11's words, which name the flag or argument, or ours for unexpected arguments), and
// where to look for the right usage.
std::string ParseErrorMessage(CLI::App& root, const CLI::ParseError& error) {
  const CLI::App& reached = Reached(root);
  const std::string problem = dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr
                                  ? DescribeExtras(root, reached)
                                  : std::string(error.what());
  const std::string words = CommandWords(reached);
  if (words.empty()) return absl::StrCat(problem, " (see evoscale help)");
  if (const Command* command = FindCommand(words)) {
    return absl::StrCat(words, ": ", problem, " (usage: evoscale ", words,
                        command->synopsis.empty() ? "" : " ", command->synopsis, ")");
  }
  return absl::StrCat(words, ": ", problem, " (one of ", SubcommandsOf(words), ")");
}

// The root of the command line: the global flags, a subcommand per command of the table
// (under its group's, for "study create"), the plurals and `help`.
void DefineCommandLine(CLI::App& root, CommandLine& line) {
  root.fallthrough();             // global flags after the command, too; inherited
  root.require_subcommand(0, 1);  // one command; inherited by the groups
  DefineGlobalFlags(root, line.global);
  for (const Command& command : Commands()) {
    std::vector<std::string> words = absl::StrSplit(command.name, ' ');
    CLI::App* parent = &root;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      parent = Subcommand(*parent, words[i], absl::StrCat("Commands: ", SubcommandsOf(words[i])));
    }
    command.define(*Subcommand(*parent, words.back(), command.summary), line.arguments);
  }
  for (const auto& [noun, plural] : kPlurals) Subcommand(root, noun, "")->alias(plural);
  // `help` ignores what follows it, as the usage covers every command.
  Subcommand(root, "help", "Print the usage of every command.")->fallthrough(false)->allow_extras();
}

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const Environment& env) {
  CommandLine line;
  if (!env.server.empty()) line.global.server = env.server;
  line.global.token = env.token;
  line.global.tls_ca = env.tls_ca;

  CLI::App root("evoscale: the command-line client of evoscaled", "evoscale");
  DefineCommandLine(root, line);
  try {
    root.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them reversed
  } catch (const CLI::CallForHelp&) {
    // The root's help() is the help of the (sub)command reached.
    line.help = &Reached(root) == &root ? UsageText() : root.help();
    return line;
  } catch (const CLI::ParseError& error) {
    return UsageError(ParseErrorMessage(root, error));
  }
  const std::string words = CommandWords(Reached(root));
  if (line.global.version) {
    line.help = VersionText();
    return line;
  }
  if (line.global.output == "kubernetes" && words != "recommend") {
    return UsageError(absl::StrCat(words.empty() ? "" : absl::StrCat(words, ": "),
                                   "-o kubernetes: only recommend prints Kubernetes objects "
                                   "(use table, json or yaml)"));
  }
  if (words == "help") {
    line.help = UsageText();
  } else if (!words.empty() && FindCommand(words) == nullptr) {
    return UsageError(
        absl::StrCat(words, ": missing subcommand (one of ", SubcommandsOf(words), ")"));
  } else {
    line.command = words;
  }
  return line;
}

std::string VersionText() { return absl::StrCat("evoscale ", EVOSCALE_VERSION, "\n"); }

std::string UsageText() {
  return absl::StrCat(
      "usage: evoscale [GLOBAL FLAGS] COMMAND [ARGUMENTS]\n"
      "\n",
      CommandsUsage(),
      "\n"
      "STUDY is a study name, studies/ID, or just its ID; TRIAL is a trial name,\n"
      "studies/ID/trials/ID, or the two ids, STUDY/TRIAL (1/3).\n"
      "\n",
      GlobalFlagsUsage(),
      "\n"
      "Exit status: 0 success, 1 the server returned an error or could not be reached\n"
      "(UNAVAILABLE), 2 bad usage or input.\n");
}

int Run(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
        std::ostream& err) {
  constexpr int kRpcFailed = 1;
  constexpr int kBadUsage = 2;
  absl::StatusOr<CommandLine> line = ParseCommandLine(args, env);
  if (!line.ok()) {
    err << "evoscale: " << line.status().message() << "\n";
    return kBadUsage;
  }
  if (!line->help.empty()) {
    out << line->help;
    return 0;
  }
  const Command* command = FindCommand(line->command);
  if (command == nullptr) {  // no command given
    err << UsageText();
    return kBadUsage;
  }

  // The channel connects lazily, on the first call; commands check their arguments first.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = OpenChannel(line->global);
  if (!channel.ok()) {
    err << "evoscale: " << channel.status().message() << "\n";
    return kBadUsage;
  }
  std::unique_ptr<v1::StudyService::Stub> study = v1::StudyService::NewStub(*channel);
  std::unique_ptr<v1::AutoscalerService::Stub> autoscaler =
      v1::AutoscalerService::NewStub(*channel);
  std::unique_ptr<v1::AdminService::Stub> admin = v1::AdminService::NewStub(*channel);
  Invocation invocation(*line, env, *study, *autoscaler, *admin, out);
  absl::Status status = command->run(invocation);
  out.flush();
  if (status.ok()) return 0;
  if (IsRpcError(status)) {
    err << "evoscale: " << status.message() << "\n";
    return kRpcFailed;
  }
  err << "evoscale: " << command->name << ": " << status.message() << "\n";
  return kBadUsage;
}

int Main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  Environment env;
  env.server = GetEnv("EVOSCALE_SERVER");
  env.token = GetEnv("EVOSCALE_TOKEN");
  env.tls_ca = GetEnv("EVOSCALE_TLS_CA");
  char hostname[256] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) == 0) env.hostname = hostname;
  env.pid = getpid();
  std::random_device random;
  env.nonce = absl::StrFormat("%08x", random());
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return Run(args, env, out, err);
}

}  // namespace evoscale::cli
