#include "serve/shard_client.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
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

// One thread's calls in flight: its completion queue (drained when the thread ends) and, per
// shard, the keys asked, their positions in the call and the call's state.
struct Calls {
  struct One {
    std::vector<uint32_t> positions;
    v1::LookupRequest request;
    v1::LookupResponse response;
    std::unique_ptr<grpc::ClientContext> context;
    grpc::Status status;
  };
  grpc::CompletionQueue cq;
  std::vector<One> shards;
  ~Calls() {
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardClient>> ShardClient::Connect(
    const std::vector<std::string>& addresses, int dim, std::chrono::milliseconds wait) {
  std::unique_ptr<ShardClient> client(new ShardClient());
  client->dim_ = dim;
  const int n = int(addresses.size());
  for (int i = 0; i < n; ++i) {
    const std::string& address = addresses[i];
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(1 << 30);
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

absl::StatusOr<int64_t> ShardClient::Lookup(const uint64_t* keys, size_t n, float* out) {
  thread_local Calls calls;
  const uint32_t count = uint32_t(shards_.size());
  calls.shards.resize(count);
  for (Calls::One& one : calls.shards) {
    one.positions.clear();
    one.request.clear_keys();
  }
  for (size_t p = 0; p < n; ++p) {
    Calls::One& one = calls.shards[count == 1 ? 0 : trainer::ShardOfFid(keys[p], count)];
    one.positions.push_back(uint32_t(p));
    one.request.add_keys(keys[p]);
  }
  const auto deadline = std::chrono::system_clock::now() + kDeadline;
  int in_flight = 0;
  for (uint32_t k = 0; k < count; ++k) {
    Calls::One& one = calls.shards[k];
    if (one.positions.empty()) continue;
    one.context = std::make_unique<grpc::ClientContext>();
    one.context->set_deadline(deadline);
    one.response.Clear();
    auto rpc = shards_[k]->stub->AsyncLookup(one.context.get(), one.request, &calls.cq);
    rpc->Finish(&one.response, &one.status, reinterpret_cast<void*>(uintptr_t(k)));
    ++in_flight;
  }
  for (; in_flight > 0; --in_flight) {
    void* tag;
    bool ok;
    calls.cq.Next(&tag, &ok);
  }
  absl::Status failed;
  const size_t dim = size_t(dim_);
  for (uint32_t k = 0; k < count && failed.ok(); ++k) {
    Calls::One& one = calls.shards[k];
    if (one.positions.empty()) continue;
    if (!one.status.ok()) {
      failed = absl::UnavailableError(absl::StrCat("shard ", k, " (", shards_[k]->address,
                                                   "): ", one.status.error_message()));
    } else if (size_t(one.response.values_size()) != one.positions.size() * dim) {
      failed = absl::InternalError(absl::StrCat("shard ", k, " (", shards_[k]->address,
                                                ") answered ", one.response.values_size(),
                                                " values for ", one.positions.size(), " keys"));
    } else {
      const float* v = one.response.values().data();
      for (size_t j = 0; j < one.positions.size(); ++j) {
        std::memcpy(out + size_t(one.positions[j]) * dim, v + j * dim, sizeof(float) * dim);
      }
      int64_t seen = shards_[k]->version.load(std::memory_order_relaxed);
      while (one.response.sparse_version() > seen &&
             !shards_[k]->version.compare_exchange_weak(seen, one.response.sparse_version())) {
      }
    }
  }
  if (!failed.ok()) return failed;
  int64_t oldest = std::numeric_limits<int64_t>::max();
  for (const auto& shard : shards_) {
    oldest = std::min(oldest, shard->version.load(std::memory_order_relaxed));
  }
  return oldest;
}

}  // namespace evoscale::serve
