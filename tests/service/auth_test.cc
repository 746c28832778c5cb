// Tests of service/auth.h: the token file parser, Check() and IsLoopbackAddress().
#include "service/auth.h"

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/test_support.h"

namespace evoscale::service {
namespace {

using ::absl::StatusCode;
using ::evoscale::service::testing::ScopedTempDir;
using ::evoscale::service::testing::StatusIs;
using ::testing::Eq;
using ::testing::HasSubstr;

constexpr char kTokens[] =
    "# evoscaled tokens\n"
    "\n"
    "admintoken0123456789 admin\n"
    "  writertoken0123456789\twriter  \n"
    "readertoken0123456789 reader\n";

class TokenAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TokenAuth>> auth = TokenAuth::FromString(kTokens, "tokens");
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = *std::move(auth);
  }

  // The status FromString() answers for `text`.
  static absl::Status ParseStatus(absl::string_view text) {
    return TokenAuth::FromString(text, "tokens.txt").status();
  }

  std::unique_ptr<TokenAuth> auth_;
};

TEST_F(TokenAuthTest, FromStringSkipsCommentsBlankLinesAndExtraWhitespace) {
  EXPECT_TRUE(auth_->enabled());
  EXPECT_TRUE(auth_->Check("Bearer writertoken0123456789", Role::kWriter).ok());
}

TEST_F(TokenAuthTest, FromStringRejectsUnknownRoleNamingTheLine) {
  EXPECT_THAT(ParseStatus("# comment\n\nabcdefghijklmnop0 root\n"),
              StatusIs(StatusCode::kInvalidArgument,
                       Eq("auth tokens file \"tokens.txt\" line 3: unknown role \"root\"; want "
                          "admin, writer or reader")));
}

TEST_F(TokenAuthTest, FromStringRejectsRoleInWrongCase) {
  EXPECT_THAT(ParseStatus("abcdefghijklmnop0 Admin\n"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("line 1: unknown role \"Admin\"")));
}

TEST_F(TokenAuthTest, FromStringRejectsTokenShorterThan16Characters) {
  EXPECT_THAT(ParseStatus("abcdefghijklmnop admin\nshorttoken reader\n"),
              StatusIs(StatusCode::kInvalidArgument,
                       Eq("auth tokens file \"tokens.txt\" line 2: token shorter than 16 "
                          "characters")));
}

TEST_F(TokenAuthTest, FromStringRejectsDuplicateTokenEvenWithAnotherRole) {
  EXPECT_THAT(ParseStatus("abcdefghijklmnop admin\n\nabcdefghijklmnop reader\n"),
              StatusIs(StatusCode::kInvalidArgument,
                       Eq("auth tokens file \"tokens.txt\" line 3: duplicate token")));
}

TEST_F(TokenAuthTest, FromStringRejectsThreeFields) {
  EXPECT_THAT(ParseStatus("abcdefghijklmnop admin extra\n"),
              StatusIs(StatusCode::kInvalidArgument,
                       Eq("auth tokens file \"tokens.txt\" line 1: want \"TOKEN ROLE\"")));
}

TEST_F(TokenAuthTest, FromStringRejectsOneField) {
  EXPECT_THAT(ParseStatus("abcdefghijklmnop admin\nabcdefghijklmnopq\n"),
              StatusIs(StatusCode::kInvalidArgument,
                       Eq("auth tokens file \"tokens.txt\" line 2: want \"TOKEN ROLE\"")));
}

TEST_F(TokenAuthTest, FromStringRejectsEmptyText) {
  EXPECT_THAT(ParseStatus(""), StatusIs(StatusCode::kInvalidArgument,
                                        Eq("auth tokens file \"tokens.txt\": no tokens")));
}

TEST_F(TokenAuthTest, FromStringRejectsOnlyCommentsAndBlankLines) {
  EXPECT_THAT(
      ParseStatus("# nobody\n\n   \n# yet\n"),
      StatusIs(StatusCode::kInvalidArgument, Eq("auth tokens file \"tokens.txt\": no tokens")));
}

TEST_F(TokenAuthTest, FromFileReadsTheFile) {
  ScopedTempDir dir;
  const std::string path = dir.File("tokens");
  std::ofstream(path) << kTokens;
  absl::StatusOr<std::unique_ptr<TokenAuth>> auth = TokenAuth::FromFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE((*auth)->Check("Bearer admintoken0123456789", Role::kAdmin).ok());
}

