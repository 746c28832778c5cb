// The CLI's gRPC channel: plaintext, or TLS from --tls-ca, --tls-cert and --tls-key.

#include "service/cli/channel.h"

#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include <arpa/inet.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

// Several replicas (evoscaled on one PostgreSQL): the channel sticks to the first replica that
// answers and moves to the next when it goes, and a call that fails UNAVAILABLE (its replica
// died under it) is tried again there.
constexpr char kReplicasServiceConfig[] = R"json({
  "loadBalancingConfig": [{"pick_first": {}}],
  "methodConfig": [{
    "name": [{"service": "evoscale.v1.StudyService"}, {"service": "evoscale.v1.AutoscalerService"}],
    "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.2s", "maxBackoff": "2s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
  }]
})json";

// "HOST:PORT,HOST:PORT" -> gRPC's static address list ("ipv4:" or "ipv6:"); hosts must be IP
// literals (or localhost), since the list is not resolved.
absl::StatusOr<std::string> ReplicasTarget(const std::string& servers) {
  std::vector<std::string> parts = absl::StrSplit(servers, ',', absl::SkipWhitespace());
  bool v6 = false;
  for (std::string& part : parts) {
    absl::StripAsciiWhitespace(&part);
    if (absl::StartsWith(part, "localhost:")) part = "127.0.0.1" + part.substr(9);
    const size_t colon = part.rfind(':');
    const std::string host = colon == std::string::npos ? "" : part.substr(0, colon);
    in6_addr ip6;
    in_addr ip4;
    const bool is6 = host.size() > 2 && host.front() == '[' && host.back() == ']' &&
                     inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &ip6) == 1;
    if (!is6 && inet_pton(AF_INET, host.c_str(), &ip4) != 1) {
      return UsageError(absl::StrCat("--server: \"", part,
                                     "\" in a list of replicas must be IP:PORT (or "
                                     "localhost:PORT); a host name is not resolved there"));
    }
    if (parts.front() != part && is6 != v6) {
      return UsageError("--server: a list of replicas is all IPv4 or all IPv6");
    }
    v6 = is6;
  }
  return absl::StrCat(v6 ? "ipv6:" : "ipv4:", absl::StrJoin(parts, ","));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const GlobalOptions& global) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(global);
  if (!credentials.ok()) return credentials.status();
  if (global.server.find(',') == std::string::npos) {
    return grpc::CreateChannel(global.server, *credentials);
  }
  absl::StatusOr<std::string> target = ReplicasTarget(global.server);
  if (!target.ok()) return target.status();
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kReplicasServiceConfig);
  return grpc::CreateCustomChannel(*target, *credentials, args);
}

}  // namespace evoscale::cli
