// A collisionless embedding hash table: 64-bit feature id -> row in a contiguous arena.
//
// Every distinct id gets its own row (no hashing of ids into a fixed number of buckets, so two
// ids never share an embedding). A row holds a 16-byte header (the id, the logical time it was
// last updated, a scratch word for the caller), the embedding, then the optimizer's state:
//
//   | key u64 | last_update u32 | scratch u32 | embedding[dim] f32 | state[state_floats] f32 |
//
// The index is an open-addressing (linear probing) array of 8-byte slots {tag, row}, where the
// tag is the upper half of the id's hash and also picks the home slot, so growth and deletion
// rehash without touching the arena. It grows by 1.5x at max_load_factor, into a fresh anonymous
// mapping that replaces the old one (unmapped at once, so a grown index never leaves freed pages
// behind in the heap). Rows never move: the arena is one reserved range of address space
// committed as it fills, so row pointers stay valid across inserts and growth.
//
// "Time" is the caller's logical clock (the trainer passes its step), which keeps training
// reproducible; expiry evicts rows whose last update is older than a cutoff.
//
// Not thread-safe: a table belongs to one shard, owned by one thread (see sharded training in
// cpu_trainer.h). Different tables may be used from different threads concurrently.
#ifndef EVOSCALE_TRAINER_EMBEDDING_TABLE_H_
#define EVOSCALE_TRAINER_EMBEDDING_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "trainer/internal/mapped_buffer.h"

namespace evoscale::trainer {

struct RowHeader {
  uint64_t key;
  uint32_t last_update;  // logical time of the last update (or of the insertion)
  uint32_t scratch;      // free for the owner (the trainer keeps a batch-local index here)
};
static_assert(sizeof(RowHeader) == 16);

struct EmbeddingTableOptions {
  int dim = 16;
  int state_floats = 0;  // optimizer state per row, zero-initialised unless init_state is set
  enum class Init { kNormal, kConstant };
  Init init = Init::kNormal;
  float init_value = 0.01f;        // stddev for kNormal, the value itself for kConstant
  uint64_t seed = 0;               // kNormal values are a pure function of (seed, id)
  size_t initial_capacity = 1024;  // index slots
  double max_load_factor = 0.8;
  size_t max_rows = size_t{1} << 28;  // the arena reserves address space for this many rows
  // Occurrence threshold by FID slot (feature_id.h): an id of slot s gets a row only on its
  // min_count_by_slot[s]-th sighting; earlier sightings are counted and answered with kNoRow.
  // Slots beyond the vector, and thresholds <= 1, admit at first sight.
  std::vector<uint32_t> min_count_by_slot;
  // Keep the lists TakeChanges answers from (costs 4 bytes per changed row between calls).
  bool track_changes = false;
  // Optional: fills a new row's optimizer state from its fresh embedding.
  std::function<void(const float* embedding, float* state)> init_state;
};

class EmbeddingTable {
 public:
  static constexpr uint32_t kNoRow = 0xFFFFFFFFu;

  // INVALID_ARGUMENT for a bad dim/state/load factor; RESOURCE_EXHAUSTED if the arena's address
  // space cannot be reserved.
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> Create(EmbeddingTableOptions options);
  ~EmbeddingTable() = default;
  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;

  // The row of `key`, or kNoRow on a miss. O(1) expected.
  uint32_t Find(uint64_t key) const;

  // The row of `key`, inserting an initialised row (last_update = now) if absent. Returns kNoRow
  // when the key is still below its slot's occurrence threshold, or when the arena is full.
  uint32_t FindOrInsert(uint64_t key, uint32_t now);

  // Batched forms: rows[i] answers keys[i]. Hashes and prefetches index slots and rows several
  // keys ahead, so cache misses overlap; same results as the one-key calls in order.
  void FindOrInsertBatch(const uint64_t* keys, size_t n, uint32_t now, uint32_t* rows) {
    FindOrInsertBatch(keys, n, now, [rows](size_t i, uint32_t row) { rows[i] = row; });
  }
  void FindBatch(const uint64_t* keys, size_t n, uint32_t* rows) const;
  // The same, calling visit(i, row) for each key in order while the row is still in cache.
  template <typename Visit>
  void FindOrInsertBatch(const uint64_t* keys, size_t n, uint32_t now, Visit&& visit);

  // Records that `row` was updated at `now` (for expiry and incremental checkpoints).
  void MarkUpdated(uint32_t row, uint32_t now) {
    RowHeader* h = header(row);
    if (track_changes_ && h->last_update <= checkpoint_mark_) dirty_rows_.push_back(row);
    h->last_update = now;
  }

  // Removes `key`; its row goes to a free list for reuse. False if absent.
  bool Erase(uint64_t key);
  // Removes every row whose last update is < cutoff; appends their keys to `evicted` if given.
  // O(capacity). Returns the number removed.
  size_t EvictOlderThan(uint32_t cutoff, std::vector<uint64_t>* evicted = nullptr);

  // Writes a row as restored from a checkpoint: `values` holds dim + state_floats floats. Ignores
  // the occurrence threshold and does not mark the row dirty. kNoRow if the arena is full.
  uint32_t Restore(uint64_t key, uint32_t last_update, const float* values);
  // Grows the index, in one rehash, to hold `rows` rows under the maximum load factor. A
  // checkpoint restores its rows in index order (sorted by hash): into a smaller index they
  // would pile up as one long probe cluster, so the loader reserves first.
  absl::Status Reserve(size_t rows);

