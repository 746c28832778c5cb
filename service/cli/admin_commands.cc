// The admin commands: admin backup (AdminService.Backup).

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/admin.grpc.pb.h"
#include "evoscale/v1/admin.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/command.h"
#include "service/common/paths.h"

namespace evoscale::cli {
namespace {

void DefineAdminBackup(CLI::App& command, CommandArguments& arguments) {
  command
      .add_option("PATH", arguments.file,
                  "where the study database goes (a new file); the telemetry database goes "
                  "beside it, as evoscaled names it (x.db -> x.telemetry.db)")
      ->type_name("")
      ->required();
}

// Receives the backup stream into PATH and its telemetry file: each written to a temporary
// name, fsync'ed, then renamed into place once whole, so a file under either name is complete.
absl::Status RunAdminBackup(const Invocation& invocation) {
  const std::string studies = invocation.arguments().file;
  const std::string telemetry = service::TelemetryPathFor(studies);
  for (const std::string& path : {studies, telemetry}) {
    if (access(path.c_str(), F_OK) == 0) {
      return UsageError(absl::StrCat("\"", path, "\" exists; a backup goes to new files"));
    }
  }
  struct Target {
    std::string path, partial;
    FILE* file = nullptr;
    int64_t size = -1;
  };
  std::map<int, Target> targets = {
      {v1::BackupChunk::STUDIES, {studies, studies + ".partial"}},
      {v1::BackupChunk::TELEMETRY, {telemetry, telemetry + ".partial"}}};
  absl::Status local;  // a local write error (the RPC is cancelled)
  absl::Status rpc = invocation.Call("Backup", [&](grpc::ClientContext* context) {
    std::unique_ptr<grpc::ClientReaderInterface<v1::BackupChunk>> reader =
        invocation.admin().Backup(context, v1::BackupRequest());
    v1::BackupChunk chunk;
    while (local.ok() && reader->Read(&chunk)) {
      auto it = targets.find(chunk.database());
      if (it == targets.end()) {
        local = absl::InternalError(absl::StrCat("backup: unknown database ", chunk.database()));
        break;
      }
      Target& t = it->second;
      if (t.file == nullptr) t.file = std::fopen(t.partial.c_str(), "wbx");
      if (t.file == nullptr ||
          std::fwrite(chunk.data().data(), 1, chunk.data().size(), t.file) != chunk.data().size()) {
        local = absl::InternalError(absl::StrCat("\"", t.partial, "\": ", std::strerror(errno)));
        break;
      }
      if (chunk.last()) t.size = chunk.size();
    }
    if (!local.ok()) context->TryCancel();
    return reader->Finish();
  });
  for (auto& [database, t] : targets) {
    if (t.file != nullptr) {
      const bool synced = std::fflush(t.file) == 0 && fsync(fileno(t.file)) == 0;
      if (std::fclose(t.file) != 0 || !synced) {
        if (local.ok())
          local = absl::InternalError(absl::StrCat("\"", t.partial, "\": ", std::strerror(errno)));
      }
    }
  }
  absl::Status status = !local.ok() ? local : rpc;
  if (status.ok()) {
    for (auto& [database, t] : targets) {
      if (t.size < 0) {
        status =
            absl::InternalError(absl::StrCat("backup: \"", t.path, "\" was not received whole"));
      }
    }
  }
  if (!status.ok()) {
    for (auto& [database, t] : targets) std::remove(t.partial.c_str());
    return status;
  }
  for (auto& [database, t] : targets) {
    if (std::rename(t.partial.c_str(), t.path.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("\"", t.path, "\": ", std::strerror(errno)));
    }
  }
  invocation.out() << "backup: " << studies << " (" << targets[v1::BackupChunk::STUDIES].size
                   << " bytes), " << telemetry << " (" << targets[v1::BackupChunk::TELEMETRY].size
                   << " bytes)\nrestore: stop evoscaled, then start it with --db " << studies
                   << "\n";
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> AdminCommands() {
  return {
      {"admin backup", "PATH",
       "Copy evoscaled's databases while it serves (a consistent snapshot) into PATH and "
       "its telemetry file; needs the admin role.",
       DefineAdminBackup, RunAdminBackup},
  };
}

}  // namespace evoscale::cli
