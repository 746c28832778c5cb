#include "serve/model_sync_service.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/common/grpc_status.h"

namespace evoscale::serve {

grpc::Status ModelSyncService::Done(const char* kind, const absl::Status& status,
                                    v1::PushResponse* response) {
  const char* result = status.ok()                   ? "applied"
                       : absl::IsFailedPrecondition(status) ? "stale"
                                                            : "invalid";
  metrics_->RecordPush(kind, result);
  response->set_sparse_version(model_->sparse_version());
  response->set_dense_version(model_->dense_version());
  if (status.ok()) {
    metrics_->SetModel(model_->sparse_version(), model_->dense_version(), model_->rows(),
                       model_->memory_bytes(), size_t(response->rows_applied()),
                       std::chrono::system_clock::now());
  }
  return service::ToGrpcStatus(status);
}

grpc::Status ModelSyncService::PushRows(grpc::ServerContext*, const v1::PushRowsRequest* request,
                                        v1::PushResponse* response) {
  RowUpdate u;
  u.source = request->source();
  u.version = request->version();
  u.dim = request->dim();
  u.keys = request->keys().data();
  u.rows = size_t(request->keys_size());
  u.values = request->values().data();
  u.value_count = size_t(request->values_size());
  u.erased = request->erased().data();
  u.erased_count = size_t(request->erased_size());
  u.part = request->part();
  u.parts = request->parts();
  absl::StatusOr<size_t> applied = model_->ApplyRows(u);
  if (applied.ok()) response->set_rows_applied(int64_t(*applied));
  return Done("rows", applied.status(), response);
}

grpc::Status ModelSyncService::PushDense(
    grpc::ServerContext*, grpc::ServerReaderWriter<v1::PushResponse, v1::DenseChunk>* stream) {
  v1::PushResponse answer;
  v1::PushResponse* const response = &answer;
  v1::DenseChunk chunk;
  if (!stream->Read(&chunk)) {
    return Done("dense", absl::InvalidArgumentError("no chunks: the first names the version"),
                response);
  }
  const int64_t version = chunk.version();
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(chunk.mlp_sizes(), ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return Done("dense",
                  absl::InvalidArgumentError(absl::StrCat(
                      "mlp_sizes: \"", chunk.mlp_sizes(), "\" is not a list of widths")),
                  response);
    }
    sizes.push_back(v);
  }
  absl::StatusOr<std::unique_ptr<trainer::Mlp>> mlp = model_->NewDense(version, sizes);
  if (!mlp.ok()) return Done("dense", mlp.status(), response);
  std::vector<float>& params = (*mlp)->params();
  if (chunk.total_params() != int64_t(params.size())) {
    return Done("dense",
                absl::InvalidArgumentError(absl::StrCat("total_params: ", chunk.total_params(),
                                                        " where the MLP has ", params.size())),
                response);
  }
  // Each chunk straight into the new weights, then acknowledged: the sender waits for that
  // before the next, so one chunk is held beside them, never the rest of the stream.
  const v1::PushResponse ack;
  size_t filled = 0;
  do {
    if (filled + size_t(chunk.params_size()) > params.size()) {
      return Done("dense",
                  absl::InvalidArgumentError(absl::StrCat("params: more than total_params ",
                                                          params.size())),
                  response);
    }
    std::copy(chunk.params().begin(), chunk.params().end(), params.begin() + filled);
    filled += size_t(chunk.params_size());
    stream->Write(ack);  // a sender gone is seen by the next Read
  } while (stream->Read(&chunk));
  if (filled != params.size()) {
    return Done("dense",
                absl::InvalidArgumentError(absl::StrCat("params: ", filled, " of total_params ",
                                                        params.size(), " arrived")),
                response);
  }
  grpc::Status done = Done("dense", model_->SwapDense(version, *std::move(mlp)), response);
  if (done.ok()) stream->Write(answer);
  return done;
}

grpc::Status ModelSyncService::GetSyncState(grpc::ServerContext*, const v1::GetSyncStateRequest*,
                                            v1::SyncState* response) {
  response->set_sparse_version(model_->sparse_version());
  response->set_dense_version(model_->dense_version());
  response->set_checkpoint_step(model_->checkpoint_step());
  const Placement& where = model_->info().placement;
  response->set_role(where.front         ? v1::REPLICA_ROLE_FRONT
                     : where.shards > 1  ? v1::REPLICA_ROLE_SHARD
                                         : v1::REPLICA_ROLE_WHOLE);
  response->set_shard_index(where.shard);
  response->set_shard_count(where.shards);
  response->set_dim(model_->info().dim);
  for (const auto& [source, version] : model_->source_versions()) {
    (*response->mutable_source_versions())[source] = version;
  }
  return grpc::Status::OK;
}

grpc::Status ModelSyncService::Reload(grpc::ServerContext* context, const v1::ReloadRequest*,
                                      v1::SyncState* response) {
  const absl::Status status = model_->Reload();
  metrics_->RecordPush("reload", status.ok() ? "applied" : "invalid");
  if (!status.ok()) return service::ToGrpcStatus(status);
  metrics_->SetModel(model_->sparse_version(), model_->dense_version(), model_->rows(),
                     model_->memory_bytes(), 0, std::chrono::system_clock::now());
  return GetSyncState(context, nullptr, response);
}

}  // namespace evoscale::serve
