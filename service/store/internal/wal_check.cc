#include "service/store/internal/wal_check.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace evoscale::service::internal {
namespace {

// The WAL format (sqlite.org/fileformat2.html#walformat): a 32-byte header, then frames of a
// 24-byte header and one page. Checksums are cumulative over the header and every frame.
constexpr size_t kHeader = 32, kFrameHeader = 24;

uint32_t Be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

struct Checksum {
  uint32_t s0 = 0, s1 = 0;
  // Adds `n` bytes (a multiple of 8) read as 32-bit words in the WAL's byte order.
  void Add(const unsigned char* p, size_t n, bool big_endian) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uint32_t x0, x1;
      if (big_endian) {
        x0 = Be32(p + i);
        x1 = Be32(p + i + 4);
      } else {
        std::memcpy(&x0, p + i, 4);
        std::memcpy(&x1, p + i + 4, 4);
      }
      s0 += x0 + s1;
      s1 += x1 + s0;
    }
  }
};

}  // namespace

absl::StatusOr<WalReport> InspectWal(const std::string& wal_path) {
  WalReport report;
  std::ifstream in(wal_path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return report;
    return absl::FailedPreconditionError(
        absl::StrCat("\"", wal_path, "\": cannot be read: ", std::strerror(errno)));
  }
  // One frame at a time: a WAL can be far larger than the memory it would take to hold it.
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < kHeader) return report;  // SQLite treats a short WAL as empty
  unsigned char header[kHeader];
  if (!in.read(reinterpret_cast<char*>(header), kHeader)) {
    return absl::FailedPreconditionError(absl::StrCat("\"", wal_path, "\": cannot be read"));
  }
  const uint32_t magic = Be32(header);
  if ((magic & 0xFFFFFFFEu) != 0x377F0682u) {
    report.header_damaged = true;
    return report;
  }
  const bool big_endian = (magic & 1) != 0;
  const uint32_t page_size = Be32(header + 8);
  const uint32_t salt1 = Be32(header + 16), salt2 = Be32(header + 20);
  Checksum sum;
  sum.Add(header, 24, big_endian);
  const bool page_size_ok =
      page_size >= 512 && page_size <= 65536 && (page_size & (page_size - 1)) == 0;
  if (!page_size_ok || sum.s0 != Be32(header + 24) || sum.s1 != Be32(header + 28)) {
    report.header_damaged = true;
  }
  const size_t frame = kFrameHeader + (page_size_ok ? page_size : 4096);
  report.frames = static_cast<int64_t>((size - kHeader) / frame);
  report.partial_bytes = static_cast<int64_t>((size - kHeader) % frame);
  bool valid = !report.header_damaged;
  std::vector<unsigned char> buffer(frame);
  unsigned char* f = buffer.data();
  for (int64_t i = 0; i < report.frames; ++i) {
    if (!in.read(reinterpret_cast<char*>(f), static_cast<std::streamsize>(frame))) {
      return absl::FailedPreconditionError(
          absl::StrCat("\"", wal_path, "\": cannot be read at frame ", i + 1));
    }
    const bool ours = Be32(f + 8) == salt1 && Be32(f + 12) == salt2;
    const bool commit = Be32(f + 4) != 0;
    if (!ours) {
      if (valid) break;  // the end of this WAL: what follows is an older generation's
      continue;
    }
    if (valid) {
      sum.Add(f, 8, big_endian);
      sum.Add(f + kFrameHeader, frame - kFrameHeader, big_endian);
      if (sum.s0 == Be32(f + 16) && sum.s1 == Be32(f + 20)) {
        if (commit) {
          report.replayed = i + 1;
          ++report.commits;
        }
        continue;
      }
      valid = false;
      report.damaged_frame = i;
    }
    // After the damage: a commit of this WAL was written, and acknowledged, after it.
    if (commit) ++report.lost_commits;
  }
  return report;
}

}  // namespace evoscale::service::internal
