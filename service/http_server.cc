#include "service/http_server.h"

#include <utility>

namespace evoscale::service {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              StudyCore* core,
                                                              AutoscalerCore* autoscaler,
                                                              ServiceMetrics* metrics,
                                                              const TokenAuth* auth, int threads,
                                                              const TlsConfig& tls) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->api_ = std::make_unique<HttpApi>(core, autoscaler, metrics, auth);
  HttpApi* api = server->api_.get();
  absl::StatusOr<std::unique_ptr<HttpListener>> listener = HttpListener::Start(
      address, "--http",
      [api](const std::string& method, const std::string& target, const std::string& authorization,
            const std::string& body) { return api->Handle(method, target, authorization, body); },
      threads, "evoscaled", tls);
  if (!listener.ok()) return listener.status();
  server->listener_ = *std::move(listener);
  return server;
}

HttpServer::~HttpServer() { listener_.reset(); }

}  // namespace evoscale::service
