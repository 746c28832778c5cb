// The HTTP side of evoscaled (Boost.Beast): serves HttpApi's routes (http_api.h): /healthz,
// /metrics, the read-only JSON API under /api/v1/, and the dashboard that uses it (web/,
// compiled in: /, /app.js, /style.css).
#ifndef EVOSCALE_SERVICE_HTTP_SERVER_H_
#define EVOSCALE_SERVICE_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/auth.h"
#include "service/common/http_listener.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/http_api.h"
#include "service/metrics.h"
#include "service/study/study_core.h"

namespace evoscale::service {

// Serves HTTP/1.1 (HTTPS with `tls`) on its own threads until destroyed. Thread-safe.
class HttpServer {
 public:
  // Binds `address` ("HOST:PORT"; port 0 picks a free one) and starts serving.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           StudyCore* core,
                                                           AutoscalerCore* autoscaler,
                                                           ServiceMetrics* metrics,
                                                           const TokenAuth* auth, int threads,
                                                           const TlsConfig& tls = {});
  ~HttpServer();  // stops accepting, closes connections, joins the threads

  int port() const { return listener_->port(); }

 private:
  HttpServer() = default;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpListener> listener_;  // after api_: stops before api_ goes
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_HTTP_SERVER_H_