  // Incremental checkpoints (needs track_changes): the live rows inserted or updated and the keys
  // erased since the last call (or since construction); then starts a new interval in which an
  // update at a time > `mark` counts as a change.
  void TakeChanges(uint32_t mark, std::vector<uint32_t>* changed_rows,
                   std::vector<uint64_t>* erased_keys);
  // Occurrence counts of ids not yet admitted (for checkpoints), and their restoration.
  const absl::flat_hash_map<uint64_t, uint32_t>& pending() const { return pending_; }
  void RestorePending(uint64_t key, uint32_t count) { pending_[key] = count; }
  void ClearPending() { pending_.clear(); }
  // Calls fn(row) for every live row, in index order.
  void ForEachRow(const std::function<void(uint32_t row)>& fn) const;

  RowHeader* header(uint32_t row) const {
    return reinterpret_cast<RowHeader*>(arena_.data() + size_t{row} * row_bytes_);
  }
  float* embedding(uint32_t row) const { return reinterpret_cast<float*>(header(row) + 1); }
  float* state(uint32_t row) const { return embedding(row) + dim_; }

  int dim() const { return dim_; }
  int state_floats() const { return state_floats_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  // Bytes one row occupies in the arena (header, embedding, state).
  size_t row_bytes() const { return row_bytes_; }
  // Bytes the embedding and optimizer state of the live rows need, without any overhead.
  size_t payload_bytes() const { return size_ * sizeof(float) * (dim_ + state_floats_); }
  // Bytes held: committed arena, index, pending occurrence counts.
  size_t memory_bytes() const;
  size_t pending_count() const { return pending_.size(); }
  // Insertions refused because the arena reached max_rows (those ids were answered kNoRow).
  size_t full_rejections() const { return full_rejections_; }

 private:
  struct Slot {
    uint32_t tag;
    uint32_t row;  // kNoRow when empty
  };

  explicit EmbeddingTable(EmbeddingTableOptions options);
  absl::Status Init();
  static uint64_t Hash(uint64_t key) {
    // murmur3's finaliser: every key bit reaches the upper half, which forms the tag.
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 33;
    key *= 0xC4CEB9FE1A85EC53ull;
    key ^= key >> 33;
    return key;
  }
  uint32_t Probe(uint64_t key, uint32_t tag, size_t* slot) const {
    size_t i = Home(tag);
    while (true) {
      const Slot s = slots()[i];
      if (s.row == kNoRow || (s.tag == tag && header(s.row)->key == key)) {
        *slot = i;
        return s.row;
      }
      i = Next(i);
    }
  }
  // The home slot of a tag: the tag scaled onto [0, capacity) ("fastrange"), so capacities need
  // not be powers of two and the table can grow by 1.5x, keeping the index dense.
  size_t Home(uint32_t tag) const { return size_t((uint64_t{tag} * capacity_) >> 32); }
  size_t Next(size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }
  Slot* slots() const { return reinterpret_cast<Slot*>(index_.data()); }
  // A committed index of `capacity` empty slots.
  static absl::StatusOr<internal::MappedBuffer> NewIndex(size_t capacity);
  uint32_t InsertAt(uint64_t key, uint32_t tag, size_t slot, uint32_t now);
  uint32_t AllocateRow();
  void InitializeRow(uint64_t key, uint32_t row);
  absl::Status Grow();
  absl::Status Rehash(size_t capacity);
  void EraseSlot(size_t slot);
  bool Admit(uint64_t key);

  // Constant after construction.
  const EmbeddingTableOptions options_;
  const int dim_;
  const int state_floats_;
  const size_t row_bytes_;
  const bool track_changes_;

  internal::MappedBuffer arena_;
  uint32_t high_water_ = 0;          // rows ever handed out from the arena
  std::vector<uint32_t> free_rows_;  // erased rows, reused first
  internal::MappedBuffer index_;  // (capacity_) Slots
  size_t capacity_ = 0;
  size_t size_ = 0;
  size_t grow_at_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> pending_;  // sightings of not-yet-admitted ids

  size_t full_rejections_ = 0;
  uint32_t checkpoint_mark_ = 0;
  std::vector<uint32_t> dirty_rows_;  // may repeat or be stale; filtered by TakeChanges
  std::vector<uint64_t> erased_keys_;
};

template <typename Visit>
void EmbeddingTable::FindOrInsertBatch(const uint64_t* keys, size_t n, uint32_t now,
                                       Visit&& visit) {
  // Three stages in flight: hash + prefetch the home slot (i), peek at the slot and prefetch the
  // candidate row (i - A), resolve (i - 2A). The peek is only a hint; resolution probes again.
  constexpr size_t kAhead = 16;
  constexpr size_t kRing = 2 * kAhead + 1;
  uint32_t tags[kRing];
  for (size_t i = 0; i < n + 2 * kAhead; ++i) {
    if (i < n) {
      const uint32_t tag = uint32_t(Hash(keys[i]) >> 32);
      tags[i % kRing] = tag;
      __builtin_prefetch(&slots()[Home(tag)], 1, 3);
    }
    if (i >= kAhead && i - kAhead < n) {
      const Slot s = slots()[Home(tags[(i - kAhead) % kRing])];
      if (s.row != kNoRow) __builtin_prefetch(header(s.row), 1, 3);
    }
    if (i >= 2 * kAhead) {
      const size_t j = i - 2 * kAhead;
      const uint32_t tag = tags[j % kRing];
      size_t slot;
      uint32_t row = Probe(keys[j], tag, &slot);
      if (row == kNoRow) row = InsertAt(keys[j], tag, slot, now);
      visit(j, row);
    }
  }
}

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_EMBEDDING_TABLE_H_
