// The gRPC server of evoscale.v1.PredictionService on gRPC's completion-queue API: `threads`
// threads, each draining its own completion queue and answering each call inline where it
// arrived (no hand-off between threads: the fewest wake-ups and copies per call, which is what
// single-example requests at tens of thousands a second are made of). evoscale-serve answers
// with PredictionService::Handle; bench/serve's null server with a constant.
#ifndef EVOSCALE_SERVE_PREDICT_SERVER_H_
#define EVOSCALE_SERVE_PREDICT_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "evoscale/v1/serving.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace evoscale::serve {

class PredictServer {
 public:
  // Called on the server's threads, concurrently.
  using Handler =
      std::function<grpc::Status(const v1::PredictRequest& request, v1::PredictResponse* response)>;

  // Listens on `address` (HOST:PORT, port 0: any; UNAVAILABLE naming --grpc when it cannot).
  // `also` (may be empty): services on gRPC's synchronous API served beside it on the same
  // port (ModelSyncService), on gRPC's own threads; they must outlive the server.
  static absl::StatusOr<std::unique_ptr<PredictServer>> Start(
      const std::string& address, Handler handler, int threads, int max_message_bytes,
      const std::vector<grpc::Service*>& also = {});
  ~PredictServer();  // Shutdown(now), then joins the threads

  // Stops taking calls; those in progress get until `deadline`. Idempotent.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  int port() const { return port_; }

 private:
  struct Call;
  PredictServer() = default;
  void Arm(grpc::ServerCompletionQueue* cq);
  void Run(grpc::ServerCompletionQueue* cq);

  Handler handler_;
  v1::PredictionService::AsyncService service_;
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
