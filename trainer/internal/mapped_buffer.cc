#include "trainer/internal/mapped_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer::internal {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;  // one transparent huge page
// Commit granularity. Huge pages still back every 2 MiB-aligned range once it is wholly committed;
// committing in small steps keeps the tail of the buffer in small pages, so resident memory ends
// within 64 KiB of what is used instead of up to a huge page beyond it (for each table's arena
// and index: a few MiB over a trainer's shards).
constexpr size_t kCommitStep = size_t{64} << 10;
}  // namespace

MappedBuffer::~MappedBuffer() { Release(); }

MappedBuffer::MappedBuffer(MappedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      reserved_(std::exchange(other.reserved_, 0)),
      committed_(std::exchange(other.committed_, 0)) {}

MappedBuffer& MappedBuffer::operator=(MappedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    reserved_ = std::exchange(other.reserved_, 0);
    committed_ = std::exchange(other.committed_, 0);
  }
  return *this;
}

void MappedBuffer::Release() {
  if (data_ != nullptr) munmap(data_, reserved_);
  data_ = nullptr;
  reserved_ = committed_ = 0;
}

absl::Status MappedBuffer::Reserve(size_t reserve_bytes) {
  Release();
  reserve_bytes = (reserve_bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p =
      mmap(nullptr, reserve_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap reserve of ", reserve_bytes, " bytes: ", std::strerror(errno)));
  }
  data_ = static_cast<char*>(p);
  reserved_ = reserve_bytes;
  return absl::OkStatus();
}

absl::Status MappedBuffer::CommitAtLeast(size_t bytes) {
  if (bytes <= committed_) return absl::OkStatus();
  size_t target = (bytes + kCommitStep - 1) / kCommitStep * kCommitStep;
  if (target > reserved_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("buffer needs ", bytes, " bytes but reserved only ", reserved_));
  }
  if (mprotect(data_ + committed_, target - committed_, PROT_READ | PROT_WRITE) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mprotect commit of ", target, " bytes: ", std::strerror(errno)));
  }
  // Huge pages cut TLB misses on random row access; a hint only, so errors are ignored.
  madvise(data_ + committed_, target - committed_, MADV_HUGEPAGE);
  committed_ = target;
  return absl::OkStatus();
}

}  // namespace evoscale::trainer::internal
