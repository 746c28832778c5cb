// What the evoscale commands share: errors, Invocation's output, the positional arguments and
// the sizes several nouns print. See command.h.

#include "service/cli/command.h"

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/command_line.h"
#include "service/cli/format.h"

namespace evoscale::cli {
namespace {

// Marks a Status that carries a failed RPC (exit code 1) rather than a usage error (2).
constexpr absl::string_view kRpcErrorPayload = "type.evoscale.dev/evoscale.cli.RpcError";

}  // namespace

absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::Status RpcError(absl::string_view rpc, const grpc::Status& status) {
  // gRPC and Abseil status codes are the same numbers.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  absl::Status error(
      code, absl::StrCat(rpc, ": ", absl::StatusCodeToString(code), ": ", status.error_message()));
  error.SetPayload(kRpcErrorPayload, absl::Cord(rpc));
  return error;
}

bool IsRpcError(const absl::Status& status) {
  return status.GetPayload(kRpcErrorPayload).has_value();
}

absl::Status Invocation::PrintMessage(const google::protobuf::Message& message) const {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // scripts see every field, even false/0
  std::string json;
  google::protobuf::util::Status status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::InternalError(status.message().ToString());
  return PrintJsonText(json);
}

absl::Status Invocation::PrintJsonText(const std::string& json) const {
  if (global().output != "yaml") {
    out_ << json << "\n";
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> yaml = JsonToYaml(json);
  if (!yaml.ok()) return absl::InternalError(yaml.status().message());
  out_ << "---\n" << *yaml;
  return absl::OkStatus();
}

void DefineNothing(CLI::App&, CommandArguments&) {}

void DefineStudy(CLI::App& command, CommandArguments& arguments) {
  command.add_option("STUDY", arguments.study, "a study name, studies/ID, or just its ID")
      ->type_name("")
      ->required();
}

std::string Mebibytes(int64_t bytes) {
  return bytes > 0 ? absl::StrFormat("%.0f MiB", static_cast<double>(bytes) / (1 << 20)) : "-";
}

}  // namespace evoscale::cli
