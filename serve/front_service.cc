#include "serve/front_service.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "serve/prediction_service.h"
#include "service/common/grpc_status.h"
#include "trainer/criteo_reader.h"

namespace evoscale::serve {
namespace {

// One Predict call while its rows are looked up.
struct Pending {
  std::chrono::steady_clock::time_point start;
  std::vector<float> dense, rows;
  std::vector<uint64_t> fids;
  int n = 0;
  v1::PredictResponse* response = nullptr;
  PredictServer::Finish finish;
};

}  // namespace

void FrontService::Handle(const v1::PredictRequest& request, v1::PredictResponse* response,
                          grpc::CompletionQueue* cq, PredictServer::Finish finish) {
  auto call = std::make_unique<Pending>();
  call->start = std::chrono::steady_clock::now();
  const absl::Status parsed = ExamplesFromRequest(request, max_batch_, &call->dense, &call->fids);
  if (!parsed.ok()) {
    metrics_->RecordRequest(
        "INVALID_ARGUMENT", 0,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - call->start).count());
    finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(parsed.message())));
    return;
  }
  call->n = request.examples_size();
  call->rows.resize(size_t(call->n) * trainer::kNumCategorical * size_t(model_->info().dim));
  call->response = response;
  call->finish = std::move(finish);
  Pending* c = call.release();  // until the shards answer
  shards_->LookupAsync(
      c->fids.data(), c->fids.size(), c->rows.data(), cq, [this, c](absl::StatusOr<int64_t> version) {
        std::unique_ptr<Pending> call(c);
        if (version.ok()) {
          call->response->mutable_probabilities()->Resize(call->n, 0.0f);
          model_->ScoreRows(call->dense.data(), call->rows.data(), call->n, *version,
                            call->response->mutable_probabilities()->mutable_data());
          call->response->set_sparse_version(model_->sparse_version());
          call->response->set_dense_version(model_->dense_version());
        }
        metrics_->RecordRequest(
            service::StatusCodeName(version.status().code()), version.ok() ? call->n : 0,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - call->start)
                .count());
        call->finish(service::ToGrpcStatus(version.status()));
      });
}

}  // namespace evoscale::serve
