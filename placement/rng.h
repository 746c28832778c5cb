// The replay's random numbers: xoshiro256** seeded through splitmix64, so that a seed gives the
// same pods, order and tie breaks on every platform (std::uniform_int_distribution does not).
// Not thread-safe; each replay owns one.

#ifndef EVOSCALE_PLACEMENT_RNG_H_
#define EVOSCALE_PLACEMENT_RNG_H_

#include <cstdint>

namespace evoscale::placement {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n); n > 0. Lemire's multiply-and-reject, without bias.
  uint64_t Below(uint64_t n) {
    unsigned __int128 product = static_cast<unsigned __int128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(product);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        product = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace evoscale::placement

#endif  // EVOSCALE_PLACEMENT_RNG_H_
