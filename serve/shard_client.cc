#include "serve/shard_client.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "serve/cq_tag.h"
#include "trainer/feature_id.h"

namespace evoscale::serve {
namespace {

const char* RoleName(v1::ReplicaRole role) {
  switch (role) {
    case v1::REPLICA_ROLE_WHOLE: return "a whole model";
    case v1::REPLICA_ROLE_SHARD: return "a shard";
    case v1::REPLICA_ROLE_FRONT: return "a front";
    default: return "an unknown role";
  }
}

// A thread's own queue for Lookup's waits, drained when the thread ends.
struct LocalQueue {
  grpc::CompletionQueue cq;
  ~LocalQueue() {
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }
};

}  // namespace

// One call's lookups: a call per shard asked, each its own tag.
struct ShardClient::Batch {
  struct One final : CqTag {
    Batch* batch = nullptr;
    uint32_t shard = 0;
    std::vector<uint32_t> positions;
    v1::LookupRequest request;
    v1::LookupResponse response;
    grpc::ClientContext context;
    grpc::Status status;
    void Proceed(bool) override {
      if (--batch->pending == 0) batch->client->Complete(batch);
    }
  };
  ShardClient* client = nullptr;
  float* out = nullptr;
  Done done;
  int pending = 0;
  std::vector<std::unique_ptr<One>> calls;  // one per shard, those with no keys unsent
};

absl::StatusOr<std::unique_ptr<ShardClient>> ShardClient::Connect(
    const std::vector<std::string>& addresses, int dim, std::chrono::milliseconds wait) {
  std::unique_ptr<ShardClient> client(new ShardClient());
  client->dim_ = dim;
  const int n = int(addresses.size());
  for (int i = 0; i < n; ++i) {
    const std::string& address = addresses[i];
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(1 << 30);
    // A shard that restarts is answering again within a second or so: reconnect that soon,
    // not after gRPC's default backoff (up to two minutes), failing calls meanwhile.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + wait);
    ctx.set_wait_for_ready(true);  // a shard still loading its rows is waited for
    v1::SyncState state;
    const grpc::Status st = v1::ModelSyncService::NewStub(channel)->GetSyncState(
        &ctx, v1::GetSyncStateRequest(), &state);
    if (!st.ok()) {
      return absl::UnavailableError(absl::StrCat("--shards ", address, " (shard ", i, " of ", n,
                                                 "): ", st.error_message()));
    }
    const bool whole_ok = n == 1 && state.role() == v1::REPLICA_ROLE_WHOLE;
    if (!whole_ok && (state.role() != v1::REPLICA_ROLE_SHARD || state.shard_index() != i ||
                      state.shard_count() != n)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--shards ", address, " is listed as shard ", i, " of ", n, " but holds ",
          state.role() == v1::REPLICA_ROLE_SHARD
              ? absl::StrCat("shard ", state.shard_index(), " of ", state.shard_count())
              : RoleName(state.role()),
          " (list the shards in order: evoscale-serve --shard I/N on each)"));
    }
    if (state.dim() != dim) {
      return absl::FailedPreconditionError(absl::StrCat("--shards ", address, " holds rows of dim ",
                                                        state.dim(), " where the front's MLP takes ",
                                                        dim));
    }
    auto shard = std::make_unique<Shard>();
    shard->address = address;
    shard->stub = v1::EmbeddingService::NewStub(channel);
    shard->version = state.sparse_version();
    client->shards_.push_back(std::move(shard));
  }
  return client;
}

void ShardClient::LookupAsync(const uint64_t* keys, size_t n, float* out,
                              grpc::CompletionQueue* cq, Done done) {
  const uint32_t count = uint32_t(shards_.size());
  auto* batch = new Batch;
  batch->client = this;
  batch->out = out;
  batch->done = std::move(done);
  for (uint32_t k = 0; k < count; ++k) {
    batch->calls.push_back(std::make_unique<Batch::One>());
    batch->calls.back()->batch = batch;
    batch->calls.back()->shard = k;
  }
  for (size_t p = 0; p < n; ++p) {
    Batch::One& one = *batch->calls[count == 1 ? 0 : trainer::ShardOfFid(keys[p], count)];
    one.positions.push_back(uint32_t(p));
    one.request.add_keys(keys[p]);
  }
  const auto deadline = std::chrono::system_clock::now() + kDeadline;
  std::vector<Batch::One*> asked;
  for (const auto& one : batch->calls) {
    if (!one->positions.empty()) asked.push_back(one.get());
  }
  batch->pending = int(asked.size());
  if (asked.empty()) {
    Complete(batch);
    return;
  }
  // Counted before any is sent: an answer may come before the last is started.
  for (Batch::One* one : asked) {
    one->context.set_deadline(deadline);
    auto rpc = shards_[one->shard]->stub->AsyncLookup(&one->context, one->request, cq);
    rpc->Finish(&one->response, &one->status, static_cast<CqTag*>(one));
  }
}

void ShardClient::Complete(Batch* batch) {
  absl::Status failed;
  const size_t dim = size_t(dim_);
  for (const auto& one : batch->calls) {
    if (one->positions.empty() || !failed.ok()) continue;
    const Shard& shard = *shards_[one->shard];
    if (!one->status.ok()) {
      failed = absl::UnavailableError(absl::StrCat("shard ", one->shard, " (", shard.address,
                                                   "): ", one->status.error_message()));
    } else if (size_t(one->response.values_size()) != one->positions.size() * dim) {
      failed = absl::InternalError(absl::StrCat("shard ", one->shard, " (", shard.address,
                                                ") answered ", one->response.values_size(),
                                                " values for ", one->positions.size(), " keys"));
    } else {
      const float* v = one->response.values().data();
      for (size_t j = 0; j < one->positions.size(); ++j) {
        std::memcpy(batch->out + size_t(one->positions[j]) * dim, v + j * dim,
                    sizeof(float) * dim);
      }
      // As its latest answer says (back to an earlier step after a rollback).
      shards_[one->shard]->version.store(one->response.sparse_version(),
                                         std::memory_order_relaxed);
    }
  }
  absl::StatusOr<int64_t> result = int64_t{0};
  if (failed.ok()) {
    int64_t oldest = std::numeric_limits<int64_t>::max();
    for (const auto& shard : shards_) {
      oldest = std::min(oldest, shard->version.load(std::memory_order_relaxed));
    }
    result = oldest;
  } else {
    result = failed;
  }
  Done done = std::move(batch->done);
  delete batch;
  done(std::move(result));
}

absl::StatusOr<int64_t> ShardClient::Lookup(const uint64_t* keys, size_t n, float* out) {
  thread_local LocalQueue queue;
  absl::StatusOr<int64_t> result;
  bool finished = false;
  LookupAsync(keys, n, out, &queue.cq, [&](absl::StatusOr<int64_t> r) {
    result = std::move(r);
    finished = true;
  });
  while (!finished) {
    void* tag;
    bool ok;
    if (!queue.cq.Next(&tag, &ok)) break;
    static_cast<CqTag*>(tag)->Proceed(ok);
  }
  return result;
}

}  // namespace evoscale::serve
