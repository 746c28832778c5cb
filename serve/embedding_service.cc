#include "serve/embedding_service.h"

#include <chrono>
#include <string>

#include "service/common/grpc_status.h"

namespace evoscale::serve {

// Counted on /metrics as Predict calls are: one request per call, its keys as its examples.
grpc::Status EmbeddingService::Handle(const v1::LookupRequest& request,
                                      v1::LookupResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  const size_t n = size_t(request.keys_size());
  // Read before the rows: an answer is at least as new as the version it names.
  response->set_sparse_version(model_->sparse_version());
  response->mutable_values()->Resize(int(n * size_t(model_->info().dim)), 0.0f);
  const absl::Status status =
      model_->Lookup(request.keys().data(), n, response->mutable_values()->mutable_data());
  if (!status.ok()) response->Clear();
  metrics_->RecordRequest(
      service::StatusCodeName(status.code()), status.ok() ? int(n) : 0,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return service::ToGrpcStatus(status);
}

}  // namespace evoscale::serve
