#include "service/autoscaler_service.h"

#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "service/internal/rpc.h"

namespace evoscale::service {
namespace {

using internal::Assign;
using internal::SecondsSince;

}  // namespace

// Sends the current recommendation(s), then each change. Poke() is called by the notifier
// thread and after each write. gRPC calls (StartWrite, Finish) are made without holding mu_,
// since gRPC may run reactions inline.
class AutoscalerServiceImpl::Watcher : public grpc::ServerWriteReactor<v1::Recommendation> {
 public:
  Watcher(AutoscalerServiceImpl* service, std::string workload)
      : service_(service), workload_(std::move(workload)) {}

  void Poke() {
    grpc::Status finish;
    Action action;
    {
      absl::MutexLock lock(&mu_);
      action = Decide(&finish);
    }
    Act(action, finish);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) finished_ = true;
    }
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    Poke();
  }

  void OnCancel() override {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (!writing_ && !finished_) finish = finished_ = true;
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override { service_->Unregister(this); }

  void FinishWith(const grpc::Status& st) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(st);
  }

 private:
  enum class Action { kNone, kWrite, kFinish };

  void Act(Action action, const grpc::Status& finish) {
    if (action == Action::kWrite) StartWrite(&msg_);  // msg_ is stable while writing_
    if (action == Action::kFinish) Finish(finish);
  }

  // Picks the first recommendation that changed since it was last sent.
  Action Decide(grpc::Status* finish) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return Action::kNone;
    if (cancelled_) {
      finished_ = true;
      *finish = grpc::Status::CANCELLED;
      return Action::kFinish;
    }
    std::vector<v1::Recommendation> recs;
    if (workload_.empty()) {
      recs = service_->core_->AllRecommendations();
    } else {
      v1::GetRecommendationRequest req;
      req.set_workload(workload_);
      absl::StatusOr<v1::Recommendation> r = service_->core_->GetRecommendation(req);
      if (!r.ok()) {
        finished_ = true;
        *finish = ToGrpcStatus(r.status());
        return Action::kFinish;
      }
      recs.push_back(*std::move(r));
    }
    for (v1::Recommendation& r : recs) {
      std::string bytes = r.SerializeAsString();
      std::string& last = sent_[r.workload()];
      if (bytes == last) continue;
      last = std::move(bytes);
      msg_ = std::move(r);
      writing_ = true;
      return Action::kWrite;
    }
    return Action::kNone;
  }

  AutoscalerServiceImpl* const service_;
  const std::string workload_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  v1::Recommendation msg_;  // written only while !writing_, under mu_
  std::map<std::string, std::string> sent_ ABSL_GUARDED_BY(mu_);  // workload -> bytes sent
};

absl::Status AutoscalerServiceImpl::Authorize(grpc::CallbackServerContext* ctx, Role role) {
  return internal::Authorize(ctx, *auth_, role);
}

template <typename Fn>
grpc::ServerUnaryReactor* AutoscalerServiceImpl::Handle(grpc::CallbackServerContext* ctx,
                                                        const char* method, Role role,
                                                        Fn&& fn) {
  return internal::HandleUnary(ctx, method, role, *auth_, *metrics_, std::forward<Fn>(fn));
}

AutoscalerServiceImpl::AutoscalerServiceImpl(AutoscalerCore* core, const TokenAuth* auth,
                                             ServiceMetrics* metrics)
    : core_(core), auth_(auth), metrics_(metrics) {
  notifier_ = std::thread([this] {
    uint64_t seen = core_->version();
    for (;;) {
      seen = core_->AwaitChange(seen, absl::Now() + absl::Milliseconds(200));
      std::vector<Watcher*> watchers;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        watchers.assign(watchers_.begin(), watchers_.end());
        poking_.insert(watchers.begin(), watchers.end());
      }
      for (Watcher* w : watchers) w->Poke();
      absl::MutexLock lock(&mu_);
      for (Watcher* w : watchers) poking_.erase(poking_.find(w));
      DeleteDead();
    }
  });
}

void AutoscalerServiceImpl::DeleteDead() {
  std::vector<Watcher*> keep;
  for (Watcher* w : dead_) {
    if (poking_.contains(w)) {
      keep.push_back(w);
    } else {
      delete w;
    }
  }
  dead_ = std::move(keep);
}

AutoscalerServiceImpl::~AutoscalerServiceImpl() { Shutdown(); }

