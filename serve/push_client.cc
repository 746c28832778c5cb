// The trainer's side of ModelSyncService: the ModelSink (trainer/model_sink.h) that
// evoscale-trainer --serve pushes through, registered at static initialisation. Linked into
// evoscale-trainer as an object library (a static library's unreferenced registration would
// be dropped by the linker).
//
// A replica tells what it holds in its SyncState (asked before the first push and after any
// failure): a shard of a sharded table gets only its rows and erased ids (the trainer's ranks
// and the replica shards may be of different counts: each push is filtered by
// trainer::ShardOfFid over the replica shards) and no MLP; a front gets only the MLP.
#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "serve/replica_channel.h"
#include "trainer/feature_id.h"
#include "trainer/model_sink.h"

namespace evoscale::serve {
namespace {

// Floats per DenseChunk: 64 KiB, a ninth of the default MLP's weights. Each is sent once the
// replica has acknowledged the one before, so it holds little more than the new MLP beside the
// one it serves while it arrives (measured by bench/serve/dense_swap.py).
constexpr size_t kDenseChunk = 1 << 14;
constexpr auto kDeadline = std::chrono::seconds(30);
// Rows per PushRows message: a version's rows go in parts of this many (150 KB at dim 16), so
// that no message holds a million rows for a replica's threads to read and parse at once while
// they answer (bench/serve/push_under_load.py, 1,000,000 rows/s in 50,000-row versions: p99 of
// the answers 8.3 ms in whole messages, 3.1 ms in parts of 8,192 rows, 1.2-1.7 ms in parts of
// 2,048 or 1,024).
constexpr size_t kPartRows = 2048;

absl::Status FromGrpc(const std::string& address, const grpc::Status& st) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                      absl::StrCat(address, ": ", st.error_message()));
}

class GrpcModelSink final : public trainer::ModelSink {
 public:
  GrpcModelSink(std::string address, std::string source)
      : address_(std::move(address)),
        source_(std::move(source)),
        stub_(v1::ModelSyncService::NewStub(grpc::CreateCustomChannel(
            address_, grpc::InsecureChannelCredentials(), ReplicaChannelArgs()))) {}

  const std::string& address() const override { return address_; }

  absl::StatusOr<int64_t> AppliedVersion() override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::SyncState state;
    const grpc::Status st = stub_->GetSyncState(&ctx, v1::GetSyncStateRequest(), &state);
    if (!st.ok()) return FromGrpc(address_, st);
    role_ = state.role();
    shard_ = uint32_t(state.shard_index());
    shards_ = uint32_t(std::max(1, state.shard_count()));
    // A front holds no rows: nothing of them is missing there.
    if (role_ == v1::REPLICA_ROLE_FRONT) return std::numeric_limits<int64_t>::max();
    const auto it = state.source_versions().find(source_);
    return it == state.source_versions().end() ? state.checkpoint_step() : it->second;
  }

  absl::Status PushRows(const trainer::RowPush& push) override {
    if (role_ == v1::REPLICA_ROLE_FRONT) return absl::OkStatus();
    // This replica's rows (a shard's part only) and evicted ids.
    std::vector<uint32_t> rows;
    std::vector<uint64_t> erased;
    for (size_t i = 0; i < push.keys.size(); ++i) {
      if (shards_ <= 1 || trainer::ShardOfFid(push.keys[i], shards_) == shard_) {
        rows.push_back(uint32_t(i));
      }
    }
    for (uint64_t id : push.erased) {
      if (shards_ <= 1 || trainer::ShardOfFid(id, shards_) == shard_) erased.push_back(id);
    }
    // In parts of kPartRows (the evicted ids with the first): a version with none of its rows
    // still goes, as one empty part, to move its version.
    const size_t dim = size_t(push.dim);
    const int parts = int(std::max<size_t>(1, (rows.size() + kPartRows - 1) / kPartRows));
    for (int part = 0; part < parts; ++part) {
      v1::PushRowsRequest request;
      request.set_source(source_);
      request.set_version(push.version);
      request.set_dim(push.dim);
      request.set_part(part);
      request.set_parts(parts);
      if (part == 0) request.mutable_erased()->Add(erased.begin(), erased.end());
      const size_t end = std::min(rows.size(), size_t(part + 1) * kPartRows);
      for (size_t j = size_t(part) * kPartRows; j < end; ++j) {
        const size_t i = rows[j];
        request.add_keys(push.keys[i]);
        request.mutable_values()->Add(push.values.begin() + i * dim,
                                      push.values.begin() + (i + 1) * dim);
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
      v1::PushResponse response;
      const grpc::Status st = stub_->PushRows(&ctx, request, &response);
      // A later part refused: the replica lost the earlier ones (restarted, or reloaded, in
      // between), so the version is not held there (FAILED_PRECONDITION would read as held):
      // the replica is caught up from what it does hold.
      if (part > 0 && st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        return absl::AbortedError(absl::StrCat(address_, ": ", st.error_message()));
      }
      if (!st.ok()) return FromGrpc(address_, st);
    }
    return absl::OkStatus();
  }

  absl::Status PushDense(const trainer::DensePush& push) override {
    if (role_ == v1::REPLICA_ROLE_SHARD) return absl::OkStatus();  // its front answers
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
    auto stream = stub_->PushDense(&ctx);
    v1::PushResponse answer;
    for (size_t i = 0; i == 0 || i < push.params.size(); i += kDenseChunk) {
      v1::DenseChunk chunk;
      if (i == 0) {
        chunk.set_version(push.version);
        chunk.set_mlp_sizes(absl::StrJoin(push.sizes, ","));
        chunk.set_total_params(int64_t(push.params.size()));
      }
      const size_t end = std::min(push.params.size(), i + kDenseChunk);
      chunk.mutable_params()->Add(push.params.begin() + i, push.params.begin() + end);
      // The next chunk only once the replica has taken this one (its acknowledgement).
      if (!stream->Write(chunk) || !stream->Read(&answer)) break;
    }
    stream->WritesDone();
    while (stream->Read(&answer)) {
    }  // the answer after the swap
    const grpc::Status st = stream->Finish();
    return st.ok() ? absl::OkStatus() : FromGrpc(address_, st);
  }

 private:
  const std::string address_, source_;
  std::unique_ptr<v1::ModelSyncService::Stub> stub_;
  // As the replica's last SyncState said (AppliedVersion comes before any push).
  v1::ReplicaRole role_ = v1::REPLICA_ROLE_WHOLE;
  uint32_t shard_ = 0, shards_ = 1;
};

const bool kRegistered = trainer::RegisterModelSinkFactory(
    [](const std::string& address,
       const std::string& source) -> absl::StatusOr<std::unique_ptr<trainer::ModelSink>> {
      return std::make_unique<GrpcModelSink>(address, source);
    });

}  // namespace
}  // namespace evoscale::serve
