// The gRPC edge of a shard replica (evoscale-serve --shard I/N): evoscale.v1.EmbeddingService
// over its Model, on gRPC's synchronous API beside PredictServer, answering its fronts.
#ifndef EVOSCALE_SERVE_EMBEDDING_SERVICE_H_
#define EVOSCALE_SERVE_EMBEDDING_SERVICE_H_

#include "evoscale/v1/serving.grpc.pb.h"
#include "serve/model.h"
#include "serve/serve_metrics.h"

namespace evoscale::serve {

// Thread-safe; the model and metrics must outlive it.
class EmbeddingService final : public v1::EmbeddingService::Service {
 public:
  EmbeddingService(const Model* model, ServeMetrics* metrics) : model_(model), metrics_(metrics) {}

  grpc::Status Lookup(grpc::ServerContext* context, const v1::LookupRequest* request,
                      v1::LookupResponse* response) override;

 private:
  const Model* const model_;
  ServeMetrics* const metrics_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_EMBEDDING_SERVICE_H_
