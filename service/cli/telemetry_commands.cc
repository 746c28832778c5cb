// The telemetry commands: telemetry send (AutoscalerService.ReportTelemetry). The file formats
// it reads are in telemetry_file.cc.

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/cli.h"
#include "service/cli/command.h"

namespace evoscale::cli {
namespace {

// Samples per TelemetryBatch message of the stream.
constexpr size_t kBatch = 1000;

void DefineTelemetrySend(CLI::App& command, CommandArguments& arguments) {
  command
      .add_option("FILE", arguments.file,
                  "samples: JSON lines (a TelemetrySample each, e.g. {\"workload\":\"default/"
                  "ranker\",\"instance\":\"pod-1\",\"container\":\"server\",\"time\":"
                  "1700000000,\"cpu_cores\":1.5,\"memory_bytes\":2e9}; time in unix seconds or "
                  "RFC 3339) or CSV whose header names those fields")
      ->type_name("")
      ->required();
  command.add_option("--workload", arguments.workload, "the workload of samples that name none")
      ->type_name("NAME");
}

// Reads a telemetry file (ParseTelemetryText names it in errors).
absl::StatusOr<std::vector<v1::TelemetrySample>> ReadTelemetryFile(
    const std::string& path, const std::string& default_workload) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return UsageError(absl::StrCat("telemetry file \"", path, "\": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTelemetryText(text.str(), path, default_workload);
}

absl::Status RunTelemetrySend(const Invocation& invocation) {
  const CommandArguments& arguments = invocation.arguments();
  absl::StatusOr<std::vector<v1::TelemetrySample>> samples =
      ReadTelemetryFile(arguments.file, arguments.workload);
  if (!samples.ok()) return samples.status();
  v1::ReportTelemetryResponse response;
  if (absl::Status s = invocation.Call(
          "ReportTelemetry",
          [&](grpc::ClientContext* context) {
            std::unique_ptr<grpc::ClientWriterInterface<v1::TelemetryBatch>> writer =
                invocation.autoscaler().ReportTelemetry(context, &response);
            for (size_t i = 0; i < samples->size(); i += kBatch) {
              v1::TelemetryBatch batch;
              for (size_t j = i; j < std::min(samples->size(), i + kBatch); ++j) {
                *batch.add_samples() = (*samples)[j];
              }
              if (!writer->Write(batch)) break;  // the server ended the stream: Finish says why
            }
            writer->WritesDone();
            return writer->Finish();
          });
      !s.ok()) {
    return s;
  }
  if (invocation.global().structured()) {
    if (absl::Status s = invocation.PrintMessage(response); !s.ok()) return s;
  } else {
    invocation.out() << "sent " << samples->size() << " samples: " << response.accepted()
                     << " accepted, " << response.rejected() << " rejected\n";
    for (const auto& [reason, n] : response.rejected_by_reason()) {
      invocation.out() << "  " << reason << ": " << n << "\n";
    }
    for (const std::string& error : response.errors()) invocation.out() << "  " << error << "\n";
  }
  if (response.rejected() > 0) {
    return RpcError("ReportTelemetry",
                    grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat(response.rejected(), " of ", samples->size(),
                                              " samples rejected")));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> TelemetryCommands() {
  return {
      {"telemetry send", "FILE [--workload NAME]",
       "Send usage samples (JSON lines or CSV) to the autoscaler, e.g. to try it without a "
       "cluster.",
       DefineTelemetrySend, RunTelemetrySend},
  };
}

}  // namespace evoscale::cli
