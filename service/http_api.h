// HttpApi: the routes of evoscaled's HTTP side (the server itself is http_server.h): /healthz,
// /metrics, the dashboard's files, the read-only JSON API under /api/v1/ and kube-scheduler's
// extender API (POST /scheduler/filter, /scheduler/prioritize, /scheduler/preempt;
// service/extender/scheduler_extender.h). Each request's
// route is parsed once into the Process* member that answers it; an error, wherever it
// arises, is rendered once, as {"error": {"code", "message"}} with its HTTP status.
#ifndef EVOSCALE_SERVICE_HTTP_API_H_
#define EVOSCALE_SERVICE_HTTP_API_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/analysis/study_analysis.h"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/http_listener.h"
#include "service/extender/scheduler_extender.h"
#include "service/metrics.h"
#include "service/study/study_core.h"

namespace evoscale::service {

// The HTTP status of a status code, as Google's APIs map them (google/rpc/code.proto):
// ALREADY_EXISTS and ABORTED 409, DEADLINE_EXCEEDED 504, UNIMPLEMENTED 501, ...
int HttpStatusFor(absl::StatusCode code);

// Thread-safe. The cores, metrics and auth must outlive it.
class HttpApi {
 public:
  HttpApi(StudyCore* core, AutoscalerCore* autoscaler, ServiceMetrics* metrics,
          const TokenAuth* auth)
      : core_(core), autoscaler_(autoscaler), metrics_(metrics), auth_(auth) {}

  // Answers one request (target = path and query). The dashboard's files need no token (the
  // page asks for one); /metrics and /api/ do (a reader's), and /scheduler/ a writer's (the
  // extender keeps the pods it assumed).
  HttpResponse Handle(const std::string& method, const std::string& target,
                      const std::string& authorization, const std::string& body = "");

 private:
  using Query = std::vector<std::pair<std::string, std::string>>;  // decoded, in order
  struct Route;
  using Process = absl::StatusOr<HttpResponse> (HttpApi::*)(const Route&, const Query&);
  // What a path names: the member that answers it and the names it carries.
  struct Route {
    Process process = nullptr;
    std::string name;   // the workload, or "studies/{s}"
    std::string trial;  // "studies/{s}/trials/{t}"
  };
  static absl::StatusOr<Route> ParseRoute(absl::string_view path);
  // POST /scheduler/{verb}.
  HttpResponse HandleExtender(const std::string& method, absl::string_view verb,
                              const std::string& authorization, const std::string& body);

  absl::StatusOr<HttpResponse> ProcessMetrics(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessListWorkloads(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessWorkload(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessWorkloadHistory(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessRecommendation(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessListStudies(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessStudy(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessTrials(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessAnalysis(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessTrial(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessTrialUsage(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessImportance(const Route& route, const Query& query);
  absl::StatusOr<HttpResponse> ProcessOptimal(const Route& route, const Query& query);

  StudyCore* const core_;
  AutoscalerCore* const autoscaler_;
  ServiceMetrics* const metrics_;
  const TokenAuth* const auth_;
  AnalysisCache analyses_;  // the analysis documents last served
  extender::SchedulerExtender extender_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_HTTP_API_H_
