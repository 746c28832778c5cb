#include "trainer/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "trainer/feature_id.h"

namespace evoscale::trainer {
namespace {

constexpr int kPrefetchAhead = 8;

inline uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::Create(
    EmbeddingTableOptions options) {
  if (options.dim <= 0 || options.dim > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding dim ", options.dim, " outside [1, 4096]"));
  }
  if (options.state_floats < 0 || options.state_floats > 4 * 4096 + 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state of ", options.state_floats, " floats per row"));
  }
  if (!(options.max_load_factor > 0.1 && options.max_load_factor <= 0.95)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_load_factor ", options.max_load_factor, " outside (0.1, 0.95]"));
  }
  if (options.max_rows == 0 || options.max_rows >= kNoRow) {
    return absl::InvalidArgumentError(absl::StrCat("max_rows ", options.max_rows));
  }
  std::unique_ptr<EmbeddingTable> table(new EmbeddingTable(std::move(options)));
  absl::Status status = table->Init();
  if (!status.ok()) return status;
  return table;
}

EmbeddingTable::EmbeddingTable(EmbeddingTableOptions options)
    : options_(std::move(options)),
      dim_(options_.dim),
      state_floats_(options_.state_floats),
      // Rows are a multiple of 16 bytes so that the header and the vectors stay aligned.
      row_bytes_((sizeof(RowHeader) + sizeof(float) * (dim_ + state_floats_) + 15) / 16 * 16),
      track_changes_(options_.track_changes) {}

absl::Status EmbeddingTable::Init() {
  absl::Status status = arena_.Reserve(options_.max_rows * row_bytes_);
  if (!status.ok()) return status;
  const size_t capacity = std::max<size_t>(options_.initial_capacity, 16);
  absl::StatusOr<internal::MappedBuffer> index = NewIndex(capacity);
  if (!index.ok()) return index.status();
  index_ = *std::move(index);
  capacity_ = capacity;
  grow_at_ = size_t(double(capacity) * options_.max_load_factor);
  return absl::OkStatus();
}

absl::StatusOr<internal::MappedBuffer> EmbeddingTable::NewIndex(size_t capacity) {
  internal::MappedBuffer index;
  absl::Status status = index.Reserve(capacity * sizeof(Slot));
  if (status.ok()) status = index.CommitAtLeast(capacity * sizeof(Slot));
  if (!status.ok()) return status;
  static_assert(kNoRow == 0xFFFFFFFFu);  // all-ones bytes make an empty slot
  std::memset(index.data(), 0xFF, capacity * sizeof(Slot));
  return index;
}

uint32_t EmbeddingTable::Find(uint64_t key) const {
  size_t slot;
  return Probe(key, uint32_t(Hash(key) >> 32), &slot);
}

bool EmbeddingTable::Admit(uint64_t key) {
  const uint32_t fid_slot = FidSlot(key);
  if (fid_slot >= options_.min_count_by_slot.size()) return true;
  const uint32_t threshold = options_.min_count_by_slot[fid_slot];
  if (threshold <= 1) return true;
  auto [it, inserted] = pending_.try_emplace(key, 0);
  if (++it->second < threshold) return false;
  pending_.erase(it);
  return true;
}

uint32_t EmbeddingTable::AllocateRow() {
  if (!free_rows_.empty()) {
    uint32_t row = free_rows_.back();
    free_rows_.pop_back();
    return row;
  }
  if (high_water_ >= options_.max_rows) return kNoRow;
  if (!arena_.CommitAtLeast((size_t{high_water_} + 1) * row_bytes_).ok()) return kNoRow;
  return high_water_++;
}

void EmbeddingTable::InitializeRow(uint64_t key, uint32_t row) {
  RowHeader* h = header(row);
  h->key = key;
  h->scratch = 0;
  float* emb = embedding(row);
  if (options_.init == EmbeddingTableOptions::Init::kConstant) {
    std::fill(emb, emb + dim_, options_.init_value);
  } else {
    // Box-Muller on a counter-based generator: the values depend only on (seed, key).
    const uint64_t base = SplitMix(options_.seed ^ SplitMix(key));
    for (int d = 0; d < dim_; d += 2) {
      const uint64_t r = SplitMix(base + uint64_t(d));
      const float u1 = (float(r & 0xFFFFFF) + 0.5f) * (1.0f / 16777216.0f);
      const float angle = float(r >> 40) * (6.2831853f / 16777216.0f);
      const float radius = std::sqrt(-2.0f * std::log(u1)) * options_.init_value;
      emb[d] = radius * std::cos(angle);
      if (d + 1 < dim_) emb[d + 1] = radius * std::sin(angle);
    }
  }
  float* st = state(row);
  std::fill(st, st + state_floats_, 0.0f);
  if (options_.init_state) options_.init_state(emb, st);
}

uint32_t EmbeddingTable::InsertAt(uint64_t key, uint32_t tag, size_t slot, uint32_t now) {
  if (!Admit(key)) return kNoRow;
  // Only after refused index growth: keep one slot empty so that every probe ends.
  const uint32_t row = size_ + 1 < capacity_ ? AllocateRow() : kNoRow;
  if (row == kNoRow) {
    ++full_rejections_;
    return kNoRow;
  }
  InitializeRow(key, row);
  header(row)->last_update = now;
  if (track_changes_) dirty_rows_.push_back(row);
  slots()[slot] = Slot{tag, row};
  if (++size_ > grow_at_ && !Grow().ok()) {
    // No memory for a larger index: keep probing this one, which still has free slots (a
    // refused growth is retried at the next insertion).
  }
  return row;
}

uint32_t EmbeddingTable::FindOrInsert(uint64_t key, uint32_t now) {
  const uint32_t tag = uint32_t(Hash(key) >> 32);
  size_t slot;
  const uint32_t row = Probe(key, tag, &slot);
  if (row != kNoRow) return row;
  return InsertAt(key, tag, slot, now);
}

void EmbeddingTable::FindBatch(const uint64_t* keys, size_t n, uint32_t* rows) const {
  uint32_t tags[2 * kPrefetchAhead + 1];
  constexpr size_t kRing = 2 * kPrefetchAhead + 1;
  for (size_t i = 0; i < n + 2 * kPrefetchAhead; ++i) {
    if (i < n) {
      const uint32_t tag = uint32_t(Hash(keys[i]) >> 32);
      tags[i % kRing] = tag;
      __builtin_prefetch(&slots()[Home(tag)], 0, 3);
    }
    if (i >= kPrefetchAhead && i - kPrefetchAhead < n) {
      const Slot s = slots()[Home(tags[(i - kPrefetchAhead) % kRing])];
      if (s.row != kNoRow) __builtin_prefetch(header(s.row), 0, 3);
    }
    if (i >= 2 * kPrefetchAhead) {
      const size_t j = i - 2 * kPrefetchAhead;
      size_t slot;
      rows[j] = Probe(keys[j], tags[j % kRing], &slot);
    }
  }
}

absl::Status EmbeddingTable::Grow() {
  return Rehash(std::min<size_t>(capacity_ + capacity_ / 2, size_t{1} << 32));
}

absl::Status EmbeddingTable::Reserve(size_t rows) {
  const size_t want = std::min<size_t>(
      size_t(std::ceil(double(rows) / options_.max_load_factor)) + 1, size_t{1} << 32);
  return want > capacity_ ? Rehash(want) : absl::OkStatus();
}

absl::Status EmbeddingTable::Rehash(size_t capacity) {
  absl::StatusOr<internal::MappedBuffer> grown = NewIndex(capacity);
  if (!grown.ok()) return grown.status();
  internal::MappedBuffer old = std::exchange(index_, *std::move(grown));
  const Slot* old_slots = reinterpret_cast<const Slot*>(old.data());
  const size_t old_capacity = std::exchange(capacity_, capacity);
  grow_at_ = size_t(double(capacity) * options_.max_load_factor);
  Slot* slots = this->slots();
  for (size_t k = 0; k < old_capacity; ++k) {
    const Slot s = old_slots[k];
    if (s.row == kNoRow) continue;
    size_t i = Home(s.tag);
    while (slots[i].row != kNoRow) i = Next(i);
    slots[i] = s;
  }
  return absl::OkStatus();
}

void EmbeddingTable::EraseSlot(size_t slot) {
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  size_t i = slot;
  size_t j = slot;
  while (true) {
    j = Next(j);
    if (slots()[j].row == kNoRow) break;
    const size_t home = Home(slots()[j].tag);
    // The entry at j may move to i unless its home lies cyclically in (i, j].
    const bool stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      slots()[i] = slots()[j];
      i = j;
    }
  }
  slots()[i] = Slot{0, kNoRow};
  --size_;
}

bool EmbeddingTable::Erase(uint64_t key) {
  size_t slot;
  const uint32_t row = Probe(key, uint32_t(Hash(key) >> 32), &slot);
  if (row == kNoRow) return false;
  EraseSlot(slot);
  free_rows_.push_back(row);
  if (track_changes_) erased_keys_.push_back(key);
  return true;
}

size_t EmbeddingTable::EvictOlderThan(uint32_t cutoff, std::vector<uint64_t>* evicted) {
  std::vector<uint64_t> victims;
  for (const Slot& s : absl::MakeConstSpan(slots(), capacity_)) {
    if (s.row != kNoRow && header(s.row)->last_update < cutoff) {
      victims.push_back(header(s.row)->key);
    }
  }
  for (uint64_t key : victims) Erase(key);
  if (evicted != nullptr) evicted->insert(evicted->end(), victims.begin(), victims.end());
  return victims.size();
}

uint32_t EmbeddingTable::Restore(uint64_t key, uint32_t last_update, const float* values) {
  const uint32_t tag = uint32_t(Hash(key) >> 32);
  size_t slot;
  uint32_t row = Probe(key, tag, &slot);
  if (row == kNoRow) {
    row = size_ + 1 < capacity_ ? AllocateRow() : kNoRow;
    if (row == kNoRow) return kNoRow;
    slots()[slot] = Slot{tag, row};
    header(row)->key = key;
    if (++size_ > grow_at_ && !Grow().ok()) {
      // As in InsertAt: the current index still has room; growth is retried later.
    }
  }
  RowHeader* h = header(row);
  h->last_update = last_update;
  h->scratch = 0;
  std::memcpy(embedding(row), values, sizeof(float) * (dim_ + state_floats_));
  return row;
}

void EmbeddingTable::TakeChanges(uint32_t mark, std::vector<uint32_t>* changed_rows,
                                 std::vector<uint64_t>* erased_keys) {
  std::sort(dirty_rows_.begin(), dirty_rows_.end());
  dirty_rows_.erase(std::unique(dirty_rows_.begin(), dirty_rows_.end()), dirty_rows_.end());
  changed_rows->clear();
  for (uint32_t row : dirty_rows_) {
    // Rows erased since are skipped (their keys are in erased_keys_) unless reused and live.
    if (Find(header(row)->key) == row) {
      changed_rows->push_back(row);
    }
  }
  erased_keys->swap(erased_keys_);
  erased_keys_.clear();
  dirty_rows_.clear();
  checkpoint_mark_ = mark;
}

void EmbeddingTable::ForEachRow(const std::function<void(uint32_t row)>& fn) const {
  for (const Slot& s : absl::MakeConstSpan(slots(), capacity_)) {
    if (s.row != kNoRow) fn(s.row);
  }
}

size_t EmbeddingTable::memory_bytes() const {
  return arena_.committed() + capacity_ * sizeof(Slot) +
         free_rows_.capacity() * sizeof(uint32_t) + dirty_rows_.capacity() * sizeof(uint32_t) +
         pending_.capacity() * (sizeof(uint64_t) + sizeof(uint32_t) + 1);
}

}  // namespace evoscale::trainer
