// A minimal blocking HTTP/1.1 GET (and POST) for tests (POSIX sockets, Connection: close).
#ifndef EVOSCALE_TESTS_E2E_HTTP_GET_H_
#define EVOSCALE_TESTS_E2E_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace evoscale::testing {

struct HttpResult {
  int status = 0;
  std::string body;
};

// `address` is "127.0.0.1:PORT". Returns status 0 when the connection fails.
inline HttpResult HttpRequest(const std::string& address, const std::string& method,
                              const std::string& path, const std::string& body,
                              const std::string& token = "") {
  HttpResult r;
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return r;
  }
  std::string req =
      method + " " + path + " HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (method != "GET") req += "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return r;
  }
  std::string raw;
  char buf[8192];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) raw.append(buf, n);
  close(fd);
  if (raw.size() < 12) return r;
  r.status = std::stoi(raw.substr(9, 3));
  const size_t start = raw.find("\r\n\r\n");
  if (start != std::string::npos) r.body = raw.substr(start + 4);
  return r;
}

inline HttpResult HttpGet(const std::string& address, const std::string& path,
                          const std::string& token = "") {
  return HttpRequest(address, "GET", path, "", token);
}

inline HttpResult HttpPost(const std::string& address, const std::string& path,
                           const std::string& body, const std::string& token = "") {
  return HttpRequest(address, "POST", path, body, token);
}

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_E2E_HTTP_GET_H_
