// The GPU embedding table's probe (find, find-or-insert), written once for the kernels and for
// host tests.
//
// The functions are templates over a `Table` that supplies the memory operations: device atomics
// in gpu_embedding_table.cu, std::atomic_ref with counted calls in tests/trainer/
// gpu_logic_test.cc. Every decision (when to CAS, when a slot is claimed, when the arena is full)
// lives here, so what the host tests check is what the kernels do. Plain C++17 without CUDA.
//
// The policy, for linear probing over an index of capacity slots and an arena of max_rows rows:
// - Read before CAS: a slot is read first and CASed only when seen empty, so finding an id that
//   is already there (most lookups in training) costs plain loads.
// - A row permit before a slot: a thread takes one of max_rows permits before it claims an empty
//   slot, so every claimed slot gets a row and a full arena claims none. Claimed slots stay
//   <= max_rows < capacity, so every probe ends at an empty slot, and probes stay as short as
//   the index at max_rows, however many new ids arrive once the arena is full.
// - A thread that loses the CAS to its own id (a repeat in the same batch) gives its permit back
//   and waits for the winner's row; one that loses to another id keeps its permit and probes on.
// - A new id that finds no permit left while some are still held (by threads that may be
//   inserting this very id) waits at its empty slot; it is answered "full" only once every
//   permit has become a row. So all repeats of an id get the same answer, as on the CPU table.
//
// The Table interface (all calls may run concurrently from many threads):
//   size_t capacity();   uint32_t max_rows();
//   uint64_t LoadKey(size_t slot);      a fresh read (never cached across calls)
//   uint64_t CasKey(size_t slot, uint64_t expected, uint64_t desired);  returns the old key
//   uint32_t LoadRow(size_t slot);      a fresh read with acquire order: the row or kPending
//   void PublishRow(size_t slot, uint32_t row);  with release order (after the row's values)
//   uint32_t LoadCounter(int c);  CasCounter(int c, expected, desired) and AddCounter(int c,
//       delta) return the old value; delta wraps (uint32_t(-1) subtracts one). AddCounter has
//       release order and LoadCounter acquire order: whoever sees a row counted sees its slot's
//       claim.
//   void InitRow(uint64_t key, uint32_t row);  writes the new row's values
//   void CountFullRejection();
#ifndef EVOSCALE_TRAINER_CUDA_TABLE_PROBE_H_
#define EVOSCALE_TRAINER_CUDA_TABLE_PROBE_H_

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define EVOSCALE_HOST_DEVICE __host__ __device__
#else
#define EVOSCALE_HOST_DEVICE
#endif

