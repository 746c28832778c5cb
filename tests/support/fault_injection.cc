// evoscale_fault_injection: an LD_PRELOAD library that makes the disk fail under a real
// process (for what cannot be made to fail for real here: fsync, a disk turning read-only
// while files are open for writing). It wraps write, pwrite, pwrite64, fsync and fdatasync;
// each call on a file whose path contains a configured substring fails with the configured
// errno. statvfs of such a path reports what a real fault would show: a read-only file system
// for a `write EROFS` rule, no free space for `write ENOSPC`. The configuration is the file named
// by EVOSCALE_FAULTS, re-read on every call, one rule per line:
//   write EROFS /db-dir/      writes to files under /db-dir/ fail with EROFS
//   fsync EIO evoscale.db     fsync and fdatasync of evoscale.db* fail with EIO
//   fsync EIO /evoscale.db$   a trailing $: only paths ending so (the database, not its -wal)
//   fsync HOLD2000 /evoscale.db   fsync and fdatasync of such a path wait 2000 ms, then succeed
//                                 (a slow disk), or sooner once the file EVOSCALE_FAULTS.release
//                                 exists; each hold appends "start N" before it and "end N"
//                                 after it to the file EVOSCALE_FAULTS.holds, N counting holds
// Known errnos: ENOSPC, EROFS, EIO, EDQUOT. An empty or missing file injects nothing.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Whether a call of kind `call` ("write" or "fsync") on `path` should fail (sets *error) or,
// for a HOLD rule, wait first (sets *hold_ms; the call then succeeds).
bool InjectPath(const char* call, const char* path, int* error, long* hold_ms = nullptr) {
  const char* config = std::getenv("EVOSCALE_FAULTS");
  if (config == nullptr) return false;
  const int saved = errno;
  FILE* f = std::fopen(config, "re");
  errno = saved;
  if (f == nullptr) return false;
  bool hit = false;
  char line[512], kind[32], name[32], needle[400];
  while (!hit && std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "%31s %31s %399s", kind, name, needle) != 3) continue;
    size_t length = std::strlen(needle);
    const bool at_end = length > 1 && needle[length - 1] == '$';
    if (at_end) needle[--length] = '\0';
    const size_t path_length = std::strlen(path);
    const bool applies =
        std::strcmp(kind, call) == 0 &&
        (at_end ? path_length >= length && std::strcmp(path + path_length - length, needle) == 0
                : std::strstr(path, needle) != nullptr);
    if (!applies) continue;
    if (hold_ms != nullptr && std::strncmp(name, "HOLD", 4) == 0) {
      *hold_ms = std::strtol(name + 4, nullptr, 10);
      continue;
    }
    static const struct {
      const char* name;
      int value;
    } kErrnos[] = {{"ENOSPC", ENOSPC}, {"EROFS", EROFS}, {"EIO", EIO}, {"EDQUOT", EDQUOT}};
    for (const auto& e : kErrnos) {
      if (std::strcmp(name, e.name) == 0) {
        *error = e.value;
        hit = true;
      }
    }
  }
  std::fclose(f);
  errno = saved;
  return hit;
}

// Appends "WHAT N" to EVOSCALE_FAULTS.holds (with the real write: this library's write is
// the faulty one).
void NoteHold(const char* what, long n) {
  char name[PATH_MAX];
  std::snprintf(name, sizeof name, "%s.holds", std::getenv("EVOSCALE_FAULTS"));
  const int saved = errno;
  FILE* f = std::fopen(name, "ae");
  if (f != nullptr) {
    std::fprintf(f, "%s %ld\n", what, n);
    std::fclose(f);
  }
  errno = saved;
}

// A HOLD rule's wait: `hold_ms`, or less once EVOSCALE_FAULTS.release exists; noted.
void Hold(long hold_ms) {
  static std::atomic<long> holds{0};
  const long n = ++holds;
  NoteHold("start", n);
  char release[PATH_MAX];
  std::snprintf(release, sizeof release, "%s.release", std::getenv("EVOSCALE_FAULTS"));
  const struct timespec tick = {0, 10 * 1000000};
  const int saved = errno;
  for (long waited = 0; waited < hold_ms && access(release, F_OK) != 0; waited += 10) {
    nanosleep(&tick, nullptr);
  }
  errno = saved;
  NoteHold("end", n);
}

bool Inject(const char* call, int fd, int* error) {
  if (std::getenv("EVOSCALE_FAULTS") == nullptr) return false;
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  // One read of the rules decides both the hold and the failure.
  long hold_ms = 0;
  const bool hit =
      InjectPath(call, path, error, std::strcmp(call, "fsync") == 0 ? &hold_ms : nullptr);
  if (hold_ms > 0) Hold(hold_ms);
  return hit;
}

// What statvfs of a faulty path shows.
void Disguise(const char* path, struct statvfs* buf) {
  int error = 0;
  if (!InjectPath("write", path, &error)) return;
  if (error == EROFS) buf->f_flag |= ST_RDONLY;
  if (error == ENOSPC || error == EDQUOT) buf->f_bavail = buf->f_bfree = 0;
}

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// `next(fd, args...)`, unless a rule of kind `call` applies to fd's file: then -1 and its errno.
template <typename Fn, typename... Args>
auto Faulty(const char* call, Fn next, int fd, Args... args) -> decltype(next(fd, args...)) {
  int error = 0;
  if (Inject(call, fd, &error)) {
    errno = error;
    return -1;
  }
  return next(fd, args...);
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t count) {
  static auto next = Next<ssize_t (*)(int, const void*, size_t)>("write");
  return fd > STDERR_FILENO ? Faulty("write", next, fd, buf, count) : next(fd, buf, count);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static auto next = Next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  return Faulty("write", next, fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  static auto next = Next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  return Faulty("write", next, fd, buf, count, offset);
}

int statvfs(const char* path, struct statvfs* buf) {
  static auto next = Next<int (*)(const char*, struct statvfs*)>("statvfs");
  const int rc = next(path, buf);
  if (rc == 0) Disguise(path, buf);
  return rc;
}

int statvfs64(const char* path, struct statvfs64* buf) {
  static auto next = Next<int (*)(const char*, struct statvfs64*)>("statvfs64");
  const int rc = next(path, buf);
  // The same layout on 64-bit Linux.
  if (rc == 0) Disguise(path, reinterpret_cast<struct statvfs*>(buf));
  return rc;
}

int fsync(int fd) {
  static auto next = Next<int (*)(int)>("fsync");
  return Faulty("fsync", next, fd);
}

int fdatasync(int fd) {
  static auto next = Next<int (*)(int)>("fdatasync");
  return Faulty("fsync", next, fd);
}

}  // extern "C"
