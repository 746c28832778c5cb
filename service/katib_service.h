// Katib's gRPC Suggestion service (api.v1.beta1.Suggestion): thin callback handlers that call
// KatibSuggestion, convert the status and record metrics. Katib's controller sends no token,
// so these handlers check none (evoscaled serves them on --katib-grpc, a port of their own).
#ifndef EVOSCALE_SERVICE_KATIB_SERVICE_H_
#define EVOSCALE_SERVICE_KATIB_SERVICE_H_

#include "katib/v1beta1/suggestion.grpc.pb.h"
#include "service/auth.h"
#include "service/katib/katib_suggestion.h"
#include "service/metrics.h"

namespace evoscale::service {

// Thread-safe. `katib` and `metrics` must outlive the service.
class KatibSuggestionServiceImpl final : public ::api::v1::beta1::Suggestion::CallbackService {
 public:
  KatibSuggestionServiceImpl(KatibSuggestion* katib, ServiceMetrics* metrics)
      : katib_(katib), metrics_(metrics) {}

  grpc::ServerUnaryReactor* GetSuggestions(grpc::CallbackServerContext* ctx,
                                           const ::api::v1::beta1::GetSuggestionsRequest* req,
                                           ::api::v1::beta1::GetSuggestionsReply* resp) override;
  grpc::ServerUnaryReactor* ValidateAlgorithmSettings(
      grpc::CallbackServerContext* ctx,
      const ::api::v1::beta1::ValidateAlgorithmSettingsRequest* req,
      ::api::v1::beta1::ValidateAlgorithmSettingsReply* resp) override;

 private:
  KatibSuggestion* const katib_;
  ServiceMetrics* const metrics_;
  const TokenAuth no_auth_;  // disabled: Katib sends no token
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_KATIB_SERVICE_H_
