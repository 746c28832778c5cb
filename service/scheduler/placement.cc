#include "service/scheduler/placement.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace evoscale::service {
namespace {

// What the running trials hold together, and how many there are.
struct Held {
  double cpu_cores = 0;
  int64_t memory_bytes = 0;
  int trials = 0;

  void Add(const Resources& r) {
    cpu_cores += r.cpu_cores;
    memory_bytes += r.memory_bytes;
    ++trials;
  }
  void Remove(const Resources& r) {
    cpu_cores -= r.cpu_cores;
    memory_bytes -= r.memory_bytes;
    --trials;
  }
};

// Whether `r` fits beside `held` (GPUs aside). A trial larger than the whole capacity still
// runs alone, rather than never.
bool Fits(const Resources& r, const Held& held, const Capacity& capacity) {
  return held.trials == 0 ||
         (held.trials < capacity.max_running &&
          held.cpu_cores + r.cpu_cores <= capacity.cpu_cores + 1e-9 &&
          held.memory_bytes + r.memory_bytes <= capacity.memory_bytes);
}

// Running trials to stop so that `want` fits (none when stopping all of lower priority than
// `priority` would not free enough).
std::vector<int> ToPreempt(const Resources& want, int priority, Held held,
                           const std::vector<PlacedTrial>& running, const Capacity& capacity) {
  std::vector<const PlacedTrial*> lower;
  for (const PlacedTrial& t : running) {
    if (t.preempting) {
      held.Remove(t.request);  // already on its way out
    } else if (t.priority < priority) {
      lower.push_back(&t);
    }
  }
  // The lowest priority first, the most recently started first among equals.
  std::sort(lower.begin(), lower.end(), [](const PlacedTrial* a, const PlacedTrial* b) {
    return std::make_pair(a->priority, b->started) < std::make_pair(b->priority, a->started);
  });
  std::vector<int> stop;
  for (size_t i = 0; i < lower.size() && !Fits(want, held, capacity); ++i) {
    held.Remove(lower[i]->request);
    stop.push_back(lower[i]->id);
  }
  if (!Fits(want, held, capacity)) stop.clear();
  return stop;
}

}  // namespace

Placement Place(std::vector<WaitingTrial> waiting, const std::vector<PlacedTrial>& running,
                const Capacity& capacity) {
  std::sort(waiting.begin(), waiting.end(), [](const WaitingTrial& a, const WaitingTrial& b) {
    return std::tie(b.priority, a.study_created, a.study, a.trial_id) <
           std::tie(a.priority, b.study_created, b.study, b.trial_id);
  });
  Held held;
  for (const PlacedTrial& t : running) held.Add(t.request);
  int free_gpus = capacity.free_gpus;
  Placement placement;
  while (!waiting.empty()) {
    const int top = waiting.front().priority;
    // Best fit: the largest memory request that fits leaves the least memory over.
    std::optional<size_t> best;
    for (size_t i = 0; i < waiting.size() && waiting[i].priority == top; ++i) {
      const Resources& r = waiting[i].request;
      if (r.gpus > free_gpus || !Fits(r, held, capacity)) continue;
      if (!best || r.memory_bytes > waiting[*best].request.memory_bytes) best = i;
    }
    if (!best) {
      placement.preempt =
          ToPreempt(waiting.front().request, top, held, running, capacity);
      break;  // the rest waits: lower priorities do not start before the higher ones
    }
    held.Add(waiting[*best].request);
    free_gpus -= waiting[*best].request.gpus;
    placement.start.push_back(waiting[*best].id);
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(*best));
  }
  for (const WaitingTrial& w : waiting) placement.waiting.push_back(w.id);
  return placement;
}

}  // namespace evoscale::service
