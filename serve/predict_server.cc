#include "serve/predict_server.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::serve {

// One call in progress, of either method: arrived (Serve arms the next of its kind on the same
// queue and answers it, inline or later), then answered (the next event ends it).
struct PredictServer::Call : CqTag {
  virtual void Serve() = 0;
  void Proceed(bool ok) override {
    if (answered || !ok) {  // sent (or the server is going): the call is over
      delete this;
    } else {
      Serve();
    }
  }
  PredictServer* server = nullptr;
  grpc::ServerCompletionQueue* cq = nullptr;
  bool answered = false;  // Finish was called: the next event ends the call
};

namespace {

template <typename Request, typename Response, typename Base>
struct Unary : Base {
  grpc::ServerContext ctx;
  Request request;
  Response response;
  grpc::ServerAsyncResponseWriter<Response> responder{&ctx};

  void Answer(const grpc::Status& status) {
    this->answered = true;
    CqTag* tag = static_cast<Base*>(this);
    if (status.ok()) {
      responder.Finish(response, status, tag);
    } else {
      responder.FinishWithError(status, tag);
    }
  }
};

}  // namespace

struct PredictServer::PredictCall final
    : Unary<v1::PredictRequest, v1::PredictResponse, PredictServer::Call> {
  void Serve() override {
    server->ArmPredict(cq);  // the next client on this queue
    if (server->async_handler_) {
      server->answering_.fetch_add(1);
      server->async_handler_(request, &response, cq, [this](const grpc::Status& status) {
        PredictServer* s = server;
        Answer(status);
        s->answering_.fetch_sub(1);
      });
    } else {
      Answer(server->handler_(request, &response));
    }
  }
};

struct PredictServer::LookupCall final
    : Unary<v1::LookupRequest, v1::LookupResponse, PredictServer::Call> {
  void Serve() override {
    server->ArmLookup(cq);
    Answer(server->lookup_(request, &response));
  }
};

// Calls waiting for a client on each queue: enough that many connections at once never wait
// for one to be armed again.
constexpr int kArmedPerQueue = 32;

absl::StatusOr<std::unique_ptr<PredictServer>> PredictServer::Start(
    const std::string& address, Handler handler, int threads, int max_message_bytes,
    const std::vector<grpc::Service*>& also, LookupHandler lookup) {
  std::unique_ptr<PredictServer> s(new PredictServer());
  s->handler_ = std::move(handler);
  s->lookup_ = std::move(lookup);
  return Build(std::move(s), address, threads, max_message_bytes, also);
}

absl::StatusOr<std::unique_ptr<PredictServer>> PredictServer::StartAsync(
    const std::string& address, AsyncHandler handler, int threads, int max_message_bytes,
    const std::vector<grpc::Service*>& also) {
  std::unique_ptr<PredictServer> s(new PredictServer());
  s->async_handler_ = std::move(handler);
  return Build(std::move(s), address, threads, max_message_bytes, also);
}

absl::StatusOr<std::unique_ptr<PredictServer>> PredictServer::Build(
    std::unique_ptr<PredictServer> s, const std::string& address, int threads,
    int max_message_bytes, const std::vector<grpc::Service*>& also) {
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(&s->service_);
  if (s->lookup_) builder.RegisterService(&s->lookup_service_);
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
    for (int i = 0; i < kArmedPerQueue; ++i) {
      s->ArmPredict(cq.get());
      if (s->lookup_) s->ArmLookup(cq.get());
    }
  }
  for (auto& cq : s->queues_) {
    s->threads_.emplace_back([s = s.get(), cq = cq.get()] { s->Run(cq); });
  }
  return s;
}

void PredictServer::ArmPredict(grpc::ServerCompletionQueue* cq) {
  absl::ReaderMutexLock lock(&mu_);
  if (closing_) return;
  auto* call = new PredictCall;
  call->server = this;
  call->cq = cq;
  service_.RequestPredict(&call->ctx, &call->request, &call->responder, cq, cq,
                          static_cast<CqTag*>(call));
}

void PredictServer::ArmLookup(grpc::ServerCompletionQueue* cq) {
  absl::ReaderMutexLock lock(&mu_);
  if (closing_) return;
  auto* call = new LookupCall;
  call->server = this;
  call->cq = cq;
  lookup_service_.RequestLookup(&call->ctx, &call->request, &call->responder, cq, cq,
                                static_cast<CqTag*>(call));
}

void PredictServer::Run(grpc::ServerCompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) static_cast<CqTag*>(tag)->Proceed(ok);
}

void PredictServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(deadline);
  while (answering_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  for (auto& cq : queues_) cq->Shutdown();
  for (auto& t : threads_) t.join();
}

PredictServer::~PredictServer() { Shutdown(std::chrono::system_clock::now()); }

}  // namespace evoscale::serve
