// Where an online trainer's updates go (evoscale-trainer --serve ADDR,...): the current values
// of the rows it changed, and now and then its MLP, each versioned by the training step. The
// trainer knows nothing of the transport: evoscale-serve's gRPC client (serve/push_client.cc)
// registers the factory when it is linked into the binary; without one, --serve is refused.
#ifndef EVOSCALE_TRAINER_MODEL_SINK_H_
#define EVOSCALE_TRAINER_MODEL_SINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace evoscale::trainer {

struct RowPush {
  int64_t version = 0;  // the step the values are from
  int dim = 0;
  std::vector<uint64_t> keys;
  std::vector<float> values;  // keys x dim
  std::vector<uint64_t> erased;  // ids evicted: served as missing from now on
};

struct DensePush {
  int64_t version = 0;
  std::vector<int> sizes;
  std::vector<float> params;
};

// One serving replica. Calls come from one thread.
class ModelSink {
 public:
  virtual ~ModelSink() = default;
  virtual const std::string& address() const = 0;
  // The version the replica holds from this trainer (`source`): its last applied push, or the
  // step of the checkpoint it loaded when it has none from it. UNAVAILABLE when it is down.
  virtual absl::StatusOr<int64_t> AppliedVersion() = 0;
  virtual absl::Status PushRows(const RowPush& push) = 0;
  virtual absl::Status PushDense(const DensePush& push) = 0;
};

// Connects to the replica at `address` as `source` ("rank-R-of-N", or "" for one process).
using ModelSinkFactory = std::function<absl::StatusOr<std::unique_ptr<ModelSink>>(
    const std::string& address, const std::string& source)>;

// Registers the factory (once, at static initialisation, by the transport's library).
bool RegisterModelSinkFactory(ModelSinkFactory factory);
// FAILED_PRECONDITION when this binary was built without one.
absl::StatusOr<std::unique_ptr<ModelSink>> ConnectModelSink(const std::string& address,
                                                            const std::string& source);

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_MODEL_SINK_H_
