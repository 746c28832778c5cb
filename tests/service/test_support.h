// What the service tests share: a scoped temp directory and status matchers that check the
// code and the message together.
#ifndef EVOSCALE_TESTS_SERVICE_TEST_SUPPORT_H_
#define EVOSCALE_TESTS_SERVICE_TEST_SUPPORT_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"

// Lets gtest print a grpc::Status readably (found by argument-dependent lookup).
namespace grpc {
inline void PrintTo(const Status& status, std::ostream* os) {
  *os << "grpc::Status(" << static_cast<int>(status.error_code()) << ", \""
      << status.error_message() << "\")";
}
}  // namespace grpc

namespace evoscale::service::testing {

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

// Matches a grpc::Status with code `code` and a message matching `message_matcher`.
MATCHER_P2(GrpcStatusIs, code, message_matcher,
           absl::StrCat("has gRPC code ", static_cast<int>(code), " and a message that ",
                        ::testing::DescribeMatcher<std::string>(message_matcher))) {
  if (arg.error_code() != code) {
    *result_listener << "whose gRPC code is " << static_cast<int>(arg.error_code())
                     << " (message \"" << arg.error_message() << "\")";
    return false;
  }
  return ::testing::ExplainMatchResult(message_matcher, arg.error_message(), result_listener);
}

// Matches an OK grpc::Status.
MATCHER(GrpcOk, "is OK") {
  if (arg.ok()) return true;
  *result_listener << "whose gRPC code is " << static_cast<int>(arg.error_code()) << " (message \""
                   << arg.error_message() << "\")";
  return false;
}

}  // namespace evoscale::service::testing

#endif  // EVOSCALE_TESTS_SERVICE_TEST_SUPPORT_H_
