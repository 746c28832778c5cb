// The clock, injected so that tests control time (as LevelDB's Env, Envoy's TimeSource).
#ifndef EVOSCALE_SERVICE_COMMON_CLOCK_H_
#define EVOSCALE_SERVICE_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace evoscale::service {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  // The process-wide real clock. Thread-safe; never deleted.
  static Clock* Real();
};

// A clock that moves only when told. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start) : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

inline Clock* Clock::Real() {
  class RealClock : public Clock {
   public:
    absl::Time Now() override { return absl::Now(); }
  };
  static RealClock* clock = new RealClock;
  return clock;
}

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_COMMON_CLOCK_H_
