#include "service/admin_service.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/internal/rpc.h"
#include "service/store/backup.h"
#include "service/store/store.h"

namespace evoscale::service {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

// Takes the backups at once (each a consistent snapshot of its database), then streams them.
// Each copy is a temporary file beside its database, unlinked as soon as it is open, so
// nothing is left behind whatever happens to the call or the process.
class BackupStream : public grpc::ServerWriteReactor<v1::BackupChunk> {
 public:
  BackupStream(grpc::CallbackServerContext* ctx, const TokenAuth& auth, ServiceMetrics& metrics,
               const std::vector<std::pair<v1::BackupChunk::Database, std::string>>& databases)
      : metrics_(metrics), start_(std::chrono::steady_clock::now()) {
    absl::Status status = internal::Authorize(ctx, auth, Role::kAdmin);
    static std::atomic<int> sequence{0};
    for (size_t i = 0; status.ok() && i < databases.size(); ++i) {
      const auto& [database, path] = databases[i];
      if (Store::IsPostgres(path)) {
        status = absl::FailedPreconditionError(
            "the studies are in PostgreSQL, which evoscale backup does not copy: back them up "
            "with pg_dump (or the database's own backups)");
        break;
      }
      const std::string copy =
          absl::StrCat(path, ".backup-", getpid(), "-", sequence.fetch_add(1), ".tmp");
      absl::StatusOr<int64_t> size = BackupDatabase(path, copy);
      if (!size.ok()) {
        status = size.status();
        break;
      }
      auto in = std::make_unique<std::ifstream>(copy, std::ios::binary);
      std::remove(copy.c_str());
      if (!*in) {
        status = absl::InternalError(absl::StrCat("backup \"", copy, "\": cannot be read"));
        break;
      }
      files_.push_back(File{database, *size, std::move(in)});
    }
    if (!status.ok()) {
      Done(status);
      return;
    }
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Done(absl::UnavailableError("the client stopped reading the backup"));
      return;
    }
    Next();
  }

  void OnDone() override { delete this; }

 private:
  struct File {
    v1::BackupChunk::Database database;
    int64_t size;
    std::unique_ptr<std::ifstream> in;
  };

  // Writes the current file's next chunk, or finishes after the last file's last chunk.
  void Next() {
    if (current_ == files_.size()) {
      Done(absl::OkStatus());
      return;
    }
    File& f = files_[current_];
    std::string data(kChunkBytes, '\0');
    f.in->read(data.data(), static_cast<std::streamsize>(data.size()));
    data.resize(static_cast<size_t>(f.in->gcount()));
    sent_ += static_cast<int64_t>(data.size());
    if (f.in->bad() || (data.empty() && sent_ < f.size)) {
      Done(absl::InternalError("backup: reading the copy failed"));
      return;
    }
    chunk_.Clear();
    chunk_.set_database(f.database);
    chunk_.set_size(f.size);
    chunk_.set_last(sent_ >= f.size);
    *chunk_.mutable_data() = std::move(data);
    if (chunk_.last()) {
      ++current_;
      sent_ = 0;
    }
    StartWrite(&chunk_);
  }

  void Done(const absl::Status& status) {
    metrics_.RecordRpc("Backup", StatusCodeName(status.code()), internal::SecondsSince(start_));
    Finish(ToGrpcStatus(status));
  }

  ServiceMetrics& metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::vector<File> files_;
  size_t current_ = 0;
  int64_t sent_ = 0;  // of the current file
  v1::BackupChunk chunk_;
};

}  // namespace

AdminServiceImpl::AdminServiceImpl(std::string db_path, std::string telemetry_db_path,
                                   const TokenAuth* auth, ServiceMetrics* metrics)
    : db_path_(std::move(db_path)),
      telemetry_db_path_(std::move(telemetry_db_path)),
      auth_(auth),
      metrics_(metrics) {}

grpc::ServerWriteReactor<v1::BackupChunk>* AdminServiceImpl::Backup(
    grpc::CallbackServerContext* ctx, const v1::BackupRequest* /*req*/) {
  return new BackupStream(
      ctx, *auth_, *metrics_,
      {{v1::BackupChunk::STUDIES, db_path_}, {v1::BackupChunk::TELEMETRY, telemetry_db_path_}});
}

}  // namespace evoscale::service
