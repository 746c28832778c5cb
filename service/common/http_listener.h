// HttpListener: an HTTP/1.1 server (Boost.Beast, HTTPS with a TlsConfig) that hands every
// request to one handler. evoscaled's HTTP side (service/http_server.h) and evoscale-serve's
// /healthz and /metrics (serve/) both run on it.
#ifndef EVOSCALE_SERVICE_COMMON_HTTP_LISTENER_H_
#define EVOSCALE_SERVICE_COMMON_HTTP_LISTENER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace evoscale::service {

// TLS for a listener: PEM texts (not paths). No certificate: plaintext.
struct TlsConfig {
  std::string cert_pem;       // the server's certificate chain
  std::string key_pem;        // its private key
  std::string client_ca_pem;  // not empty: mutual TLS, clients must show a certificate it signed
  bool enabled() const { return !cert_pem.empty(); }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string cache_control;  // sent as Cache-Control when not empty
  std::string allow;          // sent as Allow when not empty (405 answers)
};

// Answers one request: method, target (path and query), the Authorization header ("" if none).
// Called on the listener's threads, concurrently.
// The request's body is at most kMaxHttpBody bytes (kube-scheduler's extender calls carry node
// lists); a larger one closes the connection.
inline constexpr size_t kMaxHttpBody = 16 << 20;
using HttpHandler = std::function<HttpResponse(const std::string& method, const std::string& target,
                                               const std::string& authorization,
                                               const std::string& body)>;

// Serves on its own threads until destroyed. A 401 answer carries WWW-Authenticate: Bearer.
class HttpListener {
 public:
  // Binds `address` ("HOST:PORT"; port 0 picks a free one; errors name `flag`, e.g. "--http")
  // and starts serving with `threads` threads. `server` is the Server header.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(const std::string& address,
                                                             const std::string& flag,
                                                             HttpHandler handler, int threads,
                                                             const std::string& server,
                                                             const TlsConfig& tls = {});
  ~HttpListener();  // stops accepting, closes connections, joins the threads

  int port() const { return port_; }

 private:
  struct Impl;
  explicit HttpListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_HTTP_LISTENER_H_
