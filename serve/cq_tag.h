// What a completion-queue tag is in evoscale-serve: an object that knows what to do when its
// operation completes. PredictServer's threads drain their queues calling Proceed on each tag,
// so calls a handler starts on the same queue (a front's lookups on its shards) complete on the
// same thread, with no hand-off.
#ifndef EVOSCALE_SERVE_CQ_TAG_H_
#define EVOSCALE_SERVE_CQ_TAG_H_

namespace evoscale::serve {

class CqTag {
 public:
  virtual ~CqTag() = default;
  // The operation completed (`ok`: as grpc::CompletionQueue::Next says). May delete this.
  virtual void Proceed(bool ok) = 0;
};

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_CQ_TAG_H_
