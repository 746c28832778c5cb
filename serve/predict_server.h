// The gRPC server of evoscale.v1.PredictionService on gRPC's completion-queue API: `threads`
// threads, each draining its own completion queue and answering each call inline where it
// arrived (no hand-off between threads: the fewest wake-ups and copies per call, which is what
// single-example requests at tens of thousands a second are made of). evoscale-serve answers
// with PredictionService::Handle; bench/serve's null server with a constant. A shard replica's
// EmbeddingService.Lookup (a front's fan-out: a call per shard for every Predict at the front)
// is served the same way when a lookup handler is given.
#ifndef EVOSCALE_SERVE_PREDICT_SERVER_H_
#define EVOSCALE_SERVE_PREDICT_SERVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "serve/cq_tag.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace evoscale::serve {

class PredictServer {
 public:
  // Called on the server's threads, concurrently.
  using Handler =
      std::function<grpc::Status(const v1::PredictRequest& request, v1::PredictResponse* response)>;
  using LookupHandler =
      std::function<grpc::Status(const v1::LookupRequest& request, v1::LookupResponse* response)>;
  // An answer that completes later (a front's, once its shards answer): the handler fills
  // `response` and calls `finish` once; calls of its own it starts on `cq` (CqTag tags) complete
  // on this thread. Given to SetAsyncHandler, it answers Predict in place of the Handler.
  using Finish = std::function<void(const grpc::Status& status)>;
  using AsyncHandler =
      std::function<void(const v1::PredictRequest& request, v1::PredictResponse* response,
                         grpc::CompletionQueue* cq, Finish finish)>;

  // Listens on `address` (HOST:PORT, port 0: any; UNAVAILABLE naming --grpc when it cannot).
  // `also` (may be empty): services on gRPC's synchronous API served beside it on the same
  // port (ModelSyncService), on gRPC's own threads; they must outlive the server. `lookup`
  // (may be empty): EmbeddingService.Lookup's answers, on the server's threads as Predict's.
  static absl::StatusOr<std::unique_ptr<PredictServer>> Start(
      const std::string& address, Handler handler, int threads, int max_message_bytes,
      const std::vector<grpc::Service*>& also = {}, LookupHandler lookup = nullptr);
  // As Start, Predict answered by `handler` (which may finish later).
  static absl::StatusOr<std::unique_ptr<PredictServer>> StartAsync(
      const std::string& address, AsyncHandler handler, int threads, int max_message_bytes,
      const std::vector<grpc::Service*>& also = {});
  ~PredictServer();  // Shutdown(now), then joins the threads

  // Stops taking calls; those in progress get until `deadline`. Idempotent.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  int port() const { return port_; }

 private:
  struct Call;
  struct PredictCall;
  struct LookupCall;
  PredictServer() = default;
  void ArmPredict(grpc::ServerCompletionQueue* cq);
  void ArmLookup(grpc::ServerCompletionQueue* cq);
  void Run(grpc::ServerCompletionQueue* cq);

  static absl::StatusOr<std::unique_ptr<PredictServer>> Build(
      std::unique_ptr<PredictServer> s, const std::string& address, int threads,
      int max_message_bytes, const std::vector<grpc::Service*>& also);

  Handler handler_;
  AsyncHandler async_handler_;
  // Async answers started and not yet finished: the queues stay up (and drained) until they
  // are (their own calls complete on them).
  std::atomic<int> answering_{0};
  LookupHandler lookup_;
  v1::PredictionService::AsyncService service_;
  v1::EmbeddingService::AsyncService lookup_service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  bool shut_down_ = false;
  // Set before the queues shut down: no call is armed on a queue after that.
  absl::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_PREDICT_SERVER_H_
