// The channel arguments of evoscale-serve's clients of replicas (a trainer's pushes, a front's
// lookups on its shards): a replica that restarts answers again within a second or so, so
// reconnect that soon, not after gRPC's default backoff (which grows to two minutes, each call
// failing fast meanwhile, and can outlast a trainer's final catch-up).
#ifndef EVOSCALE_SERVE_REPLICA_CHANNEL_H_
#define EVOSCALE_SERVE_REPLICA_CHANNEL_H_

#include "grpcpp/grpcpp.h"

namespace evoscale::serve {

inline grpc::ChannelArguments ReplicaChannelArgs() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_REPLICA_CHANNEL_H_
