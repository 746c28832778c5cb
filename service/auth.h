// Bearer-token authentication with three roles. The token file holds one "TOKEN ROLE" pair per
// line (ROLE: admin, writer or reader); blank lines and lines starting with '#' are ignored.
#ifndef EVOSCALE_SERVICE_AUTH_H_
#define EVOSCALE_SERVICE_AUTH_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::service {

// Ordered: a role may do everything the roles below it may.
enum class Role { kReader = 1, kWriter = 2, kAdmin = 3 };

absl::string_view RoleName(Role r);

// Immutable after construction; thread-safe.
class TokenAuth {
 public:
  // No tokens: every request is allowed (the server then listens on loopback only).
  TokenAuth() = default;
  // Reads a token file. Errors name the file and line.
  static absl::StatusOr<std::unique_ptr<TokenAuth>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<TokenAuth>> FromString(absl::string_view text,
                                                              absl::string_view source);

  bool enabled() const { return !tokens_.empty(); }

  // Checks an `authorization` header value ("Bearer TOKEN"). Missing or unknown token:
  // UNAUTHENTICATED; a role below `needed`: PERMISSION_DENIED. Always OK when not enabled().
  absl::Status Check(absl::string_view authorization, Role needed) const;

 private:
  absl::flat_hash_map<std::string, Role> tokens_;
};

// True for addresses only this machine can reach: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackAddress(absl::string_view host_port);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_AUTH_H_
