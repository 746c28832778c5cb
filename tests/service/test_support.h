// What the service and CLI tests share beyond tests/support/: gRPC status matchers that check
// the code and the message together, and a StudyService client.
#ifndef EVOSCALE_TESTS_SERVICE_TEST_SUPPORT_H_
#define EVOSCALE_TESTS_SERVICE_TEST_SUPPORT_H_

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "evoscale/v1/study.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

// Lets gtest print a grpc::Status readably (found by argument-dependent lookup).
namespace grpc {
inline void PrintTo(const Status& status, std::ostream* os) {
  *os << "grpc::Status(" << static_cast<int>(status.error_code()) << ", \""
      << status.error_message() << "\")";
}
}  // namespace grpc

namespace evoscale::service::testing {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;

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

// A StudyService client over its own channel to `address` ("127.0.0.1:PORT"). Every call
// carries a deadline of kDeadline and, when the token is not empty, the metadata
// "authorization: Bearer TOKEN". The Must* shorthands EXPECT the call to succeed and return
// what it answered. Not thread-safe.
class StudyClient {
 public:
  using Stub = v1::StudyService::Stub;

  static constexpr absl::Duration kDeadline = absl::Seconds(60);

  explicit StudyClient(const std::string& address, std::string token = "")
      : stub_(v1::StudyService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        token_(std::move(token)) {}

  const std::string& token() const { return token_; }
  // The bearer token sent from the next call on; empty: none.
  void set_token(std::string token) { token_ = std::move(token); }

  // Sets the deadline and the token (if any) on `ctx`, as Call() does.
  void PrepareContext(grpc::ClientContext* ctx) const {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + kDeadline));
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  }

  // Calls `rpc` (e.g. &Stub::GetStudy) with `req`, filling `resp`.
  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*),
                    const Req& req, Resp* resp) const {
    grpc::ClientContext ctx;
    PrepareContext(&ctx);
    return (stub_.get()->*rpc)(&ctx, req, resp);
  }

  grpc::Status CreateStudy(const v1::StudySpec& spec, v1::Study* out,
                           const std::string& display_name = "") const {
    v1::CreateStudyRequest req;
    *req.mutable_study()->mutable_spec() = spec;
    req.mutable_study()->set_display_name(display_name);
    return Call(&Stub::CreateStudy, req, out);
  }

  grpc::Status AddMeasurement(const std::string& trial, const v1::Measurement& m) const {
    v1::AddTrialMeasurementRequest req;
    req.set_trial_name(trial);
    *req.mutable_measurement() = m;
    v1::Trial resp;
    return Call(&Stub::AddTrialMeasurement, req, &resp);
  }

  // ---- Shorthands; each EXPECTs that the call succeeded. ----

  v1::Study MustCreateStudy(const v1::StudySpec& spec, const std::string& display_name = "") const {
    v1::Study study;
    EXPECT_THAT(CreateStudy(spec, &study, display_name), GrpcOk());
    return study;
  }

  v1::Study MustGetStudy(const std::string& name) const {
    v1::GetStudyRequest req;
    req.set_name(name);
    v1::Study resp;
    EXPECT_THAT(Call(&Stub::GetStudy, req, &resp), GrpcOk());
    return resp;
  }

  // The first page of studies, in the server's default page size.
  v1::ListStudiesResponse MustListStudies() const {
    v1::ListStudiesRequest req;
    v1::ListStudiesResponse resp;
    EXPECT_THAT(Call(&Stub::ListStudies, req, &resp), GrpcOk());
    return resp;
  }

  v1::Trial MustCreateTrial(const std::string& study, const v1::Trial& trial) const {
    v1::CreateTrialRequest req;
    req.set_parent(study);
    *req.mutable_trial() = trial;
    v1::Trial resp;
    EXPECT_THAT(Call(&Stub::CreateTrial, req, &resp), GrpcOk());
    return resp;
  }

  v1::Trial MustGetTrial(const std::string& name) const {
    v1::GetTrialRequest req;
    req.set_name(name);
    v1::Trial resp;
    EXPECT_THAT(Call(&Stub::GetTrial, req, &resp), GrpcOk());
    return resp;
  }

  v1::SuggestTrialsResponse MustSuggest(const std::string& study, int count,
                                        const std::string& client_id) const {
    v1::SuggestTrialsRequest req;
    req.set_parent(study);
    req.set_suggestion_count(count);
    req.set_client_id(client_id);
    v1::SuggestTrialsResponse resp;
    EXPECT_THAT(Call(&Stub::SuggestTrials, req, &resp), GrpcOk());
    return resp;
  }

  v1::Trial MustComplete(const std::string& trial, const v1::Measurement& final_measurement) const {
    v1::CompleteTrialRequest req;
    req.set_name(trial);
    *req.mutable_final_measurement() = final_measurement;
    v1::Trial resp;
    EXPECT_THAT(Call(&Stub::CompleteTrial, req, &resp), GrpcOk());
    return resp;
  }

 private:
  std::unique_ptr<Stub> stub_;
  std::string token_;
};

}  // namespace evoscale::service::testing

#endif  // EVOSCALE_TESTS_SERVICE_TEST_SUPPORT_H_
