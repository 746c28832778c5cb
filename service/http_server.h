// The HTTP side of evoscaled (Boost.Beast): serves HttpApi's routes (http_api.h): /healthz,
// /metrics, the read-only JSON API under /api/v1/, and the dashboard that uses it (web/,
// compiled in: /, /app.js, /style.css).
#ifndef EVOSCALE_SERVICE_HTTP_SERVER_H_
#define EVOSCALE_SERVICE_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "service/auth.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/http_api.h"
#include "service/metrics.h"
#include "service/study/study_core.h"

namespace evoscale::service {

// TLS for a listener: PEM texts (not paths). No certificate: plaintext.
struct TlsConfig {
  std::string cert_pem;       // the server's certificate chain
  std::string key_pem;        // its private key
  std::string client_ca_pem;  // not empty: mutual TLS, clients must show a certificate it signed
  bool enabled() const { return !cert_pem.empty(); }
};

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

  int port() const { return port_; }

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_HTTP_SERVER_H_
