// The gRPC edge of a front (evoscale-serve --shards ADDR,...): Predict's examples checked and
// converted as a whole replica's are (ExamplesFromRequest), their rows looked up on the shards
// on the server thread's own completion queue, and the answer scored and sent when the last
// shard answers; the thread answers other calls meanwhile (PredictServer::StartAsync).
#ifndef EVOSCALE_SERVE_FRONT_SERVICE_H_
#define EVOSCALE_SERVE_FRONT_SERVICE_H_

#include "evoscale/v1/serving.pb.h"
#include "grpcpp/grpcpp.h"
#include "serve/model.h"
#include "serve/predict_server.h"
#include "serve/serve_metrics.h"
#include "serve/shard_client.h"

namespace evoscale::serve {

// Thread-safe; the model, shards and metrics must outlive it and its calls.
class FrontService {
 public:
  FrontService(const Model* model, ShardClient* shards, ServeMetrics* metrics, int max_batch)
      : model_(model), shards_(shards), metrics_(metrics), max_batch_(max_batch) {}

  // INVALID_ARGUMENT as a whole replica answers it; UNAVAILABLE naming a shard that did not
  // answer in time.
  void Handle(const v1::PredictRequest& request, v1::PredictResponse* response,
              grpc::CompletionQueue* cq, PredictServer::Finish finish);

 private:
  const Model* const model_;
  ShardClient* const shards_;
  ServeMetrics* const metrics_;
  const int max_batch_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_FRONT_SERVICE_H_
