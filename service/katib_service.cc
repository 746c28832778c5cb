#include "service/katib_service.h"

#include "service/internal/rpc.h"

namespace evoscale::service {

namespace katib = ::api::v1::beta1;

// GetSuggestions runs on the gRPC thread: Katib calls it once per experiment at a time, and
// its study-core calls answer once durable.
grpc::ServerUnaryReactor* KatibSuggestionServiceImpl::GetSuggestions(
    grpc::CallbackServerContext* ctx, const katib::GetSuggestionsRequest* req,
    katib::GetSuggestionsReply* resp) {
  return internal::HandleUnary(ctx, "GetSuggestions", Role::kWriter, no_auth_, *metrics_, [&] {
    return internal::Assign(katib_->GetSuggestions(*req), resp);
  });
}

grpc::ServerUnaryReactor* KatibSuggestionServiceImpl::ValidateAlgorithmSettings(
    grpc::CallbackServerContext* ctx, const katib::ValidateAlgorithmSettingsRequest* req,
    katib::ValidateAlgorithmSettingsReply* /*resp*/) {
  return internal::HandleUnary(ctx, "ValidateAlgorithmSettings", Role::kReader, no_auth_, *metrics_,
                               [&] { return katib_->ValidateAlgorithmSettings(*req); });
}

}  // namespace evoscale::service
