#include "serve/shard_client.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "serve/cq_tag.h"
#include "serve/replica_channel.h"
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

// One LookupAsync's keys, by shard, until every shard asked has answered them.
struct ShardClient::Batch {
  struct One {
    Batch* batch = nullptr;
    std::vector<uint32_t> positions;  // into out
    std::vector<uint64_t> keys;
    grpc::Status status;  // the answer's that carried these keys
  };
  float* out = nullptr;
  Done done;
  int pending = 0;
  std::vector<One> calls;  // one per shard; those with no keys never sent
};

// Per shard, the one call in flight from a queue, and the keys of the batches that came
// while it was out: they go together in the next call when it answers. Under load the calls
// carry more batches each (a shard gets fewer, larger calls); alone, a batch goes at once.
struct ShardClient::Flight final : CqTag {
  ShardClient* client = nullptr;
  uint32_t shard = 0;
  grpc::CompletionQueue* cq = nullptr;
  bool in_flight = false;
  std::vector<Batch::One*> waiting, sent;
  v1::LookupRequest request;
  v1::LookupResponse response;
  std::unique_ptr<grpc::ClientContext> context;
  grpc::Status status;
  void Proceed(bool) override { client->Answered(*this); }
};

absl::StatusOr<std::unique_ptr<ShardClient>> ShardClient::Connect(
    const std::vector<std::string>& addresses, int dim, std::chrono::milliseconds wait) {
  std::unique_ptr<ShardClient> client(new ShardClient());
  client->dim_ = dim;
  const int n = int(addresses.size());
  for (int i = 0; i < n; ++i) {
    const std::string& address = addresses[i];
    grpc::ChannelArguments args = ReplicaChannelArgs();
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

ShardClient::~ShardClient() = default;

std::vector<std::unique_ptr<ShardClient::Flight>>& ShardClient::FlightsOf(
    grpc::CompletionQueue* cq) {
  absl::MutexLock lock(&mu_);
  std::vector<std::unique_ptr<Flight>>& flights = flights_[cq];
  if (flights.empty()) {
    for (uint32_t k = 0; k < uint32_t(shards_.size()); ++k) {
      flights.push_back(std::make_unique<Flight>());
      flights.back()->client = this;
      flights.back()->shard = k;
      flights.back()->cq = cq;
    }
  }
  return flights;
}

void ShardClient::LookupAsync(const uint64_t* keys, size_t n, float* out,
                              grpc::CompletionQueue* cq, Done done) {
  const uint32_t count = uint32_t(shards_.size());
  auto* batch = new Batch;
  batch->out = out;
  batch->done = std::move(done);
  batch->calls.resize(count);
  for (size_t p = 0; p < n; ++p) {
    Batch::One& one = batch->calls[count == 1 ? 0 : trainer::ShardOfFid(keys[p], count)];
    one.positions.push_back(uint32_t(p));
    one.keys.push_back(keys[p]);
  }
  for (Batch::One& one : batch->calls) {
    one.batch = batch;
    batch->pending += !one.keys.empty();
  }
  if (batch->pending == 0) {
    Complete(batch);
    return;
  }
  // Every part queued before any is sent: an answer may come before the last is started.
  std::vector<std::unique_ptr<Flight>>& flights = FlightsOf(cq);
  for (uint32_t k = 0; k < count; ++k) {
    if (!batch->calls[k].keys.empty()) flights[k]->waiting.push_back(&batch->calls[k]);
  }
  for (uint32_t k = 0; k < count; ++k) {
    if (!flights[k]->in_flight && !flights[k]->waiting.empty()) Send(*flights[k]);
  }
}

void ShardClient::Send(Flight& flight) {
  flight.sent.swap(flight.waiting);
  flight.waiting.clear();
  flight.request.clear_keys();
  for (const Batch::One* one : flight.sent) {
    flight.request.mutable_keys()->Add(one->keys.begin(), one->keys.end());
  }
  flight.response.Clear();
  flight.context = std::make_unique<grpc::ClientContext>();
  flight.context->set_deadline(std::chrono::system_clock::now() + kDeadline);
  flight.in_flight = true;
  auto rpc = shards_[flight.shard]->stub->AsyncLookup(flight.context.get(), flight.request,
                                                       flight.cq);
  rpc->Finish(&flight.response, &flight.status, static_cast<CqTag*>(&flight));
}

void ShardClient::Answered(Flight& flight) {
  flight.in_flight = false;
  Shard& shard = *shards_[flight.shard];
  const size_t dim = size_t(dim_);
  grpc::Status status = flight.status;
  if (status.ok() && size_t(flight.response.values_size()) != size_t(flight.request.keys_size()) * dim) {
    status = grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("answered ", flight.response.values_size(), " values for ",
                                       flight.request.keys_size(), " keys"));
  }
  // As its latest answer says (back to an earlier step after a rollback).
  if (status.ok()) shard.version.store(flight.response.sparse_version(), std::memory_order_relaxed);
  const float* v = flight.response.values().data();
  std::vector<Batch::One*> sent;
  sent.swap(flight.sent);
  for (Batch::One* one : sent) {
    if (status.ok()) {
      for (size_t j = 0; j < one->positions.size(); ++j, v += dim) {
        std::memcpy(one->batch->out + size_t(one->positions[j]) * dim, v, sizeof(float) * dim);
      }
    }
    one->status = status;
    Batch* batch = one->batch;
    if (--batch->pending == 0) Complete(batch);  // deletes batch and its parts
  }
  if (!flight.waiting.empty()) Send(flight);
}

void ShardClient::Complete(Batch* batch) {
  absl::Status failed;
  for (uint32_t k = 0; k < uint32_t(batch->calls.size()) && failed.ok(); ++k) {
    const Batch::One& one = batch->calls[k];
    if (!one.keys.empty() && !one.status.ok()) {
      failed = absl::UnavailableError(absl::StrCat("shard ", k, " (", shards_[k]->address,
                                                   "): ", one.status.error_message()));
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
