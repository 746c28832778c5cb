// A front's rows (evoscale-serve --shards ADDR,...; Model::LoadFront): each call's ids grouped
// by the shard that holds them (trainer::ShardOfFid over the shards, as the shards loaded
// them), one EmbeddingService.Lookup per shard asked, all in flight at once on a completion
// queue the caller drains: the front's server threads start them on their own queues and go on
// answering other calls meanwhile (LookupAsync); Lookup waits for them on a queue of its own.
// From each queue at most one call per shard is in flight: the keys of calls that come
// meanwhile wait and go together in the next (fewer, larger lookups under load; none delayed
// when the shard is idle).
#ifndef EVOSCALE_SERVE_SHARD_CLIENT_H_
#define EVOSCALE_SERVE_SHARD_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "serve/model.h"

namespace evoscale::serve {

class ShardClient final : public RowSource {
 public:
  // addresses[i] holds shard i of addresses.size(). Waits up to `wait` for each to answer its
  // SyncState: UNAVAILABLE naming --shards and the address that did not; FAILED_PRECONDITION
  // naming it and what differs when it holds another shard, another count of shards, or rows
  // of another dim than `dim`.
  static absl::StatusOr<std::unique_ptr<ShardClient>> Connect(
      const std::vector<std::string>& addresses, int dim, std::chrono::milliseconds wait);

  // Starts the lookups of n keys on `cq` (its drainer calls CqTag::Proceed on each tag); `done`
  // runs on that thread once every shard asked has answered: out (n x dim) filled and the
  // shards' oldest sparse version, or UNAVAILABLE naming a shard that did not answer. keys and
  // out must live until then.
  using Done = std::function<void(absl::StatusOr<int64_t> version)>;
  void LookupAsync(const uint64_t* keys, size_t n, float* out, grpc::CompletionQueue* cq,
                   Done done);
  // The same, waited for.
  absl::StatusOr<int64_t> Lookup(const uint64_t* keys, size_t n, float* out) override;
  ~ShardClient() override;

  // Each call's deadline: a shard that does not answer within it fails the call (UNAVAILABLE
  // naming it) rather than holding the front's thread.
  static constexpr std::chrono::milliseconds kDeadline{2000};

 private:
  struct Shard {
    std::string address;
    std::unique_ptr<v1::EmbeddingService::Stub> stub;
    std::atomic<int64_t> version{0};  // as its latest answer named it
  };
  struct Batch;
  struct Flight;
  ShardClient() = default;
  // The calls in flight from `cq` (one Flight per shard, made at its first use).
  std::vector<std::unique_ptr<Flight>>& FlightsOf(grpc::CompletionQueue* cq);
  // The flight's waiting keys, in one call.
  void Send(Flight& flight);
  // Its call answered: the values to their batches, the next call if keys wait.
  void Answered(Flight& flight);
  // Every answer of `batch` in: done called, batch deleted.
  void Complete(Batch* batch);

  int dim_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
  absl::Mutex mu_;
  absl::flat_hash_map<grpc::CompletionQueue*, std::vector<std::unique_ptr<Flight>>> flights_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_SHARD_CLIENT_H_
