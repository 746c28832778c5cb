#include "serve/predict_server.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::serve {

struct PredictServer::Call {
  grpc::ServerContext ctx;
  v1::PredictRequest request;
  v1::PredictResponse response;
  grpc::ServerAsyncResponseWriter<v1::PredictResponse> responder{&ctx};
  bool answered = false;  // Finish was called: the next event ends the call
};

// Calls waiting for a client on each queue: enough that many connections at once never wait
// for one to be armed again.
constexpr int kArmedPerQueue = 32;

absl::StatusOr<std::unique_ptr<PredictServer>> PredictServer::Start(
    const std::string& address, Handler handler, int threads, int max_message_bytes,
    const std::vector<grpc::Service*>& also) {
  std::unique_ptr<PredictServer> s(new PredictServer());
  s->handler_ = std::move(handler);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(&s->service_);
  for (grpc::Service* service : also) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  for (int t = 0; t < threads; ++t) s->queues_.push_back(builder.AddCompletionQueue());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->server_.reset();
    for (auto& cq : s->queues_) {
      cq->Shutdown();
      void* tag;
      bool ok;
      while (cq->Next(&tag, &ok)) {
      }
    }
    return absl::UnavailableError(absl::StrCat("--grpc \"", address, "\": cannot listen there"));
  }
  for (auto& cq : s->queues_) {
    for (int i = 0; i < kArmedPerQueue; ++i) s->Arm(cq.get());
  }
  for (auto& cq : s->queues_) {
    s->threads_.emplace_back([s = s.get(), cq = cq.get()] { s->Run(cq); });
  }
  return s;
}

void PredictServer::Arm(grpc::ServerCompletionQueue* cq) {
  absl::ReaderMutexLock lock(&mu_);
  if (closing_) return;
  auto* call = new Call;
  service_.RequestPredict(&call->ctx, &call->request, &call->responder, cq, cq, call);
}

void PredictServer::Run(grpc::ServerCompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
    auto* call = static_cast<Call*>(tag);
    if (call->answered || !ok) {  // sent (or the server is going): the call is over
      delete call;
      continue;
    }
    Arm(cq);  // the next client on this queue
    const grpc::Status status = handler_(call->request, &call->response);
    call->answered = true;
    if (status.ok()) {
      call->responder.Finish(call->response, status, call);
    } else {
      call->responder.FinishWithError(status, call);
    }
  }
}

void PredictServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(deadline);
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  for (auto& cq : queues_) cq->Shutdown();
  for (auto& t : threads_) t.join();
}

PredictServer::~PredictServer() { Shutdown(std::chrono::system_clock::now()); }

}  // namespace evoscale::serve
