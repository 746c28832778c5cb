#include "trainer/stop_request.h"

#include <atomic>

namespace evoscale::trainer {
namespace {

std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);  // so a signal handler may set it

}  // namespace

void RequestStop() { stop_requested.store(true, std::memory_order_relaxed); }
bool StopRequested() { return stop_requested.load(std::memory_order_relaxed); }

}  // namespace evoscale::trainer
