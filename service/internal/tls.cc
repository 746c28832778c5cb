#include "service/internal/tls.h"

#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "openssl/pem.h"
#include "openssl/x509.h"
#include "service/common/pem.h"

namespace evoscale::service {
namespace {

// Whether the key is the certificate's; errors name the flag whose file is wrong.
absl::Status CheckKeyPair(const TlsConfig& tls, const std::string& cert_path,
                          const std::string& key_path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
      BIO_new_mem_buf(tls.cert_pem.data(), static_cast<int>(tls.cert_pem.size())), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(
      BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size())), BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), X509_free);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert \"", cert_path, "\": no readable certificate"));
  }
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key \"", key_path, "\": no readable private key (unencrypted PEM)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key \"", key_path, "\" is not the key of --tls-cert \"", cert_path, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TlsConfig> LoadServerTls(const std::string& cert_path, const std::string& key_path,
                                        const std::string& client_ca_path) {
  TlsConfig tls;
  if (cert_path.empty() != key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both");
  }
  if (!client_ca_path.empty() && cert_path.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key");
  }
  for (const auto& [flag, path, pem] :
       {std::tuple{"--tls-cert", &cert_path, &tls.cert_pem},
        std::tuple{"--tls-key", &key_path, &tls.key_pem},
        std::tuple{"--tls-client-ca", &client_ca_path, &tls.client_ca_pem}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> text = ReadPemFile(flag, *path);
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  if (tls.enabled()) {
    if (absl::Status st = CheckKeyPair(tls, cert_path, key_path); !st.ok()) return st;
  }
  return tls;
}

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls.client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> PeerChannelCredentials(
    const TlsConfig& tls, const std::string& peer_ca_path) {
  if (!tls.enabled()) {
    if (!peer_ca_path.empty()) {
      return absl::InvalidArgumentError(
          "--tls-peer-ca: the replicas talk plaintext without --tls-cert and --tls-key");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (peer_ca_path.empty()) return std::shared_ptr<grpc::ChannelCredentials>();
  absl::StatusOr<std::string> ca = ReadPemFile("--tls-peer-ca", peer_ca_path);
  if (!ca.ok()) return ca.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *std::move(ca);
  if (!tls.client_ca_pem.empty()) {
    ssl.pem_cert_chain = tls.cert_pem;
    ssl.pem_private_key = tls.key_pem;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace evoscale::service
