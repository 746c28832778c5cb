#include "service/store/internal/database_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace evoscale::service::internal {

absl::StatusOr<std::unique_ptr<DatabaseLock>> DatabaseLock::Acquire(const std::string& db_path) {
  const std::string lock_path = LockPathFor(db_path);
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("database \"", db_path,
                                                      "\": cannot open its lock file \"",
                                                      lock_path, "\": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    if (err == EWOULDBLOCK) {
      char buf[32] = {};
      const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
      holder = n > 0 ? std::string(absl::StripAsciiWhitespace(absl::string_view(buf, n))) : "";
    }
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat("database \"", db_path,
                                                        "\": cannot lock \"", lock_path,
                                                        "\": ", std::strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "database \"", db_path, "\" is in use by another evoscaled (pid ",
        holder.empty() ? "unknown" : holder, ", lock \"", lock_path,
        "\"): one evoscaled serves a database; stop that one or give another --db"));
  }
  // The holder's pid, for the message above. Failing to write it only weakens that message.
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t written = pwrite(fd, pid.data(), pid.size(), 0);
  }
  return std::unique_ptr<DatabaseLock>(new DatabaseLock(fd));
}

DatabaseLock::~DatabaseLock() { close(fd_); }

}  // namespace evoscale::service::internal