void AutoscalerServiceImpl::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  core_->Interrupt();
  if (notifier_.joinable()) notifier_.join();
}

grpc::ServerUnaryReactor* AutoscalerServiceImpl::PutWorkload(grpc::CallbackServerContext* ctx,
                                                             const v1::PutWorkloadRequest* req,
                                                             v1::Workload* resp) {
  return Handle(ctx, "PutWorkload", Role::kWriter,
                [&] { return Assign(core_->PutWorkload(*req), resp); });
}

grpc::ServerUnaryReactor* AutoscalerServiceImpl::GetWorkload(grpc::CallbackServerContext* ctx,
                                                             const v1::GetWorkloadRequest* req,
                                                             v1::Workload* resp) {
  return Handle(ctx, "GetWorkload", Role::kReader,
                [&] { return Assign(core_->GetWorkload(*req), resp); });
}

grpc::ServerUnaryReactor* AutoscalerServiceImpl::ListWorkloads(
    grpc::CallbackServerContext* ctx, const v1::ListWorkloadsRequest*,
    v1::ListWorkloadsResponse* resp) {
  return Handle(ctx, "ListWorkloads", Role::kReader, [&] {
    *resp = core_->ListWorkloads();
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* AutoscalerServiceImpl::GetRecommendation(
    grpc::CallbackServerContext* ctx, const v1::GetRecommendationRequest* req,
    v1::Recommendation* resp) {
  return Handle(ctx, "GetRecommendation", Role::kReader,
                [&] { return Assign(core_->GetRecommendation(*req), resp); });
}

// Reads batches until the client half-closes; each batch is one transaction.
class TelemetryReader : public grpc::ServerReadReactor<v1::TelemetryBatch> {
 public:
  TelemetryReader(AutoscalerCore* core, ServiceMetrics* metrics, v1::ReportTelemetryResponse* resp,
                  absl::Status auth)
      : core_(core), metrics_(metrics), resp_(resp), start_(std::chrono::steady_clock::now()) {
    if (!auth.ok()) {
      Done(auth);
      return;
    }
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or went away): answer with the totals
      Done(absl::OkStatus());
      return;
    }
    if (absl::Status st = core_->Ingest(batch_, resp_); !st.ok()) {
      Done(st);
      return;
    }
    batch_.Clear();
    StartRead(&batch_);
  }

  void OnDone() override { delete this; }

 private:
  void Done(const absl::Status& st) {
    metrics_->RecordRpc("ReportTelemetry", StatusCodeName(st.code()), SecondsSince(start_));
    Finish(ToGrpcStatus(st));
  }

  AutoscalerCore* const core_;
  ServiceMetrics* const metrics_;
  v1::ReportTelemetryResponse* const resp_;
  const std::chrono::steady_clock::time_point start_;
  v1::TelemetryBatch batch_;
};

grpc::ServerReadReactor<v1::TelemetryBatch>* AutoscalerServiceImpl::ReportTelemetry(
    grpc::CallbackServerContext* ctx, v1::ReportTelemetryResponse* resp) {
  return new TelemetryReader(core_, metrics_, resp, Authorize(ctx, Role::kWriter));
}

void AutoscalerServiceImpl::Unregister(Watcher* w) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(w);
  // The notifier may be poking it right now: it deletes it when done.
  if (poking_.contains(w)) {
    dead_.push_back(w);
  } else {
    delete w;
  }
}

grpc::ServerWriteReactor<v1::Recommendation>* AutoscalerServiceImpl::WatchRecommendations(
    grpc::CallbackServerContext* ctx, const v1::WatchRecommendationsRequest* req) {
  auto* w = new Watcher(this, req->workload());
  absl::Status st = Authorize(ctx, Role::kReader);
  if (st.ok() && !req->workload().empty()) {
    v1::GetWorkloadRequest get;
    get.set_name(req->workload());
    st = core_->GetWorkload(get).status();
  }
  metrics_->RecordRpc("WatchRecommendations", StatusCodeName(st.code()), 0);
  if (!st.ok()) {
    w->FinishWith(ToGrpcStatus(st));
    return w;
  }
  {
    absl::MutexLock lock(&mu_);
    watchers_.insert(w);
    poking_.insert(w);
  }
  w->Poke();
  absl::MutexLock lock(&mu_);
  poking_.erase(poking_.find(w));
  DeleteDead();
  return w;
}

}  // namespace evoscale::service
