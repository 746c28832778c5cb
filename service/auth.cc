#include "service/auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace evoscale::service {

absl::string_view RoleName(Role r) {
  switch (r) {
    case Role::kReader:
      return "reader";
    case Role::kWriter:
      return "writer";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<TokenAuth>> TokenAuth::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("auth tokens file \"", path, "\": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return FromString(ss.str(), path);
}

absl::StatusOr<std::unique_ptr<TokenAuth>> TokenAuth::FromString(absl::string_view text,
                                                                absl::string_view source) {
  auto auth = std::make_unique<TokenAuth>();
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto where = [&] { return absl::StrCat("auth tokens file \"", source, "\" line ", line_no); };
    if (f.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": want \"TOKEN ROLE\""));
    }
    Role role;
    if (f[1] == "admin") {
      role = Role::kAdmin;
    } else if (f[1] == "writer") {
      role = Role::kWriter;
    } else if (f[1] == "reader") {
      role = Role::kReader;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": unknown role \"", f[1], "\"; want admin, writer or reader"));
    }
    if (f[0].size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": token shorter than 16 characters"));
    }
    if (!auth->tokens_.emplace(std::string(f[0]), role).second) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": duplicate token"));
    }
  }
  if (auth->tokens_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("auth tokens file \"", source, "\": no tokens"));
  }
  return auth;
}

absl::Status TokenAuth::Check(absl::string_view authorization, Role needed) const {
  if (!enabled()) return absl::OkStatus();
  if (authorization.empty()) {
    return absl::UnauthenticatedError("missing \"authorization: Bearer TOKEN\"");
  }
  absl::string_view token = authorization;
  if (!absl::ConsumePrefix(&token, "Bearer ") && !absl::ConsumePrefix(&token, "bearer ")) {
    return absl::UnauthenticatedError("authorization: want \"Bearer TOKEN\"");
  }
  auto it = tokens_.find(absl::StripAsciiWhitespace(token));
  if (it == tokens_.end()) return absl::UnauthenticatedError("authorization: unknown token");
  if (it->second < needed) {
    return absl::PermissionDeniedError(absl::StrCat("role \"", RoleName(it->second),
                                                    "\" may not do this; needs \"",
                                                    RoleName(needed), "\""));
  }
  return absl::OkStatus();
}

bool IsLoopbackAddress(absl::string_view host_port) {
  absl::string_view host = host_port;
  if (absl::ConsumePrefix(&host, "[")) {
    size_t end = host.find(']');
    host = host.substr(0, end);
  } else if (size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace evoscale::service
