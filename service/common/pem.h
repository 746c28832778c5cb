// Reading the PEM files TLS flags name, for evoscaled and the CLI alike.
#ifndef EVOSCALE_SERVICE_COMMON_PEM_H_
#define EVOSCALE_SERVICE_COMMON_PEM_H_

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace evoscale::service {

// The text of the PEM file at `path`, given by `flag`. INVALID_ARGUMENT naming both when it
// cannot be read (`--tls-key: "k.pem": No such file or directory`) or holds no PEM block
// (`--tls-cert "c.pem": not a PEM file (no -----BEGIN line)`).
inline absl::StatusOr<std::string> ReadPemFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", path, "\": not a PEM file (no -----BEGIN line)"));
  }
  return text.str();
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_PEM_H_
