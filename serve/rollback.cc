#include "serve/rollback.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "serve/model.h"
#include "trainer/internal/checkpoint_layout.h"

namespace evoscale::serve {
namespace {

namespace fs = std::filesystem;

// Moves the checkpoints newer than `to` aside; false (having said why) on the first failure.
bool MoveNewer(const std::string& dir, const Model::Checkpoints& list, int64_t to,
               std::ostream& out, std::ostream& err, int* moved) {
  const fs::path root = fs::path(dir).lexically_normal();
  const fs::path aside = fs::path(root.string() + ".rolled-back") /
                         absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone());
  for (const std::string& folder : list.folders) {
    const fs::path relative = fs::path(folder).lexically_normal().lexically_relative(root);
    for (const fs::path& from : trainer::internal::CheckpointFolders(folder, to)) {
      const fs::path target =
          (relative == "." ? aside : aside / relative) / from.filename();
      std::error_code ec;
      fs::create_directories(target.parent_path(), ec);
      if (!ec) fs::rename(from, target, ec);
      if (ec) {
        err << "evoscale-serve rollback: cannot move " << from.string() << " to "
            << target.string() << ": " << ec.message() << "\n";
        return false;
      }
      ++*moved;
      out << nlohmann::json{{"event", "moved"}, {"from", from.string()}, {"to", target.string()}}
                 .dump()
          << std::endl;
    }
  }
  return true;
}

// Asks one replica to reload; false (having said why) when it did not.
bool ReloadReplica(const std::string& address, int64_t to, std::ostream& out, std::ostream& err) {
  auto stub = v1::ModelSyncService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::SyncState state;
  const grpc::Status status = stub->Reload(&ctx, v1::ReloadRequest(), &state);
  if (!status.ok()) {
    err << "evoscale-serve rollback: --replicas " << address << ": " << status.error_message()
        << "\n";
    return false;
  }
  out << nlohmann::json{{"event", "reloaded"},
                        {"replica", address},
                        {"checkpoint_step", state.checkpoint_step()},
                        {"sparse_version", state.sparse_version()},
                        {"dense_version", state.dense_version()}}
             .dump()
      << std::endl;
  if (state.checkpoint_step() != to) {
    err << "evoscale-serve rollback: --replicas " << address << " serves step "
        << state.checkpoint_step() << ", not " << to << " (its --model-dir is another folder?)\n";
    return false;
  }
  return true;
}

}  // namespace

int RollbackMain(int argc, char** argv, std::ostream& out, std::ostream& err) {
  std::string dir, replicas;
  int64_t to = -1;
  CLI::App app("evoscale-serve rollback: serve an earlier checkpoint again",
               "evoscale-serve rollback");
  app.add_option("--model-dir", dir, "the trainer's --checkpoint-dir the replicas serve")
      ->required();
  app.add_option("--to", to, "the step of the checkpoint to serve")->required()->check(
      CLI::NonNegativeNumber);
  app.add_option("--replicas", replicas, "HOST:PORT,... of the replicas to reload");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  absl::StatusOr<Model::Checkpoints> list = Model::ListCheckpoints(dir);
  if (!list.ok()) {
    err << "evoscale-serve rollback: " << list.status().message() << "\n";
    return 1;
  }
  if (std::find(list->steps.begin(), list->steps.end(), to) == list->steps.end()) {
    err << "evoscale-serve rollback: --to " << to << ": " << dir
        << " holds no complete checkpoint of that step (it holds steps "
        << absl::StrJoin(list->steps, ", ") << ")\n";
    return 1;
  }
  int moved = 0;
  if (!MoveNewer(dir, *list, to, out, err, &moved)) return 1;
  bool ok = true;
  int reloaded = 0;
  for (absl::string_view address : absl::StrSplit(replicas, ',', absl::SkipEmpty())) {
    const bool done = ReloadReplica(std::string(address), to, out, err);
    reloaded += done;
    ok = ok && done;
  }
  out << nlohmann::json{{"event", "rolled_back"},
                        {"step", to},
                        {"moved", moved},
                        {"replicas_reloaded", reloaded}}
             .dump()
      << std::endl;
  return ok ? 0 : 1;
}

}  // namespace evoscale::serve
