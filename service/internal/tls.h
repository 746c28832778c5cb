// evoscaled's TLS credentials: the PEM files of --tls-cert, --tls-key and --tls-client-ca read
// and checked once (a wrong key names its flag, where gRPC would only fail to listen), and the
// gRPC server credentials made from them. The HTTP side takes the same TlsConfig.
#ifndef EVOSCALE_SERVICE_INTERNAL_TLS_H_
#define EVOSCALE_SERVICE_INTERNAL_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "service/http_server.h"

namespace evoscale::service {

// Reads and checks the PEM files (paths; empty: not given). No certificate: plaintext (an empty
// TlsConfig). INVALID_ARGUMENT naming the flag for a missing partner (--tls-cert without
// --tls-key, --tls-client-ca without both), an unreadable file, a certificate or key that does
// not parse, or a key that is not the certificate's.
absl::StatusOr<TlsConfig> LoadServerTls(const std::string& cert_path, const std::string& key_path,
                                        const std::string& client_ca_path);

// Plaintext for an empty config; else TLS, requiring and verifying client certificates when
// the config has a client CA.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsConfig& tls);

// The credentials one replica forwards calls to another with (server.cc). Without TLS:
// plaintext. With TLS and `peer_ca_path` (--tls-peer-ca): TLS verifying the other replica's
// certificate against that CA, presenting this replica's own certificate and key as the
// client's (mutual TLS asks for one; the certificate must then allow client use: no extended
// key usage, or clientAuth among them). With TLS and no peer CA: nullptr (no forwarding).
// INVALID_ARGUMENT naming --tls-peer-ca for it without TLS or for an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> PeerChannelCredentials(
    const TlsConfig& tls, const std::string& peer_ca_path);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_INTERNAL_TLS_H_