namespace evoscale::trainer::cuda::probe {

inline constexpr uint32_t kNoRow = 0xFFFFFFFFu;
// The id reserved as the empty-slot marker (no FID has its top bit set, feature_id.h).
inline constexpr uint64_t kEmptyKey = ~uint64_t{0};
// A claimed slot's row until its inserter publishes one (a byte pattern, so memset can fill it).
inline constexpr uint32_t kPending = 0xFEFEFEFEu;

// The table's uint32 counters, by index.
enum TableCounter : int {
  kRowsHandedOut = 0,  // rows given to ids; <= kRowPermits
  kBatchUniques = 1,   // distinct rows of ApplyGradients' batch (not the probe's)
  kRowPermits = 2,     // rows handed out plus permits held by threads still probing; <= max_rows
  kNumCounters = 3,
};

enum class Outcome : uint8_t {
  kFound,     // the id was there (perhaps inserted by another thread of the same launch)
  kInserted,  // this call claimed a slot and a row for the id
  kFull,      // a new id and no row left: nothing claimed, one full rejection counted
  kNoKey,     // the id was kEmptyKey, which cannot be stored
};

struct ProbeResult {
  uint32_t row;  // kNoRow unless kFound or kInserted
  Outcome outcome;
  uint32_t probes;  // slots visited, 1 for the home slot
};

// The home slot of an id: murmur3's finaliser, its upper half scaled onto [0, capacity).
EVOSCALE_HOST_DEVICE inline size_t Home(uint64_t key, size_t capacity) {
  key ^= key >> 33;
  key *= 0xFF51AFD7ED558CCDull;
  key ^= key >> 33;
  key *= 0xC4CEB9FE1A85EC53ull;
  key ^= key >> 33;
  return size_t(((key >> 32) * uint64_t(capacity)) >> 32);
}

// Takes one permit to hand out a row, unless all max_rows are taken.
template <typename Table>
EVOSCALE_HOST_DEVICE bool TakeRowPermit(Table& t) {
  uint32_t taken = t.LoadCounter(kRowPermits);
  while (taken < t.max_rows()) {
    const uint32_t seen = t.CasCounter(kRowPermits, taken, taken + 1);
    if (seen == taken) return true;
    taken = seen;
  }
  return false;
}

// The row of `key`, inserting one (claimed slot, then InitRow, then PublishRow) for a new id
// while the arena has room. Waits while another thread publishes the id's row.
template <typename Table>
EVOSCALE_HOST_DEVICE ProbeResult FindOrInsertKey(Table& t, uint64_t key) {
  if (key == kEmptyKey) return {kNoRow, Outcome::kNoKey, 0};
  const size_t capacity = t.capacity();
  size_t slot = Home(key, capacity);
  bool permit = false;
  uint32_t probes = 1;
  while (true) {
    uint64_t here = t.LoadKey(slot);
    if (here == kEmptyKey) {
      if (!permit && !(permit = TakeRowPermit(t))) {
        // Once every permit is a row no slot can be claimed, so a slot still empty then ends
        // this id's chain for good. (Read again: a holder may have claimed it for this very id
        // before its row was counted.)
        if (t.LoadCounter(kRowsHandedOut) >= t.max_rows() && t.LoadKey(slot) == kEmptyKey) {
          t.CountFullRejection();
          return {kNoRow, Outcome::kFull, probes};
        }
        continue;  // permits in flight, perhaps for this id: look at the slot again
      }
      here = t.CasKey(slot, kEmptyKey, key);
      if (here == kEmptyKey) {
        // The permit guarantees row < max_rows.
        const uint32_t row = t.AddCounter(kRowsHandedOut, 1u);
        t.InitRow(key, row);
        t.PublishRow(slot, row);
        return {row, Outcome::kInserted, probes};
      }
    }
    if (here == key) {
      if (permit) t.AddCounter(kRowPermits, uint32_t(-1));  // a repeat of the id won the slot
      uint32_t row;
      while ((row = t.LoadRow(slot)) == kPending) {
      }
      return {row, Outcome::kFound, probes};
    }
    if (probes == capacity) break;
    slot = slot + 1 == capacity ? 0 : slot + 1;
    ++probes;
  }
  // Unreachable while claimed slots <= max_rows < capacity: a guard against a hang.
  if (permit) t.AddCounter(kRowPermits, uint32_t(-1));
  return {kNoRow, Outcome::kFull, probes};
}

// The row of `key`, or kNoRow when absent or not yet published. Reads only.
template <typename Table>
EVOSCALE_HOST_DEVICE uint32_t FindKey(Table& t, uint64_t key) {
  if (key == kEmptyKey) return kNoRow;
  const size_t capacity = t.capacity();
  size_t slot = Home(key, capacity);
  for (size_t probes = 0; probes < capacity; ++probes) {
    const uint64_t here = t.LoadKey(slot);
    if (here == key) {
      const uint32_t row = t.LoadRow(slot);
      return row == kPending ? kNoRow : row;
    }
    if (here == kEmptyKey) break;
    slot = slot + 1 == capacity ? 0 : slot + 1;
  }
  return kNoRow;
}

}  // namespace evoscale::trainer::cuda::probe

#endif  // EVOSCALE_TRAINER_CUDA_TABLE_PROBE_H_
