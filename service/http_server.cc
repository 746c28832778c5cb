#include "service/http_server.h"

#include <boost/asio.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <chrono>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace evoscale::service {
namespace internal {
// Defined in web_assets.cc, generated from web/ by web/embed.cmake: a file's bytes, or empty.
std::string_view WebAsset(std::string_view file);
}  // namespace internal

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

int HttpCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

HttpResponse Error(const absl::Status& st) {
  return {HttpCode(st.code()), "application/json",
          nlohmann::ordered_json{{"error",
                                  {{"code", absl::StatusCodeToString(st.code())},
                                   {"message", std::string(st.message())}}}}
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

template <typename M>
HttpResponse Json(const absl::StatusOr<M>& m) {
  if (!m.ok()) return Error(m.status());
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  HttpResponse r;
  auto st = google::protobuf::util::MessageToJsonString(*m, &r.body, opts);
  if (!st.ok()) return Error(absl::InternalError(std::string(st.message())));
  return r;
}

// Splits "a=1&b=2" into pairs.
std::vector<std::pair<std::string, std::string>> Query(absl::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view kv : absl::StrSplit(q, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    out.emplace_back(p.first, p.second);
  }
  return out;
}

// The dashboard's files, by path; nullopt for any other path.
std::optional<HttpResponse> WebFile(absl::string_view path) {
  std::string_view file, type;
  if (path == "/" || path == "/index.html") {
    file = "index.html";
    type = "text/html; charset=utf-8";
  } else if (path == "/app.js") {
    file = "app.js";
    type = "text/javascript; charset=utf-8";
  } else if (path == "/style.css") {
    file = "style.css";
    type = "text/css; charset=utf-8";
  } else {
    return std::nullopt;
  }
  // no-cache: the browser revalidates, so a new evoscaled build shows its own dashboard.
  return HttpResponse{200, std::string(type), std::string(internal::WebAsset(file)), "no-cache"};
}

}  // namespace

HttpResponse HandleHttp(StudyCore* core, AutoscalerCore* autoscaler, ServiceMetrics* metrics,
                        const TokenAuth* auth,
                        const std::string& method, const std::string& target,
                        const std::string& authorization) {
  absl::string_view path = target;
  absl::string_view query;
  if (size_t q = path.find('?'); q != absl::string_view::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  if (path == "/healthz") return {200, "text/plain", "ok\n"};
  if (method != "GET" && method != "HEAD") {
    return Error(absl::InvalidArgumentError(absl::StrCat("method ", method, ": only GET is served")));
  }
  if (std::optional<HttpResponse> file = WebFile(path)) return *std::move(file);
  if (absl::Status st = auth->Check(authorization, Role::kReader); !st.ok()) return Error(st);
  if (path == "/metrics") {
    return {200, "text/plain; version=0.0.4", metrics->Scrape(core, autoscaler)};
  }
  absl::string_view rest = path;
  if (absl::ConsumePrefix(&rest, "/api/v1/workloads")) {
    if (rest.empty() || rest == "/") return Json(absl::StatusOr<v1::ListWorkloadsResponse>(autoscaler->ListWorkloads()));
    absl::ConsumePrefix(&rest, "/");
    if (absl::ConsumeSuffix(&rest, "/recommendation")) {
      v1::GetRecommendationRequest req;
      req.set_workload(std::string(rest));
      return Json(autoscaler->GetRecommendation(req));
    }
    v1::GetWorkloadRequest req;
    req.set_name(std::string(rest));
    return Json(autoscaler->GetWorkload(req));
  }
  if (!absl::ConsumePrefix(&rest, "/api/v1/studies")) {
    return Error(absl::NotFoundError(absl::StrCat("no route for \"", path, "\"")));
  }
  if (rest.empty() || rest == "/") {
    v1::ListStudiesRequest req;
    for (const auto& [k, v] : Query(query)) {
      int n = 0;
      if (k == "page_size") {
        if (!absl::SimpleAtoi(v, &n)) return Error(absl::InvalidArgumentError("page_size: not an integer"));
        req.set_page_size(n);
      } else if (k == "page_token") {
        req.set_page_token(v);
      }
    }
    return Json(core->Call(req));
  }
  absl::ConsumePrefix(&rest, "/");
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  const std::string study = absl::StrCat("studies/", parts[0]);
  if (parts.size() == 1) {
    v1::GetStudyRequest req;
    req.set_name(study);
    return Json(core->Call(req));
  }
  if (parts.size() == 2 && parts[1] == "trials") {
    v1::ListTrialsRequest req;
    req.set_parent(study);
    for (const auto& [k, v] : Query(query)) {
      int n = 0;
      if (k == "page_size") {
        if (!absl::SimpleAtoi(v, &n)) return Error(absl::InvalidArgumentError("page_size: not an integer"));
        req.set_page_size(n);
      } else if (k == "page_token") {
        req.set_page_token(v);
      } else if (k == "state") {
        // Any case, as the CLI takes it: state=succeeded is SUCCEEDED.
        v1::Trial::State s;
        if (!v1::Trial::State_Parse(absl::AsciiStrToUpper(v), &s) ||
            s == v1::Trial::STATE_UNSPECIFIED) {
          return Error(absl::InvalidArgumentError(absl::StrCat(
              "state: unknown trial state \"", v,
              "\" (want requested, active, stopping, succeeded, infeasible or failed)")));
        }
        req.set_state(s);
      }
    }
    return Json(core->Call(req));
  }
  if (parts.size() == 2 && parts[1] == "optimal") {
    v1::ListOptimalTrialsRequest req;
    req.set_parent(study);
    return Json(core->Call(req));
  }
  return Error(absl::NotFoundError(absl::StrCat("no route for \"", path, "\"")));
}

struct HttpServer::Impl {
  StudyCore* core;
  AutoscalerCore* autoscaler;
  ServiceMetrics* metrics;
  const TokenAuth* auth;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::vector<std::thread> threads;

  asio::awaitable<void> Session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(16 * 1024);
      parser.body_limit(64 * 1024);
      stream.expires_after(std::chrono::seconds(30));
      beast::error_code ec;
      co_await http::async_read(stream, buffer, parser,
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      http::request<http::string_body> req = parser.release();
      auto auth_it = req.find(http::field::authorization);
      std::string authorization =
          auth_it == req.end() ? std::string() : std::string(auth_it->value());
      HttpResponse r = HandleHttp(core, autoscaler, metrics, auth, std::string(req.method_string()),
                                  std::string(req.target()), authorization);
      http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
      res.set(http::field::server, "evoscaled");
      res.set(http::field::content_type, r.content_type);
      if (r.status == 401) res.set(http::field::www_authenticate, "Bearer");
      if (!r.cache_control.empty()) res.set(http::field::cache_control, r.cache_control);
      res.keep_alive(req.keep_alive());
      if (req.method() != http::verb::head) res.body() = std::move(r.body);
      res.prepare_payload();
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || !res.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  asio::awaitable<void> Accept() {
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket =
          co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted) co_return;
        continue;
      }
      asio::co_spawn(io, Session(std::move(socket)), asio::detached);
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              StudyCore* core,
                                                              AutoscalerCore* autoscaler,
                                                              ServiceMetrics* metrics,
                                                              const TokenAuth* auth,
                                                              int threads) {
  auto impl = std::make_unique<Impl>();
  impl->core = core;
  impl->autoscaler = autoscaler;
  impl->metrics = metrics;
  impl->auth = auth;
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http \"", address, "\": want HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http \"", address, "\": bad host: ", ec.message()));
  }
  tcp::endpoint ep(ip, static_cast<unsigned short>(port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("--http \"", address, "\": ", ec.message()));
  }
  const int bound = impl->acceptor.local_endpoint().port();
  asio::co_spawn(impl->io, impl->Accept(), asio::detached);
  for (int i = 0; i < threads; ++i) {
    impl->threads.emplace_back([io = &impl->io] { io->run(); });
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
  server->port_ = bound;
  return server;
}

HttpServer::~HttpServer() {
  asio::post(impl_->io, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->io.stop();
  for (auto& t : impl_->threads) t.join();
}

}  // namespace evoscale::service
