#include "service/common/http_listener.h"

#include <boost/asio.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/beast/core.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/version.hpp>
#include <chrono>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace evoscale::service {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

struct HttpListener::Impl {
  HttpHandler handler;
  std::string server;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::vector<std::thread> threads;
  // With TLS: the server's certificate and key (and the CA its clients' certificates must
  // chain to, for mutual TLS); null: plaintext.
  std::unique_ptr<asio::ssl::context> tls;

  asio::awaitable<void> Session(tcp::socket socket) {
    beast::tcp_stream tcp(std::move(socket));
    if (tls == nullptr) {
      co_await Serve(tcp);
      beast::error_code ignored;
      tcp.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp), *tls);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
    beast::error_code ec;
    // A client without the CA, or (mutual TLS) without a certificate, ends here.
    co_await stream.async_handshake(asio::ssl::stream_base::server,
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    co_await Serve(stream);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
    co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  }

  // Reads requests and answers them on `stream` (plain TCP or TLS) until the client is done.
  template <typename Stream>
  asio::awaitable<void> Serve(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(16 * 1024);
      parser.body_limit(kMaxHttpBody);
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
      beast::error_code ec;
      co_await http::async_read(stream, buffer, parser,
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      http::request<http::string_body> req = parser.release();
      auto auth_it = req.find(http::field::authorization);
      std::string authorization =
          auth_it == req.end() ? std::string() : std::string(auth_it->value());
      HttpResponse r =
          handler(std::string(req.method_string()), std::string(req.target()), authorization,
                  req.body());
      http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
      res.set(http::field::server, server);
      res.set(http::field::content_type, r.content_type);
      if (r.status == 401) res.set(http::field::www_authenticate, "Bearer");
      if (!r.allow.empty()) res.set(http::field::allow, r.allow);
      if (!r.cache_control.empty()) res.set(http::field::cache_control, r.cache_control);
      res.keep_alive(req.keep_alive());
      if (req.method() != http::verb::head) res.body() = std::move(r.body);
      res.prepare_payload();
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || !res.keep_alive()) break;
    }
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

HttpListener::HttpListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(const std::string& address,
                                                                  const std::string& flag,
                                                                  HttpHandler handler, int threads,
                                                                  const std::string& server,
                                                                  const TlsConfig& tls) {
  auto impl = std::make_unique<Impl>();
  if (tls.enabled()) {
    impl->tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    boost::system::error_code ec;
    impl->tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                               asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                               asio::ssl::context::no_tlsv1_1,
                           ec);
    impl->tls->use_certificate_chain(asio::buffer(tls.cert_pem), ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-cert: ", ec.message()));
    impl->tls->use_private_key(asio::buffer(tls.key_pem), asio::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-key: ", ec.message()));
    if (!tls.client_ca_pem.empty()) {
      impl->tls->add_certificate_authority(asio::buffer(tls.client_ca_pem), ec);
      if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-client-ca: ", ec.message()));
      impl->tls->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
  }
  impl->handler = std::move(handler);
  impl->server = server;
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", address, "\": want HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", address, "\": bad host: ", ec.message()));
  }
  tcp::endpoint ep(ip, static_cast<unsigned short>(port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat(flag, " \"", address, "\": ", ec.message()));
  }
  const int bound = impl->acceptor.local_endpoint().port();
  asio::co_spawn(impl->io, impl->Accept(), asio::detached);
  for (int i = 0; i < threads; ++i) {
    impl->threads.emplace_back([io = &impl->io] { io->run(); });
  }
  std::unique_ptr<HttpListener> listener(new HttpListener(std::move(impl)));
  listener->port_ = bound;
  return listener;
}

HttpListener::~HttpListener() {
  asio::post(impl_->io, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->io.stop();
  for (auto& t : impl_->threads) t.join();
}

}  // namespace evoscale::service
