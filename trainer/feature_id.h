// 64-bit feature ids made of a slot (the feature field) and a hash of the raw value, laid out as
// Monolith's FIDv2: the top 15 bits hold the slot, the low 48 bits the hash. Ids of different
// slots never collide, and the slot of any id is recoverable without a lookup.
#ifndef EVOSCALE_TRAINER_FEATURE_ID_H_
#define EVOSCALE_TRAINER_FEATURE_ID_H_

#include <cstdint>

namespace evoscale::trainer {

inline constexpr int kFidSlotBits = 15;
inline constexpr int kFidHashBits = 48;
inline constexpr uint32_t kMaxSlot = (1u << kFidSlotBits) - 1;
inline constexpr uint64_t kFidHashMask = (uint64_t{1} << kFidHashBits) - 1;

// Mixes a raw feature value into the 48 hash bits (splitmix64 finaliser).
constexpr uint64_t HashFeatureValue(uint64_t value) {
  value += 0x9E3779B97F4A7C15ull;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

// The id of `value` in `slot` (slot must be <= kMaxSlot; bit 63 stays clear).
constexpr uint64_t MakeFid(uint32_t slot, uint64_t value) {
  return (uint64_t{slot} << kFidHashBits) | (HashFeatureValue(value) & kFidHashMask);
}

constexpr uint32_t FidSlot(uint64_t fid) { return uint32_t(fid >> kFidHashBits) & kMaxSlot; }

// The shard (of num_shards) that owns `fid`. Uses the low half of a hash whose high half the
// embedding table uses for its index, so shard choice and slot placement stay independent.
constexpr uint32_t ShardOfFid(uint64_t fid, uint32_t num_shards) {
  uint64_t h = fid * 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return uint32_t((uint64_t(uint32_t(h)) * num_shards) >> 32);
}

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_FEATURE_ID_H_
