// The gRPC edge of evoscale-serve: evoscale.v1.PredictionService (proto/evoscale/v1/serving.proto)
// over a Model, converting requests into the trainer's feature layout once, here.
#ifndef EVOSCALE_SERVE_PREDICTION_SERVICE_H_
#define EVOSCALE_SERVE_PREDICTION_SERVICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "evoscale/v1/serving.pb.h"
#include "grpcpp/support/status.h"
#include "serve/model.h"
#include "serve/serve_metrics.h"

namespace evoscale::serve {

// The request's examples as the model takes them: dense (n, kNumDense) transformed, fids
// (n, kNumCategorical). INVALID_ARGUMENT naming the example and field: an empty batch, more
// than max_batch examples, a wrong number of numeric or categorical features, a categorical
// value that is not hex of at most 16 digits. On error nothing is filled that counts.
absl::Status ExamplesFromRequest(const v1::PredictRequest& request, int max_batch,
                                 std::vector<float>* dense, std::vector<uint64_t>* fids);

// Predict's answers (PredictServer calls Handle on its threads). Thread-safe; the model and
// metrics must outlive it.
class PredictionService {
 public:
  PredictionService(const Model* model, ServeMetrics* metrics, int max_batch)
      : model_(model), metrics_(metrics), max_batch_(max_batch) {}

  grpc::Status Handle(const v1::PredictRequest& request, v1::PredictResponse* response);

 private:
  const Model* const model_;
  ServeMetrics* const metrics_;
  const int max_batch_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_PREDICTION_SERVICE_H_
