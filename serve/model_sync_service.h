// The gRPC edge of online updates: evoscale.v1.ModelSyncService (serving.proto) over a Model,
// on gRPC's synchronous API beside PredictServer's Predict. Each push is converted once here
// and applied whole or refused; every push is counted on /metrics by kind and result.
#ifndef EVOSCALE_SERVE_MODEL_SYNC_SERVICE_H_
#define EVOSCALE_SERVE_MODEL_SYNC_SERVICE_H_

#include "evoscale/v1/serving.grpc.pb.h"
#include "serve/model.h"
#include "serve/serve_metrics.h"

namespace evoscale::serve {

// Thread-safe; the model and metrics must outlive it.
class ModelSyncService final : public v1::ModelSyncService::Service {
 public:
  ModelSyncService(Model* model, ServeMetrics* metrics) : model_(model), metrics_(metrics) {}

  grpc::Status PushRows(grpc::ServerContext* context, const v1::PushRowsRequest* request,
                        v1::PushResponse* response) override;
  grpc::Status PushDense(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::PushResponse, v1::DenseChunk>* stream) override;
  grpc::Status GetSyncState(grpc::ServerContext* context, const v1::GetSyncStateRequest* request,
                            v1::SyncState* response) override;
  grpc::Status Reload(grpc::ServerContext* context, const v1::ReloadRequest* request,
                      v1::SyncState* response) override;

 private:
  // The push's outcome counted and converted (FAILED_PRECONDITION: stale).
  grpc::Status Done(const char* kind, const absl::Status& status, v1::PushResponse* response);

  Model* const model_;
  ServeMetrics* const metrics_;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_MODEL_SYNC_SERVICE_H_
