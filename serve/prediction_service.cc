#include "serve/prediction_service.h"

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/common/grpc_status.h"
#include "trainer/criteo_reader.h"

namespace evoscale::serve {
namespace {

using trainer::kNumCategorical;
using trainer::kNumDense;

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    default: return "OTHER";
  }
}

}  // namespace

absl::Status ExamplesFromRequest(const v1::PredictRequest& request, int max_batch,
                                 std::vector<float>* dense, std::vector<uint64_t>* fids) {
  const int n = request.examples_size();
  if (n == 0) return absl::InvalidArgumentError("examples: empty batch (send at least one)");
  if (n > max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("examples: ", n, " examples, over this server's --max-batch ", max_batch));
  }
  dense->resize(size_t(n) * kNumDense);
  fids->resize(size_t(n) * kNumCategorical);
  for (int i = 0; i < n; ++i) {
    const v1::Example& e = request.examples(i);
    if (e.numeric_size() != kNumDense) {
      return absl::InvalidArgumentError(absl::StrCat("examples[", i, "].numeric: ",
                                                     e.numeric_size(), " values, the model takes ",
                                                     kNumDense));
    }
    if (e.categorical_size() != kNumCategorical) {
      return absl::InvalidArgumentError(
          absl::StrCat("examples[", i, "].categorical: ", e.categorical_size(),
                       " values, the model takes ", kNumCategorical));
    }
    float* d = dense->data() + size_t(i) * kNumDense;
    for (int f = 0; f < kNumDense; ++f) d[f] = trainer::DenseFeature(e.numeric(f));
    uint64_t* ids = fids->data() + size_t(i) * kNumCategorical;
    for (int f = 0; f < kNumCategorical; ++f) {
      const std::string& text = e.categorical(f);
      if (!trainer::ParseCategoricalFeature(text, f, &ids[f])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "examples[", i, "].categorical[", f, "]: \"", absl::string_view(text).substr(0, 32),
            text.size() > 32 ? "..." : "", "\" is not a hex value of at most 16 digits"));
      }
    }
  }
  return absl::OkStatus();
}

grpc::Status PredictionService::Handle(const v1::PredictRequest& request,
                                       v1::PredictResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  // Each server thread keeps its buffers from call to call.
  thread_local std::vector<float> dense;
  thread_local std::vector<uint64_t> fids;
  const absl::Status parsed = ExamplesFromRequest(request, max_batch_, &dense, &fids);
  grpc::Status status;
  int answered = 0;
  if (!parsed.ok()) {
    status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(parsed.message()));
  } else {
    const int n = request.examples_size();
    response->mutable_probabilities()->Resize(n, 0.0f);
    const absl::Status scored = model_->Predict(dense.data(), fids.data(), n,
                                                response->mutable_probabilities()->mutable_data());
    if (scored.ok()) {
      answered = n;
      response->set_sparse_version(model_->sparse_version());
      response->set_dense_version(model_->dense_version());
    } else {
      response->Clear();
      status = service::ToGrpcStatus(scored);
    }
  }
  metrics_->RecordRequest(
      CodeName(status.error_code()), answered,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return status;
}

}  // namespace evoscale::serve