TEST_F(TokenAuthTest, FromFileNamesTheFileInParseErrors) {
  ScopedTempDir dir;
  const std::string path = dir.File("tokens");
  std::ofstream(path) << "abcdefghijklmnop superuser\n";
  EXPECT_THAT(TokenAuth::FromFile(path).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("auth tokens file \"" + path + "\" line 1: unknown role")));
}

TEST_F(TokenAuthTest, FromFileMissingIsNotFound) {
  ScopedTempDir dir;
  const std::string path = dir.File("absent");
  EXPECT_THAT(
      TokenAuth::FromFile(path).status(),
      StatusIs(StatusCode::kNotFound, Eq("auth tokens file \"" + path + "\": cannot open")));
}

TEST_F(TokenAuthTest, CheckWithoutTokensAllowsEverything) {
  TokenAuth open;
  EXPECT_FALSE(open.enabled());
  EXPECT_TRUE(open.Check("", Role::kAdmin).ok());
  EXPECT_TRUE(open.Check("Bearer nonsense", Role::kAdmin).ok());
}

TEST_F(TokenAuthTest, CheckMissingHeaderIsUnauthenticated) {
  EXPECT_THAT(
      auth_->Check("", Role::kReader),
      StatusIs(StatusCode::kUnauthenticated, Eq("missing \"authorization: Bearer TOKEN\"")));
}

TEST_F(TokenAuthTest, CheckOtherSchemeIsUnauthenticated) {
  EXPECT_THAT(auth_->Check("Basic admintoken0123456789", Role::kReader),
              StatusIs(StatusCode::kUnauthenticated, Eq("authorization: want \"Bearer TOKEN\"")));
  EXPECT_THAT(auth_->Check("admintoken0123456789", Role::kReader),
              StatusIs(StatusCode::kUnauthenticated, Eq("authorization: want \"Bearer TOKEN\"")));
}

TEST_F(TokenAuthTest, CheckUnknownTokenIsUnauthenticated) {
  EXPECT_THAT(auth_->Check("Bearer admintoken012345678", Role::kReader),
              StatusIs(StatusCode::kUnauthenticated, Eq("authorization: unknown token")));
}

TEST_F(TokenAuthTest, CheckRoleBelowNeededIsPermissionDenied) {
  EXPECT_THAT(auth_->Check("Bearer readertoken0123456789", Role::kWriter),
              StatusIs(StatusCode::kPermissionDenied,
                       Eq("role \"reader\" may not do this; needs \"writer\"")));
  EXPECT_THAT(auth_->Check("Bearer writertoken0123456789", Role::kAdmin),
              StatusIs(StatusCode::kPermissionDenied,
                       Eq("role \"writer\" may not do this; needs \"admin\"")));
}

TEST_F(TokenAuthTest, CheckRoleAtOrAboveNeededIsOk) {
  for (Role needed : {Role::kReader, Role::kWriter, Role::kAdmin}) {
    EXPECT_TRUE(auth_->Check("Bearer admintoken0123456789", needed).ok()) << RoleName(needed);
  }
  EXPECT_TRUE(auth_->Check("Bearer writertoken0123456789", Role::kReader).ok());
  EXPECT_TRUE(auth_->Check("Bearer readertoken0123456789", Role::kReader).ok());
}

TEST_F(TokenAuthTest, CheckAcceptsLowerCaseSchemeAndTrailingSpace) {
  EXPECT_TRUE(auth_->Check("bearer admintoken0123456789 ", Role::kAdmin).ok());
}

class LoopbackAddressTest : public ::testing::Test {};

TEST_F(LoopbackAddressTest, LoopbackHostsAreLoopback) {
  for (const char* address : {"127.0.0.1:50051", "127.0.0.1:0", "127.1.2.3:80", "localhost:8080",
                              "[::1]:50051", "127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
}

TEST_F(LoopbackAddressTest, OtherHostsAreNotLoopback) {
  for (const char* address :
       {"0.0.0.0:0", "[::]:50051", "10.0.0.1:80", "192.168.1.127:80", "example.com:80", ":8080", "",
        "[::ffff:10.0.0.1]:80", "localhost.example.com:80", "128.0.0.1:80"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST_F(LoopbackAddressTest, HostNameStartingWith127IsNotLoopback) {
  EXPECT_FALSE(IsLoopbackAddress("127.example.com:50051"));
}

}  // namespace
}  // namespace evoscale::service
