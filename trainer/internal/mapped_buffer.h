// Anonymous memory mappings for large arrays: a reserved range of address space that is committed
// (made readable/writable) as it grows, so that rows never move and resident memory follows use.
#ifndef EVOSCALE_TRAINER_INTERNAL_MAPPED_BUFFER_H_
#define EVOSCALE_TRAINER_INTERNAL_MAPPED_BUFFER_H_

#include <cstddef>

#include "absl/status/status.h"

namespace evoscale::trainer::internal {

// Owns one mapping. Not thread-safe; movable, not copyable.
class MappedBuffer {
 public:
  MappedBuffer() = default;
  ~MappedBuffer();
  MappedBuffer(MappedBuffer&& other) noexcept;
  MappedBuffer& operator=(MappedBuffer&& other) noexcept;
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;

  // Reserves `reserve_bytes` of address space without committing memory (PROT_NONE).
  absl::Status Reserve(size_t reserve_bytes);
  // Makes the first `bytes` usable (zero-filled on first touch). Grows in 64 KiB steps (huge
  // pages where the kernel allows, for whole committed 2 MiB ranges); never shrinks. RESOURCE_EXHAUSTED beyond the reservation or when the kernel refuses.
  absl::Status CommitAtLeast(size_t bytes);

  char* data() const { return data_; }
  size_t committed() const { return committed_; }
  size_t reserved() const { return reserved_; }

 private:
  void Release();

  char* data_ = nullptr;
  size_t reserved_ = 0;
  size_t committed_ = 0;
};

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_MAPPED_BUFFER_H_
