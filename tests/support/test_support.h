// What every test binary may share: a scoped temp directory, an absl::Status matcher that
// checks the code and the message together, and a wait for a condition with a deadline.
// Depends on Abseil and GoogleTest only.
#ifndef EVOSCALE_TESTS_SUPPORT_TEST_SUPPORT_H_
#define EVOSCALE_TESTS_SUPPORT_TEST_SUPPORT_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::testing {

// A fresh directory (mkdtemp under the test temp dir), removed with its content on
// destruction. Not thread-safe.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string templ = ::testing::TempDir() + "evoscale_service_test.XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << templ << "): " << std::strerror(errno);
    }
    path_ = templ;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

// Matches an absl::Status with code `code` and a message matching `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher,
           absl::StrCat("has code ", absl::StatusCodeToString(code), " and a message that ",
                        ::testing::DescribeMatcher<std::string>(message_matcher))) {
  if (arg.code() != code) {
    *result_listener << "whose code is " << absl::StatusCodeToString(arg.code()) << " (message \""
                     << arg.message() << "\")";
    return false;
  }
  return ::testing::ExplainMatchResult(message_matcher, std::string(arg.message()),
                                       result_listener);
}

// Whether process `pid` is gone: no /proc entry, or a zombie (in a container, a zombie may wait
// for a reaper that never comes).
inline bool ProcessGone(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && stat.substr(close + 2, 1) == "Z";
}

// Waits for `condition` to hold, checking it every `poll`, for at most `timeout`. Returns
// whether it held; the caller asserts on that and says what it waited for. The one way tests
// wait for something another thread or process does: never a bare sleep.
inline bool AwaitCondition(absl::FunctionRef<bool()> condition,
                           absl::Duration timeout = absl::Seconds(60),
                           absl::Duration poll = absl::Milliseconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(poll);
  }
}

// The whole file at `path`, bytes as they are; empty when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_SUPPORT_TEST_SUPPORT_H_
