// The gRPC channel the evoscale commands call evoscaled over; private to service/cli/.

#ifndef EVOSCALE_SERVICE_CLI_CHANNEL_H_
#define EVOSCALE_SERVICE_CLI_CHANNEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "service/cli/command_line.h"

namespace evoscale::cli {

// A channel to --server (or to the first live one of several, comma-separated IP:PORT
// replicas, moving to the next when it goes; see channel.cc): plaintext, or TLS trusting --tls-ca (with --tls-cert and --tls-key,
// this client's certificate for mutual TLS). It connects lazily, on the first call, so a
// command checks its arguments before anything goes over the network. INVALID_ARGUMENT (a
// usage error, exit 2) for --tls-cert or --tls-key without --tls-ca, one of the two without
// the other, or a PEM file that cannot be read (naming the flag, the file and the reason).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const GlobalOptions& global);

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_CHANNEL_H_
