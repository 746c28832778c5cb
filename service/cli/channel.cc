// The CLI's gRPC channel: plaintext, or TLS from --tls-ca, --tls-cert and --tls-key.

#include "service/cli/channel.h"

#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/command_line.h"
#include "service/cli/command.h"
#include "service/common/pem.h"

namespace evoscale::cli {
namespace {

// Plaintext, or TLS trusting --tls-ca (with this client's certificate for mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const GlobalOptions& global) {
  if (global.tls_ca.empty()) {
    if (!global.tls_cert.empty() || !global.tls_key.empty()) {
      return UsageError("--tls-cert and --tls-key need --tls-ca (TLS)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (global.tls_cert.empty() != global.tls_key.empty()) {
    return UsageError("--tls-cert and --tls-key go together: give both");
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [flag, path, pem] :
       {std::tuple{"--tls-ca", &global.tls_ca, &ssl.pem_root_certs},
        std::tuple{"--tls-cert", &global.tls_cert, &ssl.pem_cert_chain},
        std::tuple{"--tls-key", &global.tls_key, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    // INVALID_ARGUMENT, naming the flag and file: a usage error (exit 2).
    absl::StatusOr<std::string> text = service::ReadPemFile(flag, *path);
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const GlobalOptions& global) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(global);
  if (!credentials.ok()) return credentials.status();
  return grpc::CreateChannel(global.server, *credentials);
}

}  // namespace evoscale::cli
