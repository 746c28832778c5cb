// What the evoscale commands share; private to service/cli/ (nothing outside includes it).
//
// The CLI is one table of commands (Command). Each noun has a file that returns its rows:
// study_commands.cc, trial_commands.cc, workload_commands.cc (and recommend),
// telemetry_commands.cc, admin_commands.cc, replay_commands.cc, place_commands.cc. cli.cc
// joins them, parses the line against the table (CLI11), prints the usage from it and runs the
// command reached with an Invocation: the parsed line, the stubs and the output stream of that
// one run.
//
// Everything here is stateless except Invocation, which only holds references for the length
// of one Run() call and is used from that call's thread. This header takes the parsed line's
// types from command_line.h, not cli.h: cli.cc includes it, and must not be included back.

#ifndef EVOSCALE_SERVICE_CLI_COMMAND_H_
#define EVOSCALE_SERVICE_CLI_COMMAND_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/admin.grpc.pb.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/command_line.h"

namespace CLI {
class App;
}  // namespace CLI

namespace evoscale::cli {

using StudyStub = v1::StudyService::StubInterface;
using AutoscalerStub = v1::AutoscalerService::StubInterface;
using AdminStub = v1::AdminService::StubInterface;

// The most results one page may hold (the API's limit for page_size and suggestion_count).
inline constexpr int64_t kMaxPageSize = 1000;

// ---- Errors: Run() exits 1 for an RpcError, 2 for anything else ----------------------------

// A bad flag, argument or local input (exit 2).
absl::Status UsageError(absl::string_view message);

// A failed RPC (exit 1): "RPC: CODE: message", marked so that IsRpcError() knows it.
absl::Status RpcError(absl::string_view rpc, const grpc::Status& status);
bool IsRpcError(const absl::Status& status);

// ---- One run of one command ----------------------------------------------------------------

// A command's arguments and where it sends RPCs and output. Holds references only: everything
// it names outlives the one Run() call that makes it.
class Invocation {
 public:
  Invocation(const CommandLine& line, const Environment& env, StudyStub& study,
             AutoscalerStub& autoscaler, AdminStub& admin, std::ostream& out)
      : line_(line), env_(env), study_(study), autoscaler_(autoscaler), admin_(admin), out_(out) {}

  const GlobalOptions& global() const { return line_.global; }
  const CommandArguments& arguments() const { return line_.arguments; }
  const Environment& env() const { return env_; }
  AutoscalerStub& autoscaler() const { return autoscaler_; }
  AdminStub& admin() const { return admin_; }
  std::ostream& out() const { return out_; }

  // Calls `rpc` (a lambda taking the ClientContext) with the deadline and the token set.
  template <typename Rpc>
  absl::Status Call(absl::string_view rpc_name, Rpc rpc) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(global().timeout_seconds)));
    if (!global().token.empty()) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", global().token));
    }
    grpc::Status status = rpc(&context);
    return status.ok() ? absl::OkStatus() : RpcError(rpc_name, status);
  }

  // Calls the unary RPC `rpc` of the stub its type names (Call's deadline and token).
  template <typename Stub, typename Request, typename Response>
  absl::Status Unary(absl::string_view rpc_name,
                     grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
                     const Request& request, Response* response) const {
    Stub* stub;
    if constexpr (std::is_same_v<Stub, StudyStub>) {
      stub = &study_;
    } else if constexpr (std::is_same_v<Stub, AutoscalerStub>) {
      stub = &autoscaler_;
    } else {
      static_assert(std::is_same_v<Stub, AdminStub>);
      stub = &admin_;
    }
    return Call(rpc_name, [&](grpc::ClientContext* context) {
      return (stub->*rpc)(context, request, response);
    });
  }

  // Prints `message` as -o asks: one line of protobuf JSON, or a YAML document.
  absl::Status PrintMessage(const google::protobuf::Message& message) const;

  // Prints JSON text as -o asks (yaml: converted, as a YAML document).
  absl::Status PrintJsonText(const std::string& json) const;

 private:
  const CommandLine& line_;
  const Environment& env_;
  StudyStub& study_;
  AutoscalerStub& autoscaler_;
  AdminStub& admin_;
  std::ostream& out_;
};

// ---- The command table ---------------------------------------------------------------------

// One row of the table: what the parser, the usage and the dispatch know of a command.
struct Command {
  std::string name;      // the command words, "study create"
  std::string synopsis;  // its arguments and flags after the name, as the usage and errors show
  std::string summary;   // one line, in the usage and atop the command's --help
  // Declares the command's positional arguments and flags on its CLI11 subcommand, bound to
  // the fields of `arguments` they fill.
  void (*define)(CLI::App& command, CommandArguments& arguments);
  absl::Status (*run)(const Invocation& invocation);
  // The command this is an older spelling of ("trial suggest" for "suggest"); empty for most.
  // The usage lists the short forms apart, on one line.
  std::string short_for;
};

// The rows of each noun, in the order the usage lists them.
std::vector<Command> StudyCommands();
std::vector<Command> TrialCommands();
std::vector<Command> WorkloadCommands();  // and recommend
std::vector<Command> TelemetryCommands();
std::vector<Command> AdminCommands();
std::vector<Command> ReplayCommands();
std::vector<Command> PlaceCommands();

// ---- Positional arguments several nouns take -----------------------------------------------

void DefineNothing(CLI::App& command, CommandArguments& arguments);
void DefineStudy(CLI::App& command, CommandArguments& arguments);  // STUDY

// ---- Output and paging several nouns share -------------------------------------------------

// Prints trials as a table (-o table): the trial commands, and study optimal.
absl::Status PrintTrials(const Invocation& invocation,
                         const google::protobuf::RepeatedPtrField<v1::Trial>& trials);

// "512 MiB"; "-" for 0 (none requested, or nothing measured).
std::string Mebibytes(int64_t bytes);

// Follows next_page_token until the last page; `list` fetches one page into its response.
// A server that hands back the token it was given fails as INTERNAL rather than looping.
template <typename Response, typename ListPage>
absl::Status ListAllPages(absl::string_view rpc_name, ListPage list, Response* all) {
  std::string token;
  while (true) {
    Response page;
    if (absl::Status s = list(token, &page); !s.ok()) return s;
    all->MergeFrom(page);
    if (page.next_page_token().empty()) break;
    if (page.next_page_token() == token) {
      return RpcError(
          rpc_name, grpc::Status(grpc::StatusCode::INTERNAL, "the server repeated its page token"));
    }
    token = page.next_page_token();
  }
  all->clear_next_page_token();
  return absl::OkStatus();
}

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_COMMAND_H_
