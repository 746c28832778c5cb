// The gRPC edge of a shard replica (evoscale-serve --shard I/N): evoscale.v1.EmbeddingService's
// answers over its Model, for its fronts (PredictServer calls Handle on its threads, as it does
// Predict's).
#ifndef EVOSCALE_SERVE_EMBEDDING_SERVICE_H_
#define EVOSCALE_SERVE_EMBEDDING_SERVICE_H_

#include "evoscale/v1/serving.pb.h"
#include "grpcpp/support/status.h"
#include "serve/model.h"
#include "serve/serve_metrics.h"

namespace evoscale::serve {

// Thread-safe; the model and metrics must outlive it.
class EmbeddingService {
 public:
  EmbeddingService(const Model* model, ServeMetrics* metrics) : model_(model), metrics_(metrics) {}

  grpc::Status Handle(const v1::LookupRequest& request, v1::LookupResponse* response);

 private:
  const Model* const model_;
  ServeMetrics* const metrics_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_EMBEDDING_SERVICE_H_
