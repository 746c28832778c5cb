// A front's rows (evoscale-serve --shards ADDR,...; Model::LoadFront): each call's ids grouped
// by the shard that holds them (trainer::ShardOfFid over the shards, as the shards loaded
// them), one EmbeddingService.Lookup per shard asked, all in flight at once, awaited on the
// calling thread's own completion queue (no hand-off to another thread).
#ifndef EVOSCALE_SERVE_SHARD_CLIENT_H_
#define EVOSCALE_SERVE_SHARD_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

  absl::StatusOr<int64_t> Lookup(const uint64_t* keys, size_t n, float* out) override;

  // Each call's deadline: a shard that does not answer within it fails the call (UNAVAILABLE
  // naming it) rather than holding the front's thread.
  static constexpr std::chrono::milliseconds kDeadline{2000};

 private:
  struct Shard {
    std::string address;
    std::unique_ptr<v1::EmbeddingService::Stub> stub;
    std::atomic<int64_t> version{0};  // the newest its answers named
  };
  ShardClient() = default;

  int dim_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_SHARD_CLIENT_H_
