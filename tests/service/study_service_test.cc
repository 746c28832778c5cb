// Tests of the StudyService through a real gRPC channel to an in-process evoscaled
// (service/server.h) on a real SQLite file in a temp dir, with an injected ManualClock.
// Every rejected request is also checked to leave the database exactly as it was.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "service/common/clock.h"
#include "service/http_server.h"
#include "service/server.h"
#include "tests/service/test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::service::testing::GrpcOk;
using ::evoscale::service::testing::GrpcStatusIs;
using ::evoscale::service::testing::ScopedTempDir;
using ::evoscale::service::testing::StatusIs;
using ::evoscale::service::testing::StudyClient;
using ::google::protobuf::util::MessageDifferencer;
using ::grpc::StatusCode;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Three parameters, one with a conditional child: "momentum" exists only when opt == "sgd".
constexpr char kValidSpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  parameters {
    name: "x"
    double_spec { min: 0 max: 1 }
  }
  parameters {
    name: "n"
    integer_spec { min: 1 max: 10 }
  }
  parameters {
    name: "opt"
    categorical_spec { values: "sgd" values: "adam" }
    children {
      parent_categorical_values: "sgd"
      parameter_spec {
        name: "momentum"
        double_spec { min: 0 max: 1 }
      }
    }
  }
  algorithm { algorithm: RANDOM seed: 7 }
)pb";

template <typename M>
M ParseText(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

v1::StudySpec ValidSpec() { return ParseText<v1::StudySpec>(kValidSpec); }

// A spec with the single metric "loss", algorithm RANDOM and `parameters` (text format of
// the repeated `parameters` field).
v1::StudySpec SpecWithParameters(const std::string& parameters) {
  return ParseText<v1::StudySpec>(absl::StrCat(R"pb(metrics { name: "loss" goal: MINIMIZE }
                                                    algorithm { algorithm: RANDOM })pb",
                                               parameters));
}

v1::Measurement Loss(double loss, int64_t step = 0) {
  v1::Measurement m;
  m.set_step(step);
  (*m.mutable_metrics())["loss"] = loss;
  return m;
}

// A trial of ValidSpec() with opt = "adam" (no conditional child).
v1::Trial AdamTrial(double x, int64_t n) {
  v1::Trial t = ParseText<v1::Trial>(R"pb(parameters { name: "opt" string_value: "adam" })pb");
  v1::Parameter* px = t.add_parameters();
  px->set_name("x");
  px->set_double_value(x);
  v1::Parameter* pn = t.add_parameters();
  pn->set_name("n");
  pn->set_int_value(n);
  return t;
}

std::vector<int64_t> Ids(const google::protobuf::RepeatedPtrField<v1::Trial>& trials) {
  std::vector<int64_t> ids;
  for (const v1::Trial& t : trials) ids.push_back(t.id());
  return ids;
}

// Every row of the studies and trials tables in key order, blobs hex-encoded, read through
// a separate read-only connection: equal dumps mean an unchanged database.
std::string DumpDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  if (int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr); rc != SQLITE_OK) {
    ADD_FAILURE() << "open " << path << ": " << sqlite3_errstr(rc);
    sqlite3_close(db);
    return "";
  }
  std::string out;
  for (const char* sql :
       {"SELECT * FROM studies ORDER BY id", "SELECT * FROM trials ORDER BY study_id, id"}) {
    absl::StrAppend(&out, sql, ":\n");
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
      continue;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        if (i > 0) out += " | ";
        switch (sqlite3_column_type(s, i)) {
          case SQLITE_INTEGER:
            absl::StrAppend(&out, sqlite3_column_int64(s, i));
            break;
          case SQLITE_FLOAT:
            absl::StrAppend(&out, sqlite3_column_double(s, i));
            break;
          case SQLITE_TEXT: {
            const char* text = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
            absl::StrAppend(&out, "'", absl::CEscape(std::string(text, sqlite3_column_bytes(s, i))),
                            "'");
            break;
          }
          case SQLITE_BLOB: {
            const char* blob = static_cast<const char*>(sqlite3_column_blob(s, i));
            absl::StrAppend(
                &out, "x'",
                absl::BytesToHexString(absl::string_view(blob, sqlite3_column_bytes(s, i))), "'");
            break;
          }
          default:
            out += "NULL";
        }
      }
      out += "\n";
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return out;
}

// One integer from `sql`, through a separate read-only connection.
int64_t QueryInt(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
      value = sqlite3_column_int64(s, 0);
    } else {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return value;
}

struct HttpReply {
  int status = 0;
  std::string headers;  // the raw header lines
  std::string body;
};

// GET `target` from 127.0.0.1:`port` over a plain socket (HTTP/1.1, Connection: close).
// Socket timeouts bound the wait; a failure is reported and answers status 0.
HttpReply HttpCall(int port, const std::string& method, const std::string& target,
                   const std::string& authorization = "") {
  HttpReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return reply;
  }
  timeval timeout{.tv_sec = 30, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
    close(fd);
    return reply;
  }
  std::string request =
      absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  if (!authorization.empty()) absl::StrAppend(&request, "Authorization: ", authorization, "\r\n");
  request += "\r\n";
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ADD_FAILURE() << "send: " << std::strerror(errno);
      close(fd);
      return reply;
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      ADD_FAILURE() << "recv: " << std::strerror(errno);
      break;
    }
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  const size_t space = raw.find(' ');
  const size_t header_end = raw.find("\r\n\r\n");
  if (space == std::string::npos || header_end == std::string::npos ||
      !absl::SimpleAtoi(raw.substr(space + 1, 3), &reply.status)) {
    ADD_FAILURE() << "malformed HTTP reply: " << raw;
    return reply;
  }
  reply.headers = raw.substr(0, header_end);
  reply.body = raw.substr(header_end + 4);
  return reply;
}

HttpReply HttpGet(int port, const std::string& target, const std::string& authorization = "") {
  return HttpCall(port, "GET", target, authorization);
}

// Owns an in-process evoscaled on a fresh database and a StudyClient connected to it.
class StudyServiceTest : public ::testing::Test {
 protected:
  using Stub = StudyClient::Stub;

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  virtual ServerOptions Options() {
    ServerOptions options;
    options.db_path = db_path_;
    options.grpc_address = "127.0.0.1:0";
    options.http_address = "127.0.0.1:0";
    options.clock = &clock_;
    return options;
  }

  // Starts the server and a client that sends `token` (empty: none).
  void StartServer(const std::string& token = "") {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(Options());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->grpc_port(), 0);
    ASSERT_GT(server_->http_port(), 0);
    client_ =
        std::make_unique<StudyClient>(absl::StrCat("127.0.0.1:", server_->grpc_port()), token);
  }

  // Destroys the server (closing the database) and starts a new one on the same file, with a
  // new client that sends the same token.
  void RestartServer() {
    const std::string token = client_->token();
    client_.reset();
    server_.reset();
    ASSERT_NO_FATAL_FAILURE(StartServer(token));
  }

  std::string Dump() { return DumpDatabase(db_path_); }

  // Fills the database so that "unchanged" means something: a study of ValidSpec() whose
  // trial 1 SUCCEEDED, trial 2 is ACTIVE with one measurement and trial 3 is ACTIVE.
  void Seed() {
    seed_study_ = client_->MustCreateStudy(ValidSpec()).name();
    v1::SuggestTrialsResponse r = client_->MustSuggest(seed_study_, 3, "seed-worker");
    ASSERT_EQ(r.trials_size(), 3);
    for (const v1::Trial& t : r.trials()) seed_trials_.push_back(t.name());
    client_->MustComplete(seed_trials_[0], Loss(0.5));
    ASSERT_THAT(client_->AddMeasurement(seed_trials_[1], Loss(0.7, 1)), GrpcOk());
  }

  // Asserts that `spec` is rejected with INVALID_ARGUMENT and `message` and that the
  // (seeded) database did not change.
  void ExpectCreateStudyRejected(const v1::StudySpec& spec, const std::string& message,
                                 const std::string& display_name = "") {
    if (seed_study_.empty()) {
      ASSERT_NO_FATAL_FAILURE(Seed());
    }
    const std::string before = Dump();
    v1::Study study;
    EXPECT_THAT(client_->CreateStudy(spec, &study, display_name),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr(message)));
    EXPECT_EQ(Dump(), before);
  }

  // Asserts that CreateTrial of `trial` in the seeded study is rejected with
  // INVALID_ARGUMENT and `message`, and that the database did not change.
  void ExpectCreateTrialRejected(const v1::Trial& trial, const std::string& message) {
    if (seed_study_.empty()) {
      ASSERT_NO_FATAL_FAILURE(Seed());
    }
    const std::string before = Dump();
    v1::CreateTrialRequest req;
    req.set_parent(seed_study_);
    *req.mutable_trial() = trial;
    v1::Trial resp;
    EXPECT_THAT(client_->Call(&Stub::CreateTrial, req, &resp),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr(message)));
    EXPECT_EQ(Dump(), before);
  }

  ScopedTempDir dir_;
  const std::string db_path_ = dir_.File("evoscale.db");
  ManualClock clock_{absl::FromUnixSeconds(1700000000)};
  std::unique_ptr<Server> server_;
  std::unique_ptr<StudyClient> client_;   // set by StartServer()
  std::string seed_study_;                // set by Seed()
  std::vector<std::string> seed_trials_;  // set by Seed()
};

// ---- CreateStudy: invalid specs ------------------------------------------------------------

TEST_F(StudyServiceTest, CreateStudyRejectsNoMetrics) {
  v1::StudySpec spec = ValidSpec();
  spec.clear_metrics();
  ExpectCreateStudyRejected(spec, "study.spec.metrics: at least one metric is required");
}

TEST_F(StudyServiceTest, CreateStudyRejectsEmptyMetricName) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_metrics(0)->clear_name();
  ExpectCreateStudyRejected(spec, "study.spec.metrics[0].name: must not be empty");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDuplicateMetricNames) {
  v1::StudySpec spec = ValidSpec();
  *spec.add_metrics() = spec.metrics(0);
  spec.mutable_metrics(1)->set_goal(v1::MetricSpec::MAXIMIZE);
  ExpectCreateStudyRejected(spec, "study.spec.metrics[1].name: duplicate metric name \"loss\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsUnspecifiedGoal) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_metrics(0)->set_goal(v1::MetricSpec::GOAL_UNSPECIFIED);
  ExpectCreateStudyRejected(spec, "study.spec.metrics[0].goal: must be MAXIMIZE or MINIMIZE");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNonFiniteSafetyThreshold) {
  for (double threshold : {kNaN, kInf, -kInf}) {
    v1::StudySpec spec = ValidSpec();
    spec.mutable_metrics(0)->set_safety_threshold(threshold);
    ExpectCreateStudyRejected(spec, "study.spec.metrics[0].safety_threshold: must be finite");
  }
}

TEST_F(StudyServiceTest, CreateStudyRejectsNoParameters) {
  v1::StudySpec spec = ValidSpec();
  spec.clear_parameters();
  ExpectCreateStudyRejected(spec, "study.spec.parameters: at least one parameter is required");
}

TEST_F(StudyServiceTest, CreateStudyRejectsEmptyParameterName) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(1)->clear_name();
  ExpectCreateStudyRejected(spec, "study.spec.parameters[1].name: must not be empty");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDuplicateParameterNames) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(1)->set_name("x");
  ExpectCreateStudyRejected(spec, "study.spec.parameters[1].name: duplicate parameter name \"x\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildNamedAsTopLevelParameter) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(2)->mutable_children(0)->mutable_parameter_spec()->set_name("x");
  ExpectCreateStudyRejected(
      spec,
      "study.spec.parameters[2].children[0].parameter_spec.name: duplicate parameter name "
      "\"x\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsTopLevelParameterNamedAsEarlierChild) {
  v1::StudySpec spec = ValidSpec();
  v1::ParameterSpec* p = spec.add_parameters();
  p->set_name("momentum");
  p->mutable_double_spec()->set_max(1);
  ExpectCreateStudyRejected(spec,
                            "study.spec.parameters[3].name: duplicate parameter name \"momentum\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsParameterWithoutValueSpec) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters { name: "x" })pb"),
      "study.spec.parameters[0]: one of double_spec, integer_spec, discrete_spec, "
      "categorical_spec must be set");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDoubleMinAboveMax) {
  ExpectCreateStudyRejected(SpecWithParameters(R"pb(parameters {
                                                      name: "x"
                                                      double_spec { min: 5 max: 1 }
                                                    })pb"),
                            "study.spec.parameters[0].double_spec: min 5 must be < max 1");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDoubleMinEqualToMax) {
  ExpectCreateStudyRejected(SpecWithParameters(R"pb(parameters {
                                                      name: "x"
                                                      double_spec { min: 2 max: 2 }
                                                    })pb"),
                            "study.spec.parameters[0].double_spec: min 2 must be < max 2");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNonFiniteDoubleBounds) {
  const std::pair<double, double> bounds[] = {{0, kInf}, {-kInf, 0}, {kNaN, 1}};
  for (const auto& [min, max] : bounds) {
    v1::StudySpec spec = ValidSpec();
    spec.mutable_parameters(0)->mutable_double_spec()->set_min(min);
    spec.mutable_parameters(0)->mutable_double_spec()->set_max(max);
    ExpectCreateStudyRejected(spec,
                              "study.spec.parameters[0].double_spec: min and max must be finite");
  }
}

TEST_F(StudyServiceTest, CreateStudyRejectsLogDoubleWithMinNotPositive) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "lr"
                                scale: LOG
                                double_spec { min: 0 max: 1 }
                              })pb"),
      "study.spec.parameters[0].double_spec: min 0 must be > 0 for a log scale");
}

TEST_F(StudyServiceTest, CreateStudyRejectsReverseLogDoubleWithNegativeMin) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "lr"
                                scale: REVERSE_LOG
                                double_spec { min: -1 max: 1 }
                              })pb"),
      "study.spec.parameters[0].double_spec: min -1 must be > 0 for a log scale");
}

TEST_F(StudyServiceTest, CreateStudyRejectsLogIntegerWithMinNotPositive) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "units"
                                scale: LOG
                                integer_spec { min: 0 max: 1024 }
                              })pb"),
      "study.spec.parameters[0].integer_spec: min 0 must be > 0 for a log scale");
}

TEST_F(StudyServiceTest, CreateStudyRejectsLogDiscreteWithValueNotPositive) {
  ExpectCreateStudyRejected(
      SpecWithParameters(
          R"pb(parameters {
                 name: "d"
                 scale: LOG
                 discrete_spec { values: 1 values: 0 values: 10 }
               })pb"),
      "study.spec.parameters[0].discrete_spec.values[1]: 0 must be > 0 for a log scale");
}

TEST_F(StudyServiceTest, CreateStudyRejectsIntegerMinAboveMax) {
  ExpectCreateStudyRejected(SpecWithParameters(R"pb(parameters {
                                                      name: "n"
                                                      integer_spec { min: 10 max: 1 }
                                                    })pb"),
                            "study.spec.parameters[0].integer_spec: min 10 must be <= max 1");
}

TEST_F(StudyServiceTest, CreateStudyRejectsEmptyDiscreteList) {
  ExpectCreateStudyRejected(SpecWithParameters(R"pb(parameters {
                                                      name: "d"
                                                      discrete_spec {}
                                                    })pb"),
                            "study.spec.parameters[0].discrete_spec.values: must not be empty");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDuplicateDiscreteValues) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "d"
                                discrete_spec { values: 1 values: 2.5 values: 1 }
                              })pb"),
      "study.spec.parameters[0].discrete_spec.values: duplicate value 1");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNonFiniteDiscreteValue) {
  ExpectCreateStudyRejected(SpecWithParameters(R"pb(parameters {
                                                      name: "d"
                                                      discrete_spec { values: 1 values: inf }
                                                    })pb"),
                            "study.spec.parameters[0].discrete_spec.values[1]: must be finite");
}

TEST_F(StudyServiceTest, CreateStudyRejectsEmptyCategoricalList) {
  ExpectCreateStudyRejected(SpecWithParameters(R"pb(parameters {
                                                      name: "c"
                                                      categorical_spec {}
                                                    })pb"),
                            "study.spec.parameters[0].categorical_spec.values: must not be empty");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDuplicateCategoricalValues) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "c"
                                categorical_spec { values: "a" values: "b" values: "a" }
                              })pb"),
      "study.spec.parameters[0].categorical_spec.values[2]: duplicate value \"a\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsEmptyCategoricalValue) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "c"
                                categorical_spec { values: "a" values: "" }
                              })pb"),
      "study.spec.parameters[0].categorical_spec.values[1]: must not be empty");
}

TEST_F(StudyServiceTest, CreateStudyRejectsLogScaleOnCategorical) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "c"
                                scale: LOG
                                categorical_spec { values: "a" values: "b" }
                              })pb"),
      "study.spec.parameters[0].scale: a categorical parameter takes no scale");
}

TEST_F(StudyServiceTest, CreateStudyRejectsUnknownScale) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(0)->set_scale(static_cast<v1::ParameterSpec::ScaleType>(9));
  ExpectCreateStudyRejected(spec, "study.spec.parameters[0].scale: unknown scale type 9");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildOfDoubleParent) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "x"
                                double_spec { min: 0 max: 1 }
                                children {
                                  parent_discrete_values: 0.5
                                  parameter_spec {
                                    name: "y"
                                    double_spec { min: 0 max: 1 }
                                  }
                                }
                              })pb"),
      "study.spec.parameters[0].children[0]: a DOUBLE parameter cannot have conditional "
      "children");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildValueNotInDiscreteParent) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "d"
                                discrete_spec { values: 1 values: 2 values: 3 }
                                children {
                                  parent_discrete_values: 2
                                  parent_discrete_values: 4
                                  parameter_spec {
                                    name: "y"
                                    double_spec { min: 0 max: 1 }
                                  }
                                }
                              })pb"),
      "study.spec.parameters[0].children[0].parent_discrete_values[1]: 4 is not a value of "
      "\"d\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildValueOutsideIntegerParent) {
  ExpectCreateStudyRejected(
      SpecWithParameters(R"pb(parameters {
                                name: "n"
                                integer_spec { min: 1 max: 10 }
                                children {
                                  parent_int_values: 11
                                  parameter_spec {
                                    name: "y"
                                    double_spec { min: 0 max: 1 }
                                  }
                                }
                              })pb"),
      "study.spec.parameters[0].children[0].parent_int_values[0]: 11 is outside [1, 10] of "
      "\"n\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildValueNotInCategoricalParent) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(2)->mutable_children(0)->set_parent_categorical_values(0, "rmsprop");
  ExpectCreateStudyRejected(
      spec,
      "study.spec.parameters[2].children[0].parent_categorical_values[0]: \"rmsprop\" is not a "
      "value of \"opt\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildWithoutParentValues) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(2)->mutable_children(0)->clear_parent_categorical_values();
  ExpectCreateStudyRejected(
      spec,
      "study.spec.parameters[2].children[0].parent_categorical_values: must not be empty for a "
      "CATEGORICAL parent");
}

TEST_F(StudyServiceTest, CreateStudyRejectsChildWithoutParameterSpec) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_parameters(2)->mutable_children(0)->clear_parameter_spec();
  ExpectCreateStudyRejected(spec,
                            "study.spec.parameters[2].children[0].parameter_spec: must be set");
}

TEST_F(StudyServiceTest, CreateStudyRejectsInvalidChildParameterWithItsPath) {
  v1::StudySpec spec = ValidSpec();
  v1::ParameterSpec* child =
      spec.mutable_parameters(2)->mutable_children(0)->mutable_parameter_spec();
  child->mutable_double_spec()->set_min(3);
  ExpectCreateStudyRejected(
      spec,
      "study.spec.parameters[2].children[0].parameter_spec.double_spec: min 3 must be < max 1");
}

TEST_F(StudyServiceTest, CreateStudyRejectsUnknownAlgorithm) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_algorithm()->set_algorithm(static_cast<v1::AlgorithmSpec::Algorithm>(42));
  ExpectCreateStudyRejected(spec, "study.spec.algorithm.algorithm: unknown algorithm 42");
}

TEST_F(StudyServiceTest, CreateStudyRejectsUnknownAlgorithmSetting) {
  v1::StudySpec spec = ValidSpec();
  (*spec.mutable_algorithm()->mutable_settings())["population_size"] = "10";
  ExpectCreateStudyRejected(
      spec, "study.spec.algorithm.settings[\"population_size\"]: unknown setting for RANDOM");
}

TEST_F(StudyServiceTest, CreateStudyRejectsBadAlgorithmSettingValue) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::GENETIC);
  (*spec.mutable_algorithm()->mutable_settings())["population_size"] = "many";
  ExpectCreateStudyRejected(spec, "study.spec.algorithm.settings[\"population_size\"]: must be");
  ExpectCreateStudyRejected(spec, "got \"many\"");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNegativeMaxTrials) {
  v1::StudySpec spec = ValidSpec();
  spec.set_max_trials(-1);
  ExpectCreateStudyRejected(spec, "study.spec.max_trials: -1 must be >= 0 (0 = unlimited)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsBadTrialProcesses) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_trial_template()->set_command("/bin/true");
  spec.mutable_trial_template()->set_processes(-2);
  ExpectCreateStudyRejected(spec, "spec.trial_template.processes: -2 must be in [0, 1024]");
  spec.mutable_trial_template()->set_processes(1025);
  ExpectCreateStudyRejected(spec, "spec.trial_template.processes: 1025 must be in [0, 1024]");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNegativeHeartbeatTimeout) {
  v1::StudySpec spec = ValidSpec();
  spec.set_heartbeat_timeout_seconds(-1);
  ExpectCreateStudyRejected(spec,
                            "study.spec.heartbeat_timeout_seconds: -1 must be >= 0 (0 = default)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNaNHeartbeatTimeout) {
  v1::StudySpec spec = ValidSpec();
  spec.set_heartbeat_timeout_seconds(kNaN);
  ExpectCreateStudyRejected(spec,
                            "study.spec.heartbeat_timeout_seconds: nan must be >= 0 (0 = default)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNegativeMaxTrialRetries) {
  v1::StudySpec spec = ValidSpec();
  spec.set_max_trial_retries(-2);
  ExpectCreateStudyRejected(spec, "study.spec.max_trial_retries: must be >= 0 (0 = default)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsReductionFactorBelowOne) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_early_stopping()->set_policy(v1::EarlyStoppingSpec::ASHA);
  spec.mutable_early_stopping()->set_reduction_factor(0.5);
  ExpectCreateStudyRejected(
      spec, "study.spec.early_stopping.reduction_factor: 0.5 must be > 1 (or 0 for the default 3)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsUnknownEarlyStoppingPolicy) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_early_stopping()->set_policy(static_cast<v1::EarlyStoppingSpec::Policy>(9));
  ExpectCreateStudyRejected(spec, "study.spec.early_stopping.policy: unknown policy 9");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNegativeResources) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_trial_template()->mutable_resources()->set_gpus(-1);
  ExpectCreateStudyRejected(spec, "study.spec.trial_template.resources: must be finite and >= 0");
}

TEST_F(StudyServiceTest, CreateStudyRejectsDisplayNameTooLong) {
  ExpectCreateStudyRejected(ValidSpec(), "study.display_name: longer than 256",
                            std::string(257, 'd'));
}

TEST_F(StudyServiceTest, CreateStudyAcceptsDisplayNameOfMaxLength) {
  v1::Study study;
  ASSERT_THAT(client_->CreateStudy(ValidSpec(), &study, std::string(256, 'd')), GrpcOk());
  EXPECT_EQ(study.display_name(), std::string(256, 'd'));
}

TEST_F(StudyServiceTest, CreateStudyRejectsTooManyCategoricalValues) {
  v1::StudySpec spec = SpecWithParameters(R"pb(parameters {
                                                 name: "c"
                                                 categorical_spec {}
                                               })pb");
  auto* values = spec.mutable_parameters(0)->mutable_categorical_spec()->mutable_values();
  for (int i = 0; i < 20000; ++i) *values->Add() = absl::StrCat("v", i);
  ExpectCreateStudyRejected(
      spec, "study.spec.parameters[0].categorical_spec.values: more than 10000 values");
}

// ---- Transport-level rejections ------------------------------------------------------------

TEST_F(StudyServiceTest, CreateStudyOverMaxMessageSizeIsResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::StudySpec spec = SpecWithParameters(R"pb(parameters {
                                                 name: "c"
                                                 categorical_spec {}
                                               })pb");
  auto* values = spec.mutable_parameters(0)->mutable_categorical_spec()->mutable_values();
  for (int i = 0; i < 50; ++i) *values->Add() = absl::StrCat(i, std::string(100000, 'v'));
  v1::Study study;
  EXPECT_THAT(client_->CreateStudy(spec, &study),
              GrpcStatusIs(StatusCode::RESOURCE_EXHAUSTED, HasSubstr("larger than max")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CreateStudyWithMalformedProtobufBytesIsRejected) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  grpc::GenericStub generic(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                                grpc::InsecureChannelCredentials()));
  const char garbage[] = "\xff\xff\xff\xff";
  grpc::Slice slice(garbage, 4);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  client_->PrepareContext(&ctx);
  grpc::Status status;
  absl::Notification done;
  generic.UnaryCall(&ctx, "/evoscale.v1.StudyService/CreateStudy", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(StudyClient::kDeadline));
  // gRPC 1.51's callback API answers a request it cannot parse with UNIMPLEMENTED and no
  // message (UnimplementedUnaryReactor in grpcpp/impl/codegen/server_callback_handlers.h);
  // the handler never runs.
  EXPECT_THAT(status, GrpcStatusIs(StatusCode::UNIMPLEMENTED, Eq("")));
  EXPECT_EQ(Dump(), before);
}

// ---- Names and lookups ---------------------------------------------------------------------

TEST_F(StudyServiceTest, GetStudyUnknownIsNotFound) {
  v1::GetStudyRequest req;
  req.set_name("studies/999");
  v1::Study resp;
  EXPECT_THAT(client_->Call(&Stub::GetStudy, req, &resp),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("study \"studies/999\" not found")));
}

TEST_F(StudyServiceTest, SuggestTrialsUnknownStudyIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::SuggestTrialsRequest req;
  req.set_parent("studies/999");
  req.set_suggestion_count(1);
  req.set_client_id("w");
  v1::SuggestTrialsResponse resp;
  EXPECT_THAT(client_->Call(&Stub::SuggestTrials, req, &resp),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("study \"studies/999\" not found")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, GetStudyMalformedNameIsInvalidArgumentNamingName) {
  for (const char* name : {"", "projects/1", "studies/", "studies/abc", "studies/0", "studies/-1",
                           "studies/1/trials/1"}) {
    v1::GetStudyRequest req;
    req.set_name(name);
    v1::Study resp;
    EXPECT_THAT(client_->Call(&Stub::GetStudy, req, &resp),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                             HasSubstr(absl::StrCat("name: malformed study name \"", name,
                                                    "\"; want studies/{id}"))));
  }
}

TEST_F(StudyServiceTest, GetStudyNonCanonicalNameIsInvalidArgument) {
  client_->MustCreateStudy(ValidSpec());
  for (const char* name : {"studies/+1", "studies/ 1", "studies/01"}) {
    v1::GetStudyRequest req;
    req.set_name(name);
    v1::Study resp;
    EXPECT_THAT(client_->Call(&Stub::GetStudy, req, &resp),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("name: malformed study name")))
        << name;
  }
}

TEST_F(StudyServiceTest, SuggestTrialsMalformedParentIsInvalidArgumentNamingParent) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::SuggestTrialsRequest req;
  req.set_parent("studies/x");
  req.set_suggestion_count(1);
  req.set_client_id("w");
  v1::SuggestTrialsResponse resp;
  EXPECT_THAT(client_->Call(&Stub::SuggestTrials, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("parent: malformed study name \"studies/x\"; want "
                                     "studies/{id}")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, AddTrialMeasurementMalformedTrialNameIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  for (const char* name : {"studies/1/trial/1", "studies/1/trials/", "studies/1/trials/x",
                           "studies/1", "trials/1", "studies/1/trials/2/x"}) {
    EXPECT_THAT(client_->AddMeasurement(name, Loss(0.1)),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                             HasSubstr(absl::StrCat("trial_name: malformed trial name \"", name,
                                                    "\"; want studies/{id}/trials/{id}"))));
  }
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CompleteTrialMalformedNameIsInvalidArgumentNamingName) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::CompleteTrialRequest req;
  req.set_name("studies/1/trials/0");
  *req.mutable_final_measurement() = Loss(0.1);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("name: malformed trial name \"studies/1/trials/0\"")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, GetTrialUnknownTrialIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::GetTrialRequest req;
  req.set_name(seed_study_ + "/trials/99");
  v1::Trial resp;
  EXPECT_THAT(
      client_->Call(&Stub::GetTrial, req, &resp),
      GrpcStatusIs(StatusCode::NOT_FOUND,
                   HasSubstr(absl::StrCat("trial \"", seed_study_, "/trials/99\" not found"))));
}

TEST_F(StudyServiceTest, CompleteTrialOfUnknownStudyIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::CompleteTrialRequest req;
  req.set_name("studies/999/trials/1");
  *req.mutable_final_measurement() = Loss(0.1);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("study \"studies/999\" not found")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, StopTrialUnknownTrialIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::StopTrialRequest req;
  req.set_name(seed_study_ + "/trials/4");
  v1::Trial resp;
  EXPECT_THAT(
      client_->Call(&Stub::StopTrial, req, &resp),
      GrpcStatusIs(StatusCode::NOT_FOUND,
                   HasSubstr(absl::StrCat("trial \"", seed_study_, "/trials/4\" not found"))));
  EXPECT_EQ(Dump(), before);
}

// ---- Trial and study states ----------------------------------------------------------------

TEST_F(StudyServiceTest, CompleteTrialTwiceIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[0]);
  *req.mutable_final_measurement() = Loss(0.1);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
              GrpcStatusIs(
                  StatusCode::FAILED_PRECONDITION,
                  HasSubstr(absl::StrCat("trial \"", seed_trials_[0], "\" is already SUCCEEDED"))));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, AddTrialMeasurementToSucceededTrialIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[0], Loss(0.1, 5)),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION,
                           HasSubstr(absl::StrCat("trial \"", seed_trials_[0],
                                                  "\" is SUCCEEDED; measurements need ACTIVE "
                                                  "or STOPPING"))));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, AddTrialMeasurementToInfeasibleTrialIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[2]);
  req.set_trial_infeasible(true);
  req.set_infeasible_reason("out of memory");
  v1::Trial infeasible;
  ASSERT_THAT(client_->Call(&Stub::CompleteTrial, req, &infeasible), GrpcOk());
  EXPECT_EQ(infeasible.state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(infeasible.infeasible_reason(), "out of memory");
  const std::string before = Dump();
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[2], Loss(0.1, 5)),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION,
                           HasSubstr(absl::StrCat("trial \"", seed_trials_[2],
                                                  "\" is INFEASIBLE; measurements need ACTIVE "
                                                  "or STOPPING"))));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, StopTrialOfCompletedTrialIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::StopTrialRequest req;
  req.set_name(seed_trials_[0]);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::StopTrial, req, &resp),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION,
                           HasSubstr(absl::StrCat("trial \"", seed_trials_[0],
                                                  "\" is SUCCEEDED; only ACTIVE trials can be "
                                                  "stopped"))));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, SuggestTrialsOnInactiveStudyIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::SetStudyStateRequest set;
  set.set_name(seed_study_);
  set.set_state(v1::Study::INACTIVE);
  v1::Study study;
  ASSERT_THAT(client_->Call(&Stub::SetStudyState, set, &study), GrpcOk());
  EXPECT_EQ(study.state(), v1::Study::INACTIVE);
  const std::string before = Dump();
  v1::SuggestTrialsRequest req;
  req.set_parent(seed_study_);
  req.set_suggestion_count(1);
  req.set_client_id("w");
  v1::SuggestTrialsResponse resp;
  EXPECT_THAT(client_->Call(&Stub::SuggestTrials, req, &resp),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION,
                           HasSubstr(absl::StrCat("study \"", seed_study_,
                                                  "\" is INACTIVE; set it ACTIVE to get "
                                                  "suggestions"))));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, SetStudyStateUnspecifiedIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::SetStudyStateRequest req;
  req.set_name(seed_study_);
  req.set_state(v1::Study::STATE_UNSPECIFIED);
  v1::Study resp;
  EXPECT_THAT(client_->Call(&Stub::SetStudyState, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("state: must be ACTIVE, INACTIVE or COMPLETED, got 0")));
  EXPECT_EQ(Dump(), before);
}

// ---- SuggestTrials arguments ---------------------------------------------------------------

TEST_F(StudyServiceTest, SuggestTrialsCountOutOfRangeIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  for (int count : {0, -1, 1001}) {
    v1::SuggestTrialsRequest req;
    req.set_parent(seed_study_);
    req.set_suggestion_count(count);
    req.set_client_id("w");
    v1::SuggestTrialsResponse resp;
    EXPECT_THAT(client_->Call(&Stub::SuggestTrials, req, &resp),
                GrpcStatusIs(
                    StatusCode::INVALID_ARGUMENT,
                    HasSubstr(absl::StrCat("suggestion_count: ", count, " must be in [1, 1000]"))));
  }
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, SuggestTrialsEmptyClientIdIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::SuggestTrialsRequest req;
  req.set_parent(seed_study_);
  req.set_suggestion_count(1);
  v1::SuggestTrialsResponse resp;
  EXPECT_THAT(
      client_->Call(&Stub::SuggestTrials, req, &resp),
      GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("client_id: must not be empty")));
  EXPECT_EQ(Dump(), before);
}

// ---- Measurements --------------------------------------------------------------------------

TEST_F(StudyServiceTest, AddTrialMeasurementNaNIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[2], Loss(kNaN, 1)),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("measurement.metrics[\"loss\"]: nan is not a finite number")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, AddTrialMeasurementOfOnlyUnknownMetricsIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::Measurement typo;
  (*typo.mutable_metrics())["los"] = 0.5;
  (*typo.mutable_metrics())["accuracy"] = 0.9;
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[2], typo),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("measurement.metrics: \"accuracy\", \"los\" are not "
                                     "metrics of the study (\"loss\")")));
  EXPECT_EQ(Dump(), before);
  // Beside one of the study's metrics, other metrics are kept.
  v1::Measurement extra = Loss(0.5, 1);
  (*extra.mutable_metrics())["accuracy"] = 0.9;
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[2], extra), GrpcOk());
}

TEST_F(StudyServiceTest, AddTrialMeasurementInfinityIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  EXPECT_THAT(
      client_->AddMeasurement(seed_trials_[2], Loss(-kInf, 1)),
      GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                   HasSubstr("measurement.metrics[\"loss\"]: -inf is not a finite number")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, AddTrialMeasurementNegativeStepIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  EXPECT_THAT(
      client_->AddMeasurement(seed_trials_[2], Loss(0.3, -1)),
      GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("measurement.step: must be >= 0")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, AddTrialMeasurementWithoutMetricsIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::Measurement empty;
  empty.set_step(3);
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[2], empty),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("measurement.metrics: at least one metric is required")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CompleteTrialMissingObjectiveMetricIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[2]);
  (*req.mutable_final_measurement()->mutable_metrics())["accuracy"] = 0.9;
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("final_measurement.metrics: missing metric \"loss\"")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CompleteTrialNaNIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[2]);
  *req.mutable_final_measurement() = Loss(kNaN);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("final_measurement.metrics[\"loss\"]: nan is not a finite "
                                     "number")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CompleteTrialWithoutAnyMeasurementIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[2]);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("final_measurement.metrics: empty, and the trial has no "
                                     "measurement to use instead")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CompleteTrialWithoutFinalMeasurementUsesTheLastOne) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[1]);  // holds one measurement: loss 0.7 at step 1
  v1::Trial resp;
  ASSERT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp), GrpcOk());
  EXPECT_EQ(resp.state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(resp.final_measurement().step(), 1);
  EXPECT_EQ(resp.final_measurement().metrics().at("loss"), 0.7);
}

TEST_F(StudyServiceTest, CompleteTrialWithBadUsageIsInvalidArgumentNamingTheField) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  struct Case {
    void (*set)(v1::TrialUsage*);
    std::string message;
  };
  const Case cases[] = {
      {[](v1::TrialUsage* u) { u->set_cpu_seconds(-1); },
       "usage.cpu_seconds: -1 must be finite and >= 0"},
      {[](v1::TrialUsage* u) { u->set_wall_seconds(kNaN); },
       "usage.wall_seconds: nan must be finite and >= 0"},
      {[](v1::TrialUsage* u) { u->set_peak_memory_bytes(-5); },
       "usage.peak_memory_bytes: -5 must be finite and >= 0"},
      {[](v1::TrialUsage* u) { u->set_oom_kills(-1); },
       "usage.oom_kills: -1 must be finite and >= 0"},
  };
  for (const Case& c : cases) {
    v1::CompleteTrialRequest req;
    req.set_name(seed_trials_[2]);
    *req.mutable_final_measurement() = Loss(0.5);
    c.set(req.mutable_usage());
    v1::Trial resp;
    EXPECT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp),
                GrpcStatusIs(StatusCode::INVALID_ARGUMENT, c.message));
  }
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceTest, CompleteTrialStoresItsUsage) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::CompleteTrialRequest req;
  req.set_name(seed_trials_[2]);
  *req.mutable_final_measurement() = Loss(0.5);
  v1::TrialUsage* usage = req.mutable_usage();
  usage->set_peak_memory_bytes(int64_t{3} << 30);
  usage->set_cpu_seconds(12.5);
  usage->set_mean_cpu_cores(1.25);
  usage->set_wall_seconds(10);
  usage->set_oom_kills(1);
  usage->set_enforcement("cgroup v1 (memory, cpu, cpuacct)");
  v1::Trial resp;
  ASSERT_THAT(client_->Call(&Stub::CompleteTrial, req, &resp), GrpcOk());
  v1::GetTrialRequest get;
  get.set_name(seed_trials_[2]);
  v1::Trial got;
  ASSERT_THAT(client_->Call(&Stub::GetTrial, get, &got), GrpcOk());
  EXPECT_TRUE(MessageDifferencer::Equals(got.usage(), req.usage()))
      << got.usage().ShortDebugString();
}

TEST_F(StudyServiceTest, RerunOfAnActiveTrialTakesTheNewRequestAndDropsItsMeasurements) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  RerunTrialRequest bad{.name = seed_trials_[1]};
  bad.resources.set_memory_bytes(-1);
  EXPECT_THAT(server_->core()->Call(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("resources: must be finite and >= 0")));
  RerunTrialRequest done{.name = seed_trials_[0]};  // SUCCEEDED
  EXPECT_THAT(server_->core()->Call(done).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is SUCCEEDED; only an ACTIVE trial runs again")));
  EXPECT_EQ(Dump(), before);

  RerunTrialRequest rerun{.name = seed_trials_[1], .oom_kills = 1};  // ACTIVE, one measurement
  rerun.resources.set_memory_bytes(int64_t{2} << 30);
  absl::StatusOr<v1::Trial> again = server_->core()->Call(rerun);
  ASSERT_TRUE(again.ok()) << again.status();
  const v1::Trial stored = client_->MustGetTrial(seed_trials_[1]);
  EXPECT_EQ(stored.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(stored.resources().memory_bytes(), int64_t{2} << 30);
  EXPECT_EQ(stored.measurements_size(), 0);
  EXPECT_EQ(stored.usage().oom_kills(), 1);
}

// ---- CreateTrial parameters ----------------------------------------------------------------

TEST_F(StudyServiceTest, CreateTrialUnknownParameterIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  t.mutable_parameters(0)->set_name("zzz");
  ExpectCreateTrialRejected(t, "trial.parameters[0].name: unknown parameter \"zzz\"");
}

TEST_F(StudyServiceTest, CreateTrialParameterGivenTwiceIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  *t.add_parameters() = t.parameters(1);
  ExpectCreateTrialRejected(t, "trial.parameters[3].name: parameter \"x\" given twice");
}

TEST_F(StudyServiceTest, CreateTrialWrongTypeIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  t.mutable_parameters(1)->set_string_value("half");  // x
  ExpectCreateTrialRejected(t,
                            "trial.parameters[1]: parameter \"x\" takes a number (double_value)");
  t = AdamTrial(0.5, 3);
  t.mutable_parameters(2)->set_double_value(2.5);  // n
  ExpectCreateTrialRejected(t, "trial.parameters[2]: parameter \"n\" takes an integer (int_value)");
  t = AdamTrial(0.5, 3);
  t.mutable_parameters(0)->set_int_value(1);  // opt
  ExpectCreateTrialRejected(t,
                            "trial.parameters[0]: parameter \"opt\" takes a string (string_value)");
}

TEST_F(StudyServiceTest, CreateTrialOutOfBoundsIsInvalidArgument) {
  ExpectCreateTrialRejected(AdamTrial(1.5, 3),
                            "trial.parameters[1].double_value: 1.5 is outside [0, 1] of \"x\"");
  ExpectCreateTrialRejected(AdamTrial(0.5, 11),
                            "trial.parameters[2].int_value: 11 is outside [1, 10] of \"n\"");
}

TEST_F(StudyServiceTest, CreateTrialCategoryNotInListIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  t.mutable_parameters(0)->set_string_value("rmsprop");
  ExpectCreateTrialRejected(
      t, "trial.parameters[0].string_value: \"rmsprop\" is not a value of \"opt\"");
}

TEST_F(StudyServiceTest, CreateTrialMissingParameterIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  t.mutable_parameters()->RemoveLast();  // n
  ExpectCreateTrialRejected(t, "trial.parameters: missing parameter \"n\"");
}

TEST_F(StudyServiceTest, CreateTrialMissingActiveChildIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  t.mutable_parameters(0)->set_string_value("sgd");
  ExpectCreateTrialRejected(t, "trial.parameters: missing parameter \"momentum\"");
}

TEST_F(StudyServiceTest, CreateTrialInactiveChildGivenIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  v1::Parameter* momentum = t.add_parameters();
  momentum->set_name("momentum");
  momentum->set_double_value(0.9);
  ExpectCreateTrialRejected(
      t, "trial.parameters: parameter \"momentum\" is inactive under its parent's value");
}

TEST_F(StudyServiceTest, CreateTrialWithNaNFinalMeasurementIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  *t.mutable_final_measurement() = Loss(kNaN);
  ExpectCreateTrialRejected(
      t, "trial.final_measurement.metrics[\"loss\"]: nan is not a finite number");
}

TEST_F(StudyServiceTest, CreateTrialFinalMeasurementMissingObjectiveIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  (*t.mutable_final_measurement()->mutable_metrics())["accuracy"] = 0.9;
  ExpectCreateTrialRejected(t, "trial.final_measurement.metrics: missing metric \"loss\"");
}

TEST_F(StudyServiceTest, CreateTrialRecordsResultsFromElsewhereInTheirOwnState) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::Trial stopped = AdamTrial(0.1, 2);
  stopped.set_state(v1::Trial::STOPPED);
  *stopped.add_measurements() = Loss(0.6, 1);
  *stopped.add_measurements() = Loss(0.05, 2);
  v1::Trial infeasible = AdamTrial(0.2, 2);
  infeasible.set_state(v1::Trial::INFEASIBLE);
  infeasible.set_infeasible_reason("diverged");
  v1::Trial succeeded = AdamTrial(0.3, 2);
  succeeded.set_state(v1::Trial::SUCCEEDED);
  *succeeded.add_measurements() = Loss(0.9, 1);
  *succeeded.mutable_final_measurement() = Loss(0.4, 5);
  v1::Trial requested = AdamTrial(0.4, 2);
  requested.set_state(v1::Trial::REQUESTED);
  for (const v1::Trial& t : {stopped, infeasible, succeeded, requested}) {
    client_->MustCreateTrial(study, t);
  }
  auto check = [&] {
    const v1::Trial a = client_->MustGetTrial(study + "/trials/1");
    EXPECT_EQ(a.state(), v1::Trial::STOPPED);
    EXPECT_EQ(a.measurements_size(), 2);
    EXPECT_EQ(a.final_measurement().metrics().at("loss"), 0.05);  // the last measurement
    const v1::Trial b = client_->MustGetTrial(study + "/trials/2");
    EXPECT_EQ(b.state(), v1::Trial::INFEASIBLE);
    EXPECT_EQ(b.infeasible_reason(), "diverged");
    const v1::Trial c = client_->MustGetTrial(study + "/trials/3");
    EXPECT_EQ(c.state(), v1::Trial::SUCCEEDED);
    EXPECT_EQ(c.measurements_size(), 1);
    EXPECT_EQ(c.final_measurement().step(), 5);
    EXPECT_EQ(client_->MustGetTrial(study + "/trials/4").state(), v1::Trial::REQUESTED);
    EXPECT_EQ(client_->MustGetStudy(study).completed_trial_count(), 3);
    // The stopped trial's 0.05 beats 0.4, yet only the one that ran to its end is optimal.
    v1::ListOptimalTrialsRequest optimal;
    optimal.set_parent(study);
    v1::ListOptimalTrialsResponse best;
    ASSERT_THAT(client_->Call(&Stub::ListOptimalTrials, optimal, &best), GrpcOk());
    EXPECT_THAT(Ids(best.optimal_trials()), ElementsAre(3));
  };
  check();
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  check();
}

TEST_F(StudyServiceTest, CreateTrialWithAnImpossibleEndingIsInvalidArgument) {
  v1::Trial t = AdamTrial(0.5, 3);
  t.set_state(v1::Trial::STOPPING);
  ExpectCreateTrialRejected(t,
                            "trial.state: a trial is created REQUESTED, ACTIVE, SUCCEEDED, STOPPED "
                            "or INFEASIBLE, not STOPPING");
  t.set_state(v1::Trial::SUCCEEDED);
  ExpectCreateTrialRejected(
      t, "trial.final_measurement: a SUCCEEDED trial needs one (or, STOPPED, a measurement)");
  t.set_state(v1::Trial::STOPPED);
  ExpectCreateTrialRejected(
      t, "trial.final_measurement: a STOPPED trial needs one (or, STOPPED, a measurement)");
  t.set_state(v1::Trial::REQUESTED);
  *t.mutable_final_measurement() = Loss(0.3);
  ExpectCreateTrialRejected(t,
                            "trial.final_measurement: a REQUESTED trial has not run; it has none");
  t.set_state(v1::Trial::SUCCEEDED);
  t.set_infeasible_reason("why");
  ExpectCreateTrialRejected(t, "trial.infeasible_reason: only an INFEASIBLE trial has one");
  t.clear_infeasible_reason();
  v1::Measurement typo;
  (*typo.mutable_metrics())["acc"] = 0.9;
  *t.add_measurements() = typo;
  ExpectCreateTrialRejected(
      t, "trial.measurements[0].metrics: \"acc\" is not a metric of the study (\"loss\")");
}

TEST_F(StudyServiceTest, CreateTrialBeyondMaxTrialsIsFailedPrecondition) {
  v1::StudySpec spec = ValidSpec();
  spec.set_max_trials(1);
  const std::string study = client_->MustCreateStudy(spec).name();
  client_->MustCreateTrial(study, AdamTrial(0.5, 3));
  const std::string before = Dump();
  v1::CreateTrialRequest req;
  req.set_parent(study);
  *req.mutable_trial() = AdamTrial(0.25, 4);
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CreateTrial, req, &resp),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION,
                           HasSubstr(absl::StrCat("study \"", study,
                                                  "\" already holds max_trials=1 trials"))));
  EXPECT_EQ(Dump(), before);
}

// ---- Paging arguments ----------------------------------------------------------------------

TEST_F(StudyServiceTest, ListTrialsBadPageSizeIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  for (int page_size : {-1, 1001}) {
    v1::ListTrialsRequest req;
    req.set_parent(seed_study_);
    req.set_page_size(page_size);
    v1::ListTrialsResponse resp;
    EXPECT_THAT(
        client_->Call(&Stub::ListTrials, req, &resp),
        GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                     HasSubstr(absl::StrCat("page_size: ", page_size, " must be in [0, 1000]"))));
  }
}

TEST_F(StudyServiceTest, ListTrialsMalformedPageTokenIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  for (const char* token : {"abc", "-5", "0"}) {
    v1::ListTrialsRequest req;
    req.set_parent(seed_study_);
    req.set_page_token(token);
    v1::ListTrialsResponse resp;
    EXPECT_THAT(
        client_->Call(&Stub::ListTrials, req, &resp),
        GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                     HasSubstr(absl::StrCat("page_token: malformed token \"", token, "\""))));
  }
}

TEST_F(StudyServiceTest, ListTrialsUnknownStateIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::ListTrialsRequest req;
  req.set_parent(seed_study_);
  req.set_state(static_cast<v1::Trial::State>(77));
  v1::ListTrialsResponse resp;
  EXPECT_THAT(
      client_->Call(&Stub::ListTrials, req, &resp),
      GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("state: unknown trial state 77")));
}

TEST_F(StudyServiceTest, ListStudiesBadPageSizeIsInvalidArgument) {
  for (int page_size : {-1, 1001}) {
    v1::ListStudiesRequest req;
    req.set_page_size(page_size);
    v1::ListStudiesResponse resp;
    EXPECT_THAT(
        client_->Call(&Stub::ListStudies, req, &resp),
        GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                     HasSubstr(absl::StrCat("page_size: ", page_size, " must be in [0, 1000]"))));
  }
}

TEST_F(StudyServiceTest, ListStudiesMalformedPageTokenIsInvalidArgument) {
  v1::ListStudiesRequest req;
  req.set_page_token("next-page");
  v1::ListStudiesResponse resp;
  EXPECT_THAT(client_->Call(&Stub::ListStudies, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("page_token: malformed token \"next-page\"")));
}

// ---- Good paths ----------------------------------------------------------------------------

TEST_F(StudyServiceTest, CreateStudyAssignsNameStateAndTime) {
  v1::Study study;
  ASSERT_THAT(client_->CreateStudy(ValidSpec(), &study, "demo"), GrpcOk());
  EXPECT_EQ(study.name(), "studies/1");
  EXPECT_EQ(study.display_name(), "demo");
  EXPECT_EQ(study.state(), v1::Study::ACTIVE);
  EXPECT_EQ(study.create_time().seconds(), 1700000000);
  EXPECT_EQ(study.trial_count(), 0);
  EXPECT_TRUE(MessageDifferencer::Equals(study.spec(), ValidSpec()));
  EXPECT_EQ(QueryInt(db_path_, "SELECT COUNT(*) FROM studies"), 1);
}

TEST_F(StudyServiceTest, AskTellRandomStudyCompletesAfterMaxTrials) {
  v1::StudySpec spec = ValidSpec();
  spec.set_max_trials(5);
  const std::string study = client_->MustCreateStudy(spec).name();
  std::set<int64_t> seen;
  bool completed = false;
  for (int round = 0; round < 10 && !completed; ++round) {
    v1::SuggestTrialsResponse r = client_->MustSuggest(study, 2, "worker");
    if (r.trials().empty()) {
      EXPECT_EQ(r.study_state(), v1::Study::COMPLETED);
      completed = true;
      break;
    }
    for (const v1::Trial& t : r.trials()) {
      EXPECT_EQ(t.state(), v1::Trial::ACTIVE);
      EXPECT_EQ(t.client_id(), "worker");
      EXPECT_TRUE(seen.insert(t.id()).second) << "trial " << t.id() << " suggested twice";
      // Exactly the active parameters, within bounds.
      std::map<std::string, v1::Parameter> params;
      for (const v1::Parameter& p : t.parameters()) params[p.name()] = p;
      ASSERT_TRUE(params.contains("x") && params.contains("n") && params.contains("opt"));
      EXPECT_GE(params["x"].double_value(), 0);
      EXPECT_LE(params["x"].double_value(), 1);
      EXPECT_GE(params["n"].int_value(), 1);
      EXPECT_LE(params["n"].int_value(), 10);
      EXPECT_EQ(params.contains("momentum"), params["opt"].string_value() == "sgd");
      v1::Trial done = client_->MustComplete(t.name(), Loss(params["x"].double_value()));
      EXPECT_EQ(done.state(), v1::Trial::SUCCEEDED);
    }
  }
  EXPECT_TRUE(completed);
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3, 4, 5}));
  v1::Study got = client_->MustGetStudy(study);
  EXPECT_EQ(got.state(), v1::Study::COMPLETED);
  EXPECT_EQ(got.trial_count(), 5);
  EXPECT_EQ(got.completed_trial_count(), 5);
  EXPECT_EQ(client_->MustSuggest(study, 1, "late-worker").trials_size(), 0);
  EXPECT_EQ(QueryInt(db_path_, "SELECT COUNT(*) FROM trials WHERE state = 4"), 5);
}

TEST_F(StudyServiceTest, SuggestTrialsSameClientGetsSameTrialsBack) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::SuggestTrialsResponse first = client_->MustSuggest(study, 2, "a");
  ASSERT_EQ(first.trials_size(), 2);
  v1::SuggestTrialsResponse again = client_->MustSuggest(study, 2, "a");
  EXPECT_EQ(Ids(again.trials()), Ids(first.trials()));
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(
        MessageDifferencer::Equals(first.trials(i).parameters(0), again.trials(i).parameters(0)));
  }
  v1::SuggestTrialsResponse other = client_->MustSuggest(study, 2, "b");
  ASSERT_EQ(other.trials_size(), 2);
  EXPECT_THAT(Ids(other.trials()), ElementsAre(3, 4));
  EXPECT_THAT(Ids(first.trials()), ElementsAre(1, 2));
  EXPECT_EQ(client_->MustGetStudy(study).trial_count(), 4);
}

TEST_F(StudyServiceTest, StaleTrialIsHandedToTheNextClient) {
  v1::StudySpec spec = ValidSpec();
  spec.set_heartbeat_timeout_seconds(60);
  const std::string study = client_->MustCreateStudy(spec).name();
  v1::SuggestTrialsResponse a = client_->MustSuggest(study, 1, "a");
  ASSERT_EQ(a.trials_size(), 1);
  clock_.Advance(absl::Seconds(61));
  v1::SuggestTrialsResponse b = client_->MustSuggest(study, 1, "b");
  ASSERT_EQ(b.trials_size(), 1);
  EXPECT_EQ(b.trials(0).id(), a.trials(0).id());
  EXPECT_EQ(b.trials(0).client_id(), "b");
  EXPECT_EQ(b.trials(0).retries(), 1);
  EXPECT_EQ(b.trials(0).heartbeat_time().seconds(), 1700000061);
  EXPECT_EQ(client_->MustGetTrial(a.trials(0).name()).client_id(), "b");
}

TEST_F(StudyServiceTest, MeasuredTrialStaysWithItsClient) {
  v1::StudySpec spec = ValidSpec();
  spec.set_heartbeat_timeout_seconds(60);
  const std::string study = client_->MustCreateStudy(spec).name();
  v1::SuggestTrialsResponse a = client_->MustSuggest(study, 1, "a");
  ASSERT_EQ(a.trials_size(), 1);
  clock_.Advance(absl::Seconds(45));
  ASSERT_THAT(client_->AddMeasurement(a.trials(0).name(), Loss(0.4, 1)), GrpcOk());
  clock_.Advance(absl::Seconds(45));  // 90 s after the suggestion, 45 s after the measurement
  v1::SuggestTrialsResponse b = client_->MustSuggest(study, 1, "b");
  ASSERT_EQ(b.trials_size(), 1);
  EXPECT_NE(b.trials(0).id(), a.trials(0).id());
  EXPECT_EQ(client_->MustGetTrial(a.trials(0).name()).client_id(), "a");
}

TEST_F(StudyServiceTest, StaleTrialFailsAfterMaxRetries) {
  v1::StudySpec spec = ValidSpec();
  spec.set_heartbeat_timeout_seconds(60);
  spec.set_max_trial_retries(2);
  const std::string study = client_->MustCreateStudy(spec).name();
  v1::SuggestTrialsResponse first = client_->MustSuggest(study, 1, "a");
  ASSERT_EQ(first.trials_size(), 1);
  const std::string trial = first.trials(0).name();
  int retries = 0;
  for (const char* client : {"b", "c"}) {
    clock_.Advance(absl::Seconds(60));
    v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, client);
    ASSERT_EQ(r.trials_size(), 1);
    EXPECT_EQ(r.trials(0).name(), trial);
    EXPECT_EQ(r.trials(0).retries(), ++retries);
  }
  clock_.Advance(absl::Seconds(60));
  v1::SuggestTrialsResponse d = client_->MustSuggest(study, 1, "d");
  ASSERT_EQ(d.trials_size(), 1);
  EXPECT_NE(d.trials(0).name(), trial);
  v1::Trial failed = client_->MustGetTrial(trial);
  EXPECT_EQ(failed.state(), v1::Trial::FAILED);
  EXPECT_EQ(failed.retries(), 2);
  EXPECT_THAT(failed.infeasible_reason(), HasSubstr("no heartbeat within 1m, 3 times"));
  EXPECT_EQ(client_->MustGetStudy(study).completed_trial_count(), 1);
}

TEST_F(StudyServiceTest, CreatedTrialIsRequestedUntilSuggested) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::Trial created = client_->MustCreateTrial(study, AdamTrial(0.25, 4));
  EXPECT_EQ(created.state(), v1::Trial::REQUESTED);
  EXPECT_EQ(created.name(), study + "/trials/1");
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, "w");
  ASSERT_EQ(r.trials_size(), 1);
  EXPECT_EQ(r.trials(0).id(), created.id());
  EXPECT_EQ(r.trials(0).state(), v1::Trial::ACTIVE);
  EXPECT_EQ(r.trials(0).client_id(), "w");
  EXPECT_TRUE(MessageDifferencer::Equals(r.trials(0).parameters(1), created.parameters(1)));
  EXPECT_EQ(client_->MustGetTrial(created.name()).state(), v1::Trial::ACTIVE);
}

TEST_F(StudyServiceTest, CreatedTrialWithFinalMeasurementSucceeds) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::Trial t = AdamTrial(0.25, 4);
  *t.mutable_final_measurement() = Loss(0.125);
  v1::Trial created = client_->MustCreateTrial(study, t);
  EXPECT_EQ(created.state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(created.final_measurement().metrics().at("loss"), 0.125);
  EXPECT_EQ(client_->MustGetStudy(study).completed_trial_count(), 1);
  EXPECT_EQ(QueryInt(db_path_, "SELECT completion_seq FROM trials"), 1);
}

TEST_F(StudyServiceTest, ListOptimalTrialsSingleObjectiveReturnsTheBest) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  for (double loss : {0.5, 0.1, 0.3}) {
    v1::Trial t = AdamTrial(loss, 2);
    *t.mutable_final_measurement() = Loss(loss);
    client_->MustCreateTrial(study, t);
  }
  client_->MustSuggest(study, 1, "w");  // an ACTIVE trial is never optimal
  v1::ListOptimalTrialsRequest req;
  req.set_parent(study);
  v1::ListOptimalTrialsResponse resp;
  ASSERT_THAT(client_->Call(&Stub::ListOptimalTrials, req, &resp), GrpcOk());
  EXPECT_THAT(Ids(resp.optimal_trials()), ElementsAre(2));
}

TEST_F(StudyServiceTest, ListOptimalTrialsMultiObjectiveIsParetoFrontOfFeasibleTrials) {
  const v1::StudySpec spec = ParseText<v1::StudySpec>(R"pb(
    metrics { name: "accuracy" goal: MAXIMIZE }
    metrics { name: "latency" goal: MINIMIZE }
    metrics { name: "memory" goal: MINIMIZE safety_threshold: 100 }
    parameters {
      name: "x"
      double_spec { min: 0 max: 1 }
    }
    algorithm { algorithm: NSGA2 }
  )pb");
  const std::string study = client_->MustCreateStudy(spec).name();
  struct Point {
    double accuracy, latency, memory;
  };
  // 1 and 2 trade off; 3 is dominated by 1; 4 dominates everything but breaks the memory
  // constraint.
  for (Point p :
       {Point{0.9, 10, 50}, Point{0.8, 5, 100}, Point{0.7, 20, 50}, Point{0.99, 1, 200}}) {
    v1::Trial t = ParseText<v1::Trial>(R"pb(parameters { name: "x" double_value: 0.5 })pb");
    auto& metrics = *t.mutable_final_measurement()->mutable_metrics();
    metrics["accuracy"] = p.accuracy;
    metrics["latency"] = p.latency;
    metrics["memory"] = p.memory;
    client_->MustCreateTrial(study, t);
  }
  v1::ListOptimalTrialsRequest req;
  req.set_parent(study);
  v1::ListOptimalTrialsResponse resp;
  ASSERT_THAT(client_->Call(&Stub::ListOptimalTrials, req, &resp), GrpcOk());
  EXPECT_THAT(Ids(resp.optimal_trials()), UnorderedElementsAre(1, 2));
}

TEST_F(StudyServiceTest, StopTrialMakesItStoppingAndEarlyStoppingSaysStop) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 2, "w");
  ASSERT_EQ(r.trials_size(), 2);
  v1::StopTrialRequest stop;
  stop.set_name(r.trials(0).name());
  v1::Trial stopped;
  ASSERT_THAT(client_->Call(&Stub::StopTrial, stop, &stopped), GrpcOk());
  EXPECT_EQ(stopped.state(), v1::Trial::STOPPING);
  // Stopping again is a no-op.
  ASSERT_THAT(client_->Call(&Stub::StopTrial, stop, &stopped), GrpcOk());
  EXPECT_EQ(stopped.state(), v1::Trial::STOPPING);

  v1::CheckTrialEarlyStoppingStateRequest check;
  check.set_trial_name(r.trials(0).name());
  v1::CheckTrialEarlyStoppingStateResponse should;
  ASSERT_THAT(client_->Call(&Stub::CheckTrialEarlyStoppingState, check, &should), GrpcOk());
  EXPECT_TRUE(should.should_stop());
  check.set_trial_name(r.trials(1).name());
  ASSERT_THAT(client_->Call(&Stub::CheckTrialEarlyStoppingState, check, &should), GrpcOk());
  EXPECT_FALSE(should.should_stop());

  // A STOPPING trial still takes measurements and completes, in its own state.
  ASSERT_THAT(client_->AddMeasurement(r.trials(0).name(), Loss(0.3, 2)), GrpcOk());
  EXPECT_EQ(client_->MustComplete(r.trials(0).name(), Loss(0.3, 2)).state(), v1::Trial::STOPPED);
}

TEST_F(StudyServiceTest, StoppedTrialKeepsItsLastMeasurementAndIsNeverOptimal) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 2, "w");
  ASSERT_EQ(r.trials_size(), 2);
  const std::string early = r.trials(0).name();
  ASSERT_THAT(client_->AddMeasurement(early, Loss(0.4, 1)), GrpcOk());
  ASSERT_THAT(client_->AddMeasurement(early, Loss(0.1, 2)), GrpcOk());
  v1::StopTrialRequest stop;
  stop.set_name(early);
  v1::Trial ignored;
  ASSERT_THAT(client_->Call(&Stub::StopTrial, stop, &ignored), GrpcOk());
  // Completed without a final measurement: the last one is final.
  v1::CompleteTrialRequest complete;
  complete.set_name(early);
  v1::Trial stopped;
  ASSERT_THAT(client_->Call(&Stub::CompleteTrial, complete, &stopped), GrpcOk());
  EXPECT_EQ(stopped.state(), v1::Trial::STOPPED);
  EXPECT_EQ(stopped.final_measurement().metrics().at("loss"), 0.1);
  EXPECT_EQ(stopped.measurements_size(), 2);
  // A STOPPED trial is final: no second completion, no measurement, no stop.
  EXPECT_THAT(client_->Call(&Stub::CompleteTrial, complete, &ignored),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION, HasSubstr("already STOPPED")));
  EXPECT_THAT(client_->AddMeasurement(early, Loss(0.1, 3)),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION, HasSubstr("is STOPPED")));
  // Its loss (0.1) beats the finished trial's (0.5), yet only the finished one is optimal.
  client_->MustComplete(r.trials(1).name(), Loss(0.5));
  v1::ListOptimalTrialsRequest optimal;
  optimal.set_parent(study);
  v1::ListOptimalTrialsResponse best;
  ASSERT_THAT(client_->Call(&Stub::ListOptimalTrials, optimal, &best), GrpcOk());
  EXPECT_THAT(Ids(best.optimal_trials()), ElementsAre(r.trials(1).id()));
  v1::ListTrialsRequest list;
  list.set_parent(study);
  list.set_state(v1::Trial::STOPPED);
  v1::ListTrialsResponse listed;
  ASSERT_THAT(client_->Call(&Stub::ListTrials, list, &listed), GrpcOk());
  EXPECT_THAT(Ids(listed.trials()), ElementsAre(r.trials(0).id()));
  EXPECT_EQ(client_->MustGetStudy(study).completed_trial_count(), 2);

  ASSERT_NO_FATAL_FAILURE(RestartServer());
  v1::GetTrialRequest get;
  get.set_name(early);
  v1::Trial after;
  ASSERT_THAT(client_->Call(&Stub::GetTrial, get, &after), GrpcOk());
  EXPECT_EQ(after.state(), v1::Trial::STOPPED);
  ASSERT_THAT(client_->Call(&Stub::ListOptimalTrials, optimal, &best), GrpcOk());
  EXPECT_THAT(Ids(best.optimal_trials()), ElementsAre(r.trials(1).id()));
}

TEST_F(StudyServiceTest, EarlyStoppingDecisionIsKeptAndEndsTheTrialStopped) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_early_stopping()->set_policy(v1::EarlyStoppingSpec::MEDIAN);
  spec.mutable_early_stopping()->set_min_trials(2);
  const std::string study = client_->MustCreateStudy(spec).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 3, "w");
  ASSERT_EQ(r.trials_size(), 3);
  // Two good finished curves, then a third far worse at the same steps.
  for (int i = 0; i < 2; ++i) {
    for (int step = 1; step <= 3; ++step) {
      ASSERT_THAT(client_->AddMeasurement(r.trials(i).name(), Loss(0.1 * (4 - step), step)),
                  GrpcOk());
    }
    client_->MustComplete(r.trials(i).name(), Loss(0.1));
  }
  const std::string bad = r.trials(2).name();
  for (int step = 1; step <= 3; ++step) {
    ASSERT_THAT(client_->AddMeasurement(bad, Loss(5.0, step)), GrpcOk());
  }
  v1::CheckTrialEarlyStoppingStateRequest check;
  check.set_trial_name(bad);
  v1::CheckTrialEarlyStoppingStateResponse should;
  ASSERT_THAT(client_->Call(&Stub::CheckTrialEarlyStoppingState, check, &should), GrpcOk());
  ASSERT_TRUE(should.should_stop());
  v1::GetTrialRequest get;
  get.set_name(bad);
  v1::Trial now;
  ASSERT_THAT(client_->Call(&Stub::GetTrial, get, &now), GrpcOk());
  EXPECT_EQ(now.state(), v1::Trial::STOPPING);
  EXPECT_EQ(client_->MustComplete(bad, Loss(5.0, 3)).state(), v1::Trial::STOPPED);
}

TEST_F(StudyServiceTest, CreateStudyIsGetOrCreateByDisplayName) {
  const v1::Study first = client_->MustCreateStudy(ValidSpec(), "ctr-sweep");
  client_->MustSuggest(first.name(), 1, "w");
  // The same spec: the same study, as it stands now (one trial), not a new one.
  const v1::Study again = client_->MustCreateStudy(ValidSpec(), "ctr-sweep");
  EXPECT_EQ(again.name(), first.name());
  EXPECT_EQ(again.trial_count(), 1);
  // Another spec under the same name: ALREADY_EXISTS naming the study and the difference.
  v1::StudySpec other = ValidSpec();
  other.set_max_trials(40);
  const std::string before = Dump();
  v1::Study ignored;
  EXPECT_THAT(client_->CreateStudy(other, &ignored, "ctr-sweep"),
              GrpcStatusIs(StatusCode::ALREADY_EXISTS,
                           AllOf(HasSubstr("study.display_name: \"ctr-sweep\""),
                                 HasSubstr(first.name()), HasSubstr("max_trials"))));
  EXPECT_EQ(Dump(), before);
  // Other names, and the empty name, always create.
  const std::string second = client_->MustCreateStudy(other, "ctr-sweep-2").name();
  EXPECT_NE(client_->MustCreateStudy(ValidSpec()).name(), client_->MustCreateStudy(ValidSpec()).name());

  v1::ListStudiesRequest list;
  list.set_display_name("ctr-sweep");
  v1::ListStudiesResponse listed;
  ASSERT_THAT(client_->Call(&Stub::ListStudies, list, &listed), GrpcOk());
  ASSERT_EQ(listed.studies_size(), 1);
  EXPECT_EQ(listed.studies(0).name(), first.name());
  list.set_display_name("ctr-sweep-2");
  ASSERT_THAT(client_->Call(&Stub::ListStudies, list, &listed), GrpcOk());
  ASSERT_EQ(listed.studies_size(), 1);
  EXPECT_EQ(listed.studies(0).name(), second);

  // Survives a restart; a deleted study's name is free again.
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  EXPECT_EQ(client_->MustCreateStudy(ValidSpec(), "ctr-sweep").name(), first.name());
  v1::DeleteStudyRequest del;
  del.set_name(first.name());
  v1::DeleteStudyResponse deleted;
  ASSERT_THAT(client_->Call(&Stub::DeleteStudy, del, &deleted), GrpcOk());
  const v1::Study fresh = client_->MustCreateStudy(other, "ctr-sweep");
  EXPECT_NE(fresh.name(), first.name());
  EXPECT_EQ(fresh.spec().max_trials(), 40);
}

TEST_F(StudyServiceTest, TenConcurrentCreatorsOfOneNameGetOneStudy) {
  std::vector<std::string> names(10);
  std::vector<std::thread> creators;
  const std::string address = absl::StrCat("127.0.0.1:", server_->grpc_port());
  for (size_t i = 0; i < names.size(); ++i) {
    creators.emplace_back([&, i] {
      StudyClient own(address, "");  // a channel of its own, as a separate worker has
      names[i] = own.MustCreateStudy(ValidSpec(), "shared").name();
    });
  }
  for (std::thread& t : creators) t.join();
  EXPECT_THAT(std::set<std::string>(names.begin(), names.end()), ElementsAre(names[0]));
  v1::ListStudiesRequest list;
  list.set_display_name("shared");
  v1::ListStudiesResponse listed;
  ASSERT_THAT(client_->Call(&Stub::ListStudies, list, &listed), GrpcOk());
  EXPECT_EQ(listed.studies_size(), 1);
  EXPECT_EQ(client_->MustListStudies().studies_size(), 1);
}

TEST_F(StudyServiceTest, MetadataOfStudiesAndTrialsIsSetRemovedAndKept) {
  v1::CreateStudyRequest create;
  *create.mutable_study()->mutable_spec() = ValidSpec();
  (*create.mutable_study()->mutable_metadata())["git"] = "abc123";
  v1::Study study;
  ASSERT_THAT(client_->Call(&Stub::CreateStudy, create, &study), GrpcOk());
  EXPECT_EQ(study.metadata().at("git"), "abc123");

  v1::UpdateMetadataRequest update;
  update.set_name(study.name());
  (*update.mutable_set())["owner"] = "ranking-team";
  update.add_remove("git");
  update.add_remove("absent");  // no error
  v1::UpdateMetadataResponse md;
  ASSERT_THAT(client_->Call(&Stub::UpdateMetadata, update, &md), GrpcOk());
  const std::map<std::string, std::string> after_update(md.metadata().begin(),
                                                        md.metadata().end());
  const std::map<std::string, std::string> want = {{"owner", "ranking-team"}};
  EXPECT_EQ(after_update, want);

  const std::string trial = client_->MustSuggest(study.name(), 1, "w").trials(0).name();
  v1::UpdateMetadataRequest tu;
  tu.set_name(trial);
  (*tu.mutable_set())["log"] = "gs://bucket/run-1";
  ASSERT_THAT(client_->Call(&Stub::UpdateMetadata, tu, &md), GrpcOk());
  client_->MustComplete(trial, Loss(0.2));

  // Bad input names the field and changes nothing.
  const std::string before = Dump();
  v1::UpdateMetadataRequest bad;
  bad.set_name(trial);
  (*bad.mutable_set())[""] = "x";
  EXPECT_THAT(client_->Call(&Stub::UpdateMetadata, bad, &md),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("set: key \"\" must be 1 to")));
  bad.clear_set();
  (*bad.mutable_set())["big"] = std::string(64 * 1024 + 1, 'x');
  EXPECT_THAT(client_->Call(&Stub::UpdateMetadata, bad, &md),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("set[\"big\"]: value of 65537")));
  bad.set_name(study.name() + "/trials/99");
  EXPECT_THAT(client_->Call(&Stub::UpdateMetadata, bad, &md),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("trials/99")));
  bad.set_name("studies/x");
  EXPECT_THAT(client_->Call(&Stub::UpdateMetadata, bad, &md),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT, HasSubstr("name: malformed study name")));
  EXPECT_EQ(Dump(), before);

  ASSERT_NO_FATAL_FAILURE(RestartServer());
  EXPECT_EQ(client_->MustGetStudy(study.name()).metadata().at("owner"), "ranking-team");
  v1::GetTrialRequest get;
  get.set_name(trial);
  v1::Trial t;
  ASSERT_THAT(client_->Call(&Stub::GetTrial, get, &t), GrpcOk());
  EXPECT_EQ(t.metadata().at("log"), "gs://bucket/run-1");
  EXPECT_EQ(t.state(), v1::Trial::SUCCEEDED);  // metadata did not disturb the completion
  EXPECT_EQ(client_->MustGetStudy(study.name()).completed_trial_count(), 1);
}

TEST_F(StudyServiceTest, DeleteTrialRemovesItFromEveryViewAndFreesItsBudget) {
  v1::StudySpec spec = ValidSpec();
  spec.set_max_trials(3);
  const std::string study = client_->MustCreateStudy(spec).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 3, "w");
  ASSERT_EQ(r.trials_size(), 3);
  client_->MustComplete(r.trials(0).name(), Loss(0.01));  // the best, then deleted
  client_->MustComplete(r.trials(1).name(), Loss(0.5));
  v1::DeleteTrialRequest del;
  del.set_name(r.trials(0).name());
  v1::DeleteTrialResponse gone;
  ASSERT_THAT(client_->Call(&Stub::DeleteTrial, del, &gone), GrpcOk());
  EXPECT_THAT(client_->Call(&Stub::DeleteTrial, del, &gone),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr(r.trials(0).name())));

  auto check = [&] {
    v1::GetTrialRequest get;
    get.set_name(r.trials(0).name());
    v1::Trial t;
    EXPECT_THAT(client_->Call(&Stub::GetTrial, get, &t),
                GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("not found")));
    v1::ListTrialsRequest list;
    list.set_parent(study);
    v1::ListTrialsResponse listed;
    ASSERT_THAT(client_->Call(&Stub::ListTrials, list, &listed), GrpcOk());
    EXPECT_THAT(Ids(listed.trials()), ElementsAre(2, 3));
    v1::ListOptimalTrialsRequest optimal;
    optimal.set_parent(study);
    v1::ListOptimalTrialsResponse best;
    ASSERT_THAT(client_->Call(&Stub::ListOptimalTrials, optimal, &best), GrpcOk());
    EXPECT_THAT(Ids(best.optimal_trials()), ElementsAre(2));
    const v1::Study s = client_->MustGetStudy(study);
    EXPECT_EQ(s.trial_count(), 2);
    EXPECT_EQ(s.completed_trial_count(), 1);
  };
  check();
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  check();
  // max_trials counts the trials that remain: one more fits, with a new id (never reused).
  v1::SuggestTrialsResponse more = client_->MustSuggest(study, 2, "w2");
  ASSERT_EQ(more.trials_size(), 1);
  EXPECT_EQ(more.trials(0).id(), 4);
}

TEST_F(StudyServiceTest, ListTrialsPagesReturnEveryTrialOnce) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  for (int i = 1; i <= 250; ++i) {
    v1::Trial t = AdamTrial(0.5, 1 + i % 10);
    if (i % 2 == 0) *t.mutable_final_measurement() = Loss(i);  // even ids SUCCEEDED
    ASSERT_EQ(client_->MustCreateTrial(study, t).id(), i);
  }
  auto list_all = [&](v1::Trial::State state, std::vector<int>* page_sizes) {
    std::vector<int64_t> ids;
    std::string token;
    do {
      v1::ListTrialsRequest req;
      req.set_parent(study);
      req.set_state(state);
      req.set_page_size(100);
      req.set_page_token(token);
      v1::ListTrialsResponse resp;
      EXPECT_THAT(client_->Call(&Stub::ListTrials, req, &resp), GrpcOk());
      page_sizes->push_back(resp.trials_size());
      for (int64_t id : Ids(resp.trials())) ids.push_back(id);
      token = resp.next_page_token();
    } while (!token.empty() && page_sizes->size() < 10);
    return ids;
  };

  std::vector<int> pages;
  std::vector<int64_t> all = list_all(v1::Trial::STATE_UNSPECIFIED, &pages);
  EXPECT_THAT(pages, ElementsAre(100, 100, 50));
  std::vector<int64_t> want(250);
  for (int i = 0; i < 250; ++i) want[i] = i + 1;
  EXPECT_EQ(all, want);

  pages.clear();
  std::vector<int64_t> succeeded = list_all(v1::Trial::SUCCEEDED, &pages);
  EXPECT_THAT(pages, ElementsAre(100, 25));
  ASSERT_EQ(succeeded.size(), 125u);
  for (size_t i = 0; i < succeeded.size(); ++i) EXPECT_EQ(succeeded[i], 2 * (i + 1));

  pages.clear();
  std::vector<int64_t> requested = list_all(v1::Trial::REQUESTED, &pages);
  EXPECT_THAT(pages, ElementsAre(100, 25));
  ASSERT_EQ(requested.size(), 125u);
  EXPECT_EQ(requested.front(), 1);
  EXPECT_EQ(requested.back(), 249);
}

TEST_F(StudyServiceTest, ListStudiesPagesReturnEveryStudyOnce) {
  for (int i = 0; i < 5; ++i) client_->MustCreateStudy(ValidSpec());
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    v1::ListStudiesRequest req;
    req.set_page_size(2);
    req.set_page_token(token);
    v1::ListStudiesResponse resp;
    ASSERT_THAT(client_->Call(&Stub::ListStudies, req, &resp), GrpcOk());
    for (const v1::Study& s : resp.studies()) names.push_back(s.name());
    token = resp.next_page_token();
  } while (!token.empty() && ++pages < 10);
  EXPECT_THAT(names, ElementsAre("studies/1", "studies/2", "studies/3", "studies/4", "studies/5"));
}

TEST_F(StudyServiceTest, DeletedStudyIsNotFoundAndItsRowsAreGone) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string other = client_->MustCreateStudy(ValidSpec()).name();
  v1::DeleteStudyRequest del;
  del.set_name(seed_study_);
  v1::DeleteStudyResponse deleted;
  ASSERT_THAT(client_->Call(&Stub::DeleteStudy, del, &deleted), GrpcOk());

  v1::GetStudyRequest get;
  get.set_name(seed_study_);
  v1::Study study;
  EXPECT_THAT(client_->Call(&Stub::GetStudy, get, &study),
              GrpcStatusIs(StatusCode::NOT_FOUND,
                           HasSubstr(absl::StrCat("study \"", seed_study_, "\" not found"))));
  v1::GetTrialRequest get_trial;
  get_trial.set_name(seed_trials_[0]);
  v1::Trial trial;
  EXPECT_THAT(client_->Call(&Stub::GetTrial, get_trial, &trial),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("not found")));
  EXPECT_THAT(client_->Call(&Stub::DeleteStudy, del, &deleted),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("not found")));

  v1::ListStudiesRequest list;
  v1::ListStudiesResponse listed;
  ASSERT_THAT(client_->Call(&Stub::ListStudies, list, &listed), GrpcOk());
  ASSERT_EQ(listed.studies_size(), 1);
  EXPECT_EQ(listed.studies(0).name(), other);
  EXPECT_EQ(QueryInt(db_path_, "SELECT COUNT(*) FROM studies"), 1);
  EXPECT_EQ(QueryInt(db_path_, "SELECT COUNT(*) FROM trials"), 0);
}

TEST_F(StudyServiceTest, RestartKeepsStudiesAndTrialsAndContinuesIds) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 3, "w");
  ASSERT_EQ(r.trials_size(), 3);
  client_->MustComplete(r.trials(0).name(), Loss(0.3));
  client_->MustComplete(r.trials(1).name(), Loss(0.2));
  const v1::Study study_before = client_->MustGetStudy(study);
  v1::ListTrialsRequest list;
  list.set_parent(study);
  v1::ListTrialsResponse trials_before;
  ASSERT_THAT(client_->Call(&Stub::ListTrials, list, &trials_before), GrpcOk());
  const std::string dump_before = Dump();

  ASSERT_NO_FATAL_FAILURE(RestartServer());

  EXPECT_EQ(Dump(), dump_before);  // loading writes nothing
  EXPECT_TRUE(MessageDifferencer::Equals(client_->MustGetStudy(study), study_before));
  v1::ListTrialsResponse trials_after;
  ASSERT_THAT(client_->Call(&Stub::ListTrials, list, &trials_after), GrpcOk());
  EXPECT_TRUE(MessageDifferencer::Equals(trials_after, trials_before))
      << trials_after.DebugString();
  // The worker still holds trial 3; another one gets new ids.
  EXPECT_THAT(Ids(client_->MustSuggest(study, 1, "w").trials()), ElementsAre(3));
  EXPECT_THAT(Ids(client_->MustSuggest(study, 2, "other").trials()), ElementsAre(4, 5));
  EXPECT_EQ(client_->MustGetStudy(study).trial_count(), 5);
  EXPECT_EQ(client_->MustCreateStudy(ValidSpec()).name(), "studies/2");
}

TEST_F(StudyServiceTest, DeletedStudyIdIsNotReusedAfterRestart) {
  client_->MustCreateStudy(ValidSpec());
  const std::string doomed = client_->MustCreateStudy(ValidSpec()).name();
  v1::DeleteStudyRequest del;
  del.set_name(doomed);
  v1::DeleteStudyResponse deleted;
  ASSERT_THAT(client_->Call(&Stub::DeleteStudy, del, &deleted), GrpcOk());
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  EXPECT_NE(client_->MustCreateStudy(ValidSpec()).name(), doomed);
}

TEST_F(StudyServiceTest, HttpTrialsListsTheStudysTrialsAsJson) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  ASSERT_EQ(client_->MustSuggest(study, 2, "w").trials_size(), 2);
  HttpReply reply = HttpGet(server_->http_port(), "/api/v1/studies/1/trials");
  EXPECT_EQ(reply.status, 200);
  EXPECT_THAT(reply.body, HasSubstr("\"name\":\"studies/1/trials/1\""));
  EXPECT_THAT(reply.body, HasSubstr("\"name\":\"studies/1/trials/2\""));
  EXPECT_THAT(reply.body, HasSubstr("\"client_id\":\"w\""));
  EXPECT_THAT(reply.body, HasSubstr("\"state\":\"ACTIVE\""));
}

TEST_F(StudyServiceTest, HttpTrialStateFilterTakesAnyCaseAndNamesTheChoicesWhenWrong) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  ASSERT_EQ(client_->MustSuggest(study, 2, "w").trials_size(), 2);
  for (const char* state : {"active", "ACTIVE", "Active"}) {
    HttpReply reply =
        HttpGet(server_->http_port(), std::string("/api/v1/studies/1/trials?state=") + state);
    EXPECT_EQ(reply.status, 200) << state << ": " << reply.body;
    EXPECT_THAT(reply.body, HasSubstr("\"name\":\"studies/1/trials/2\""));
  }
  HttpReply none = HttpGet(server_->http_port(), "/api/v1/studies/1/trials?state=succeeded");
  EXPECT_EQ(none.status, 200) << none.body;
  EXPECT_THAT(none.body, Not(HasSubstr("studies/1/trials/1")));
  HttpReply bad = HttpGet(server_->http_port(), "/api/v1/studies/1/trials?state=done");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("state: unknown trial state \\\"done\\\" (want requested"));
}

TEST(HttpStatusTest, CodesMapAsGoogleApisMapThem) {
  const std::vector<std::pair<absl::StatusCode, int>> want = {
      {absl::StatusCode::kOk, 200},
      {absl::StatusCode::kCancelled, 499},
      {absl::StatusCode::kUnknown, 500},
      {absl::StatusCode::kInvalidArgument, 400},
      {absl::StatusCode::kDeadlineExceeded, 504},
      {absl::StatusCode::kNotFound, 404},
      {absl::StatusCode::kAlreadyExists, 409},
      {absl::StatusCode::kPermissionDenied, 403},
      {absl::StatusCode::kResourceExhausted, 429},
      {absl::StatusCode::kFailedPrecondition, 400},
      {absl::StatusCode::kAborted, 409},
      {absl::StatusCode::kOutOfRange, 400},
      {absl::StatusCode::kUnimplemented, 501},
      {absl::StatusCode::kInternal, 500},
      {absl::StatusCode::kUnavailable, 503},
      {absl::StatusCode::kDataLoss, 500},
      {absl::StatusCode::kUnauthenticated, 401},
  };
  for (const auto& [code, status] : want) {
    EXPECT_EQ(HttpStatusFor(code), status) << absl::StatusCodeToString(code);
  }
}

TEST_F(StudyServiceTest, HttpWrongMethodIs405WithAllow) {
  for (const char* method : {"POST", "DELETE", "PUT"}) {
    HttpReply reply = HttpCall(server_->http_port(), method, "/api/v1/studies");
    EXPECT_EQ(reply.status, 405) << method;
    EXPECT_THAT(reply.headers, HasSubstr("Allow: GET, HEAD")) << reply.headers;
    EXPECT_THAT(reply.body, HasSubstr("only GET and HEAD are served"));
  }
  EXPECT_EQ(HttpCall(server_->http_port(), "HEAD", "/api/v1/studies").status, 200);
}

TEST_F(StudyServiceTest, HttpStudiesFilterByDisplayName) {
  const std::string wanted = client_->MustCreateStudy(ValidSpec(), "ranker").name();
  client_->MustCreateStudy(ValidSpec(), "other");
  HttpReply reply = HttpGet(server_->http_port(), "/api/v1/studies?display_name=ranker");
  ASSERT_EQ(reply.status, 200) << reply.body;
  v1::ListStudiesResponse listed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(reply.body, &listed).ok()) << reply.body;
  ASSERT_EQ(listed.studies_size(), 1);
  EXPECT_EQ(listed.studies(0).name(), wanted);
}

TEST_F(StudyServiceTest, ParameterImportanceNamesWhatExplainsTheMetric) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  // loss depends on x only; n varies as much but explains nothing.
  for (int i = 0; i < 60; ++i) {
    const double x = (i * 37 % 60) / 60.0;
    v1::Trial t = AdamTrial(x, 1 + i % 10);
    *t.mutable_final_measurement() = Loss(5 * x * x);
    client_->MustCreateTrial(study, t);
  }
  client_->MustCreateTrial(study, AdamTrial(0.5, 3));  // REQUESTED: not counted
  v1::GetParameterImportanceRequest req;
  req.set_parent(study);
  v1::GetParameterImportanceResponse resp;
  ASSERT_THAT(client_->Call(&Stub::GetParameterImportance, req, &resp), GrpcOk());
  EXPECT_EQ(resp.metric(), "loss");  // the default: the first objective
  EXPECT_EQ(resp.trial_count(), 60);
  ASSERT_EQ(resp.parameters_size(), 4);  // opt, its child momentum, x, n
  EXPECT_EQ(resp.parameters(0).name(), "x");
  EXPECT_GT(resp.parameters(0).explained_variance(), 0.9);
  EXPECT_GT(resp.parameters(0).importance(), 0.9);
  for (const v1::ParameterImportance& p : resp.parameters()) {
    if (p.name() == "momentum") {
      EXPECT_EQ(p.trial_count(), 0);  // never active (all adam)
    }
  }
  // Asked again unchanged: the same answer (kept); a trial that completes moves it.
  v1::GetParameterImportanceResponse again;
  ASSERT_THAT(client_->Call(&Stub::GetParameterImportance, req, &again), GrpcOk());
  EXPECT_EQ(again.SerializeAsString(), resp.SerializeAsString());
  {
    v1::Trial t = AdamTrial(0.9, 2);
    *t.mutable_final_measurement() = Loss(5 * 0.9 * 0.9);
    client_->MustCreateTrial(study, t);
  }
  ASSERT_THAT(client_->Call(&Stub::GetParameterImportance, req, &again), GrpcOk());
  EXPECT_EQ(again.trial_count(), 61);
  EXPECT_EQ(again.parameters(0).name(), "x");
  // A trial's final measurement changing (the REQUESTED one completing) moves it too.
  {
    v1::CompleteTrialRequest complete;
    complete.set_name(absl::StrCat(study, "/trials/61"));
    *complete.mutable_final_measurement() = Loss(5 * 0.5 * 0.5);
    v1::Trial done;
    ASSERT_THAT(client_->Call(&Stub::CompleteTrial, complete, &done), GrpcOk());
  }
  ASSERT_THAT(client_->Call(&Stub::GetParameterImportance, req, &again), GrpcOk());
  EXPECT_EQ(again.trial_count(), 62);

  req.set_metric("accuracy");
  EXPECT_THAT(client_->Call(&Stub::GetParameterImportance, req, &resp),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("metric: \"accuracy\" is not a metric of the study (\"loss\")")));
  req.set_parent("studies/99");
  req.clear_metric();
  EXPECT_THAT(client_->Call(&Stub::GetParameterImportance, req, &resp),
              GrpcStatusIs(StatusCode::NOT_FOUND, HasSubstr("studies/99")));

  HttpReply reply = HttpGet(server_->http_port(), "/api/v1/studies/1/importance?metric=loss");
  ASSERT_EQ(reply.status, 200) << reply.body;
  v1::GetParameterImportanceResponse over_http;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(reply.body, &over_http).ok());
  EXPECT_EQ(over_http.parameters(0).name(), "x");
}

TEST_F(StudyServiceTest, HttpUnknownStudyIs404) {
  HttpReply reply = HttpGet(server_->http_port(), "/api/v1/studies/42");
  EXPECT_EQ(reply.status, 404);
  EXPECT_THAT(reply.body, HasSubstr("study \\\"studies/42\\\" not found"));
}

TEST_F(StudyServiceTest, HttpMetricsCountRpcsAndTrials) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  ASSERT_EQ(client_->MustSuggest(study, 2, "w").trials_size(), 2);
  v1::Study rejected;
  v1::StudySpec bad = ValidSpec();
  bad.clear_metrics();
  ASSERT_THAT(client_->CreateStudy(bad, &rejected), Not(GrpcOk()));
  HttpReply reply = HttpGet(server_->http_port(), "/metrics");
  EXPECT_EQ(reply.status, 200);
  EXPECT_THAT(reply.body, HasSubstr("evoscale_rpcs_total{code=\"OK\",method=\"CreateStudy\"} 1"));
  EXPECT_THAT(reply.body,
              HasSubstr("evoscale_rpcs_total{code=\"INVALID_ARGUMENT\",method=\"CreateStudy\"} 1"));
  EXPECT_THAT(reply.body, HasSubstr("evoscale_rpcs_total{code=\"OK\",method=\"SuggestTrials\"} 1"));
  EXPECT_THAT(reply.body, HasSubstr("evoscale_trials{state=\"ACTIVE\"} 2"));
  EXPECT_THAT(reply.body, HasSubstr("evoscale_studies{state=\"ACTIVE\"} 1"));
  // Two writes (the study, the suggestion), one at a time: one commit each.
  EXPECT_THAT(reply.body, HasSubstr("evoscale_store_operations_total{op=\"write\"} 2"));
  EXPECT_THAT(reply.body, HasSubstr("evoscale_store_operations_total{op=\"commit\"} 2"));
}

TEST_F(StudyServiceTest, StartOnNonLoopbackAddressWithoutTokensIsFailedPrecondition) {
  ServerOptions options = Options();
  options.db_path = dir_.File("other.db");
  options.grpc_address = "0.0.0.0:0";
  EXPECT_THAT(Server::Start(options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--grpc \"0.0.0.0:0\" is not a loopback address")));
  options.grpc_address = "127.0.0.1:0";
  options.http_address = "[::]:0";
  EXPECT_THAT(Server::Start(options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--http \"[::]:0\" is not a loopback address")));
  EXPECT_FALSE(std::filesystem::exists(options.db_path));
}

TEST_F(StudyServiceTest, StartWithMissingTokensFileIsNotFound) {
  ServerOptions options = Options();
  options.db_path = dir_.File("other.db");
  options.auth_tokens_path = dir_.File("no-tokens");
  EXPECT_THAT(Server::Start(options).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot open")));
}

// ---- Authentication ------------------------------------------------------------------------

constexpr char kAdminToken[] = "admintoken0123456789";
constexpr char kWriterToken[] = "writertoken0123456789";
constexpr char kReaderToken[] = "readertoken0123456789";

class StudyServiceAuthTest : public StudyServiceTest {
 protected:
  void SetUp() override {
    std::ofstream(tokens_path_) << kAdminToken << " admin\n"
                                << kWriterToken << " writer\n"
                                << kReaderToken << " reader\n";
    ASSERT_NO_FATAL_FAILURE(StudyServiceTest::SetUp());
    client_->set_token(kAdminToken);
  }

  ServerOptions Options() override {
    ServerOptions options = StudyServiceTest::Options();
    options.auth_tokens_path = tokens_path_;
    return options;
  }

  const std::string tokens_path_ = dir_.File("tokens");
};

TEST_F(StudyServiceAuthTest, NoTokenIsUnauthenticated) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  client_->set_token("");
  v1::Study study;
  EXPECT_THAT(client_->CreateStudy(ValidSpec(), &study),
              GrpcStatusIs(StatusCode::UNAUTHENTICATED,
                           HasSubstr("missing \"authorization: Bearer TOKEN\"")));
  v1::GetStudyRequest get;
  get.set_name(seed_study_);
  EXPECT_THAT(client_->Call(&Stub::GetStudy, get, &study),
              GrpcStatusIs(StatusCode::UNAUTHENTICATED, HasSubstr("authorization")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceAuthTest, UnknownTokenIsUnauthenticated) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  client_->set_token("garbagegarbagegarbage");
  v1::Study study;
  EXPECT_THAT(client_->CreateStudy(ValidSpec(), &study),
              GrpcStatusIs(StatusCode::UNAUTHENTICATED, HasSubstr("authorization: unknown token")));
  EXPECT_EQ(Dump(), before);
}

TEST_F(StudyServiceAuthTest, ReaderCannotCreateStudyButCanRead) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  client_->set_token(kReaderToken);
  v1::Study study;
  EXPECT_THAT(client_->CreateStudy(ValidSpec(), &study),
              GrpcStatusIs(StatusCode::PERMISSION_DENIED,
                           HasSubstr("role \"reader\" may not do this; needs \"writer\"")));
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[2], Loss(0.1, 1)),
              GrpcStatusIs(StatusCode::PERMISSION_DENIED, HasSubstr("needs \"writer\"")));
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(client_->MustGetStudy(seed_study_).trial_count(), 3);
  v1::ListTrialsRequest list;
  list.set_parent(seed_study_);
  v1::ListTrialsResponse trials;
  EXPECT_THAT(client_->Call(&Stub::ListTrials, list, &trials), GrpcOk());
  EXPECT_EQ(trials.trials_size(), 3);
}

TEST_F(StudyServiceAuthTest, WriterCannotDeleteStudy) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const std::string before = Dump();
  client_->set_token(kWriterToken);
  v1::DeleteStudyRequest del;
  del.set_name(seed_study_);
  v1::DeleteStudyResponse resp;
  EXPECT_THAT(client_->Call(&Stub::DeleteStudy, del, &resp),
              GrpcStatusIs(StatusCode::PERMISSION_DENIED,
                           HasSubstr("role \"writer\" may not do this; needs \"admin\"")));
  EXPECT_EQ(Dump(), before);
  // A writer runs trials.
  v1::SuggestTrialsResponse r = client_->MustSuggest(seed_study_, 1, "writer-worker");
  ASSERT_EQ(r.trials_size(), 1);
  client_->MustComplete(r.trials(0).name(), Loss(0.2));
}

TEST_F(StudyServiceAuthTest, AdminCanDoEverything) {
  client_->set_token(kAdminToken);
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, "admin-worker");
  ASSERT_EQ(r.trials_size(), 1);
  client_->MustComplete(r.trials(0).name(), Loss(0.2));
  EXPECT_EQ(client_->MustGetStudy(study).completed_trial_count(), 1);
  v1::DeleteStudyRequest del;
  del.set_name(study);
  v1::DeleteStudyResponse resp;
  EXPECT_THAT(client_->Call(&Stub::DeleteStudy, del, &resp), GrpcOk());
  EXPECT_EQ(QueryInt(db_path_, "SELECT COUNT(*) FROM studies"), 0);
}

TEST_F(StudyServiceAuthTest, HttpWithoutTokenIs401AndReaderIs200) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const int port = server_->http_port();
  EXPECT_EQ(HttpGet(port, "/api/v1/studies").status, 401);
  EXPECT_EQ(HttpGet(port, "/api/v1/studies", "Bearer garbagegarbagegarbage").status, 401);
  EXPECT_EQ(HttpGet(port, "/metrics").status, 401);
  HttpReply reader = HttpGet(port, "/api/v1/studies", std::string("Bearer ") + kReaderToken);
  EXPECT_EQ(reader.status, 200);
  EXPECT_THAT(reader.body, HasSubstr("\"name\":\"" + seed_study_ + "\""));
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
}

// Durability "power": writes are applied to the cache, queued, and answered once their fsync
// is done (group commit); reads wait for every write queued before them.
class StudyServicePowerTest : public StudyServiceTest {
 protected:
  ServerOptions Options() override {
    ServerOptions options = StudyServiceTest::Options();
    options.durability = Durability::kPowerLoss;
    return options;
  }
};

TEST_F(StudyServicePowerTest, AnsweredWritesAreStoredAndReadBack) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  const v1::Study study = client_->MustGetStudy(seed_study_);
  EXPECT_EQ(study.trial_count(), 3);
  EXPECT_EQ(study.completed_trial_count(), 1);
  EXPECT_EQ(client_->MustGetTrial(seed_trials_[1]).measurements_size(), 1);
  const std::string before = Dump();
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  EXPECT_EQ(Dump(), before);
  EXPECT_EQ(client_->MustGetTrial(seed_trials_[0]).state(), v1::Trial::SUCCEEDED);
}

TEST_F(StudyServicePowerTest, AWriteTheDatabaseRefusesStopsTheServiceUntilRestart) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  // Another connection makes the database refuse new trial rows (as a full or failing disk
  // would refuse every write).
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TRIGGER refuse BEFORE INSERT ON trials "
                           "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  v1::SuggestTrialsRequest req;
  req.set_parent(seed_study_);
  req.set_suggestion_count(1);
  req.set_client_id("other-worker");
  v1::SuggestTrialsResponse resp;
  EXPECT_THAT(client_->Call(&Stub::SuggestTrials, req, &resp),
              GrpcStatusIs(StatusCode::UNAVAILABLE,
                           AllOf(HasSubstr("injected failure"), HasSubstr("restart"))));
  // The cache already held the refused suggestion, so nothing is answered any more, reads
  // included.
  v1::GetStudyRequest get;
  get.set_name(seed_study_);
  v1::Study study;
  EXPECT_THAT(client_->Call(&Stub::GetStudy, get, &study),
              GrpcStatusIs(StatusCode::UNAVAILABLE, HasSubstr("restart")));
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[1], Loss(0.6, 2)),
              GrpcStatusIs(StatusCode::UNAVAILABLE, HasSubstr("restart")));
  // After a restart (the trigger gone) the service answers from the database: the seed,
  // and nothing of the refused write.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TRIGGER refuse", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  study = client_->MustGetStudy(seed_study_);
  EXPECT_EQ(study.trial_count(), 3);
  EXPECT_EQ(client_->MustGetTrial(seed_trials_[1]).measurements_size(), 1);
  EXPECT_EQ(client_->MustSuggest(seed_study_, 1, "other-worker").trials(0).id(), 4);
}

// ---- Budgets in core-seconds, COST_AWARE --------------------------------------------------

TEST_F(StudyServiceTest, CreateStudyRejectsNegativeBudget) {
  v1::StudySpec spec = ValidSpec();
  spec.set_budget_core_seconds(-1);
  ExpectCreateStudyRejected(
      spec, "study.spec.budget_core_seconds: -1 must be a finite number >= 0 (0 = no budget)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNaNBudget) {
  v1::StudySpec spec = ValidSpec();
  spec.set_budget_core_seconds(kNaN);
  ExpectCreateStudyRejected(
      spec, "study.spec.budget_core_seconds: nan must be a finite number >= 0 (0 = no budget)");
}

TEST_F(StudyServiceTest, CreateStudyRejectsNegativeMaxStep) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_early_stopping()->set_max_step(-5);
  ExpectCreateStudyRejected(spec, "study.spec.early_stopping.max_step: -5 must be >= 1");
}

TEST_F(StudyServiceTest, CreateStudyRejectsCostAwareWithoutMaxStep) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_early_stopping()->set_policy(v1::EarlyStoppingSpec::COST_AWARE);
  ExpectCreateStudyRejected(
      spec, "study.spec.early_stopping.max_step: 0 must be >= 1: COST_AWARE needs the step of a full run");
}

TEST_F(StudyServiceTest, CreateStudyRejectsCostAwareWithoutASingleObjective) {
  v1::StudySpec spec = ValidSpec();
  spec.mutable_early_stopping()->set_policy(v1::EarlyStoppingSpec::COST_AWARE);
  spec.mutable_early_stopping()->set_max_step(10);
  v1::MetricSpec* second = spec.add_metrics();
  second->set_name("latency");
  second->set_goal(v1::MetricSpec::MINIMIZE);
  ExpectCreateStudyRejected(spec,
                            "study.spec.early_stopping.policy: COST_AWARE needs exactly one "
                            "objective metric (the study has 2)");
}

TEST_F(StudyServiceTest, AddTrialMeasurementRejectsElapsedSecondsGoingBackwards) {
  ASSERT_NO_FATAL_FAILURE(Seed());
  v1::Measurement later = Loss(0.6, 2);
  later.set_elapsed_seconds(30);
  ASSERT_THAT(client_->AddMeasurement(seed_trials_[1], later), GrpcOk());
  const std::string before = Dump();
  v1::Measurement earlier = Loss(0.5, 3);
  earlier.set_elapsed_seconds(12.5);
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[1], earlier),
              GrpcStatusIs(StatusCode::INVALID_ARGUMENT,
                           HasSubstr("measurement.elapsed_seconds: 12.5 goes backwards: the "
                                     "trial's measurement at step 2 has 30")));
  EXPECT_EQ(Dump(), before);
  // Not reported (0) is no claim about time, and an equal one does not go back.
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[1], Loss(0.5, 3)), GrpcOk());
  later.set_step(4);
  EXPECT_THAT(client_->AddMeasurement(seed_trials_[1], later), GrpcOk());
}

// A study of ValidSpec() with a budget, whose trials each hold `cores` cores.
v1::StudySpec BudgetSpec(double budget, double cores) {
  v1::StudySpec spec = ValidSpec();
  spec.set_budget_core_seconds(budget);
  spec.mutable_trial_template()->mutable_resources()->set_cpu_cores(cores);
  return spec;
}

v1::Measurement LossAt(double loss, int64_t step, double elapsed) {
  v1::Measurement m = Loss(loss, step);
  m.set_elapsed_seconds(elapsed);
  return m;
}

TEST_F(StudyServiceTest, StudyShowsSpentCoreSecondsAndStopsHandingOutTrialsOnceTheBudgetIsSpent) {
  const std::string study = client_->MustCreateStudy(BudgetSpec(100, 2)).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 2, "w");
  ASSERT_EQ(r.trials_size(), 2);
  // A trial costs its cores x its latest elapsed_seconds.
  ASSERT_THAT(client_->AddMeasurement(r.trials(0).name(), LossAt(0.5, 1, 10)), GrpcOk());
  ASSERT_THAT(client_->AddMeasurement(r.trials(0).name(), LossAt(0.4, 2, 20)), GrpcOk());
  v1::Study s = client_->MustGetStudy(study);
  EXPECT_DOUBLE_EQ(s.spent_core_seconds(), 40);
  EXPECT_DOUBLE_EQ(s.remaining_core_seconds(), 60);
  ASSERT_THAT(client_->AddMeasurement(r.trials(1).name(), LossAt(0.6, 1, 30)), GrpcOk());
  s = client_->MustGetStudy(study);
  EXPECT_DOUBLE_EQ(s.spent_core_seconds(), 100);
  EXPECT_DOUBLE_EQ(s.remaining_core_seconds(), 0);
  // Spent: no new trial, and once the asking client holds none the study completes.
  EXPECT_EQ(client_->MustSuggest(study, 1, "other").trials_size(), 0);
  EXPECT_EQ(client_->MustGetStudy(study).state(), v1::Study::COMPLETED);
  // The trials that were running when it ran out may finish (and spend a little more).
  ASSERT_THAT(client_->AddMeasurement(r.trials(1).name(), LossAt(0.3, 2, 35)), GrpcOk());
  client_->MustComplete(r.trials(1).name(), LossAt(0.3, 2, 35));
  EXPECT_DOUBLE_EQ(client_->MustGetStudy(study).spent_core_seconds(), 110);
}

TEST_F(StudyServiceTest, BudgetIsNeverOverspentByMoreThanTheTrialsRunningWhenItRanOut) {
  const double budget = 50;
  const std::string study = client_->MustCreateStudy(BudgetSpec(budget, 1)).name();
  // Four workers, whose trials report 2, 3, 4 and 5 steps of 3 s, round-robin until no one
  // gets a trial.
  struct Worker {
    std::string client;
    int64_t steps;
    std::string trial;
    int64_t step = 0;
  };
  std::vector<Worker> workers = {{"w0", 2}, {"w1", 3}, {"w2", 4}, {"w3", 5}};
  std::set<std::string> running_when_spent;
  int64_t started = 0;
  for (bool any = true; any;) {
    any = false;
    for (Worker& w : workers) {
      if (w.trial.empty()) {
        v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, w.client);
        if (r.trials_size() == 0) {
          if (running_when_spent.empty()) {
            for (const Worker& o : workers) {
              if (!o.trial.empty()) running_when_spent.insert(o.trial);
            }
          }
          continue;
        }
        w.trial = r.trials(0).name();
        w.step = 0;
        ++started;
      }
      any = true;
      ++w.step;
      ASSERT_THAT(client_->AddMeasurement(w.trial, LossAt(0.5, w.step, 3.0 * w.step)), GrpcOk());
      if (w.step == w.steps) {
        client_->MustComplete(w.trial, LossAt(0.5, w.step, 3.0 * w.step));
        w.trial.clear();
      }
    }
  }
  const v1::Study s = client_->MustGetStudy(study);
  EXPECT_EQ(s.state(), v1::Study::COMPLETED);
  ASSERT_FALSE(running_when_spent.empty());
  // Each trial costs at most 15; those running when it ran out finished (at most 15 each). It
  // ran out once what was left could not pay for the cheapest full run (w0's: 6).
  EXPECT_GT(s.spent_core_seconds(), budget - 6);
  EXPECT_LE(s.spent_core_seconds(), budget + 15.0 * static_cast<double>(running_when_spent.size()));
  EXPECT_EQ(s.trial_count(), started);
}

TEST_F(StudyServiceTest, TheBudgetIsSpentOnceWhatIsLeftCannotPayForTheCheapestFullRun) {
  const std::string study = client_->MustCreateStudy(BudgetSpec(100, 1)).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 2, "w");
  ASSERT_EQ(r.trials_size(), 2);
  client_->MustComplete(r.trials(0).name(), LossAt(0.5, 10, 30));  // a full run: 30
  ASSERT_THAT(client_->AddMeasurement(r.trials(1).name(), LossAt(0.6, 1, 40)), GrpcOk());
  EXPECT_EQ(client_->MustSuggest(study, 1, "other").trials_size(), 1);  // 30 left: enough
  ASSERT_THAT(client_->AddMeasurement(r.trials(1).name(), LossAt(0.6, 2, 41)), GrpcOk());
  // 29 left, less than the cheapest full run: no trial could finish.
  EXPECT_EQ(client_->MustSuggest(study, 1, "third").trials_size(), 0);
  const v1::Study s = client_->MustGetStudy(study);
  EXPECT_EQ(s.state(), v1::Study::COMPLETED);
  EXPECT_DOUBLE_EQ(s.remaining_core_seconds(), 29);
}

TEST_F(StudyServiceTest, RestartKeepsSpentCoreSecondsAndTheSpentBudget) {
  const std::string study = client_->MustCreateStudy(BudgetSpec(30, 3)).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, "w");
  ASSERT_EQ(r.trials_size(), 1);
  ASSERT_THAT(client_->AddMeasurement(r.trials(0).name(), LossAt(0.5, 1, 4)), GrpcOk());
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  EXPECT_DOUBLE_EQ(client_->MustGetStudy(study).spent_core_seconds(), 12);
  ASSERT_THAT(client_->AddMeasurement(r.trials(0).name(), LossAt(0.4, 2, 10)), GrpcOk());
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  const v1::Study s = client_->MustGetStudy(study);
  EXPECT_DOUBLE_EQ(s.spent_core_seconds(), 30);
  EXPECT_DOUBLE_EQ(s.remaining_core_seconds(), 0);
  EXPECT_EQ(client_->MustSuggest(study, 1, "other").trials_size(), 0);
}

// Ten finished runs whose loss at every step keeps their order, created as results from
// elsewhere, then one ACTIVE trial that reports a clearly worse loss at step 3.
v1::CheckTrialEarlyStoppingStateResponse CheckAfterRankedHistory(StudyClient& client,
                                                                  const std::string& study) {
  for (int i = 0; i < 10; ++i) {
    v1::Trial t = AdamTrial(0.1 * i, 1 + i);
    t.set_state(v1::Trial::SUCCEEDED);
    for (int step = 1; step <= 9; ++step) {
      *t.add_measurements() = LossAt(0.5 - 0.01 * i + 0.2 / step, step, step);
    }
    *t.mutable_final_measurement() = t.measurements(8);
    client.MustCreateTrial(study, t);
  }
  v1::SuggestTrialsResponse r = client.MustSuggest(study, 1, "w");
  EXPECT_EQ(r.trials_size(), 1);
  for (int step = 1; step <= 3; ++step) {
    EXPECT_THAT(client.AddMeasurement(r.trials(0).name(), LossAt(0.9, step, step)), GrpcOk());
  }
  v1::CheckTrialEarlyStoppingStateRequest req;
  req.set_trial_name(r.trials(0).name());
  v1::CheckTrialEarlyStoppingStateResponse resp;
  EXPECT_THAT(client.Call(&StudyClient::Stub::CheckTrialEarlyStoppingState, req, &resp), GrpcOk());
  return resp;
}

TEST_F(StudyServiceTest, RestartInABudgetedStudyKeepsItsDecisionsAndSpending) {
  v1::StudySpec spec = BudgetSpec(1e6, 1);
  spec.mutable_early_stopping()->set_max_step(9);
  const std::string study = client_->MustCreateStudy(spec).name();
  ASSERT_TRUE(CheckAfterRankedHistory(*client_, study).should_stop());
  // A second trial, as good as the best so far: it continues.
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, "w2");
  ASSERT_EQ(r.trials_size(), 1);
  const std::string good = r.trials(0).name();
  for (int step = 1; step <= 3; ++step) {
    ASSERT_THAT(client_->AddMeasurement(good, LossAt(0.3, step, step)), GrpcOk());
  }
  auto check = [&](const std::string& trial) {
    v1::CheckTrialEarlyStoppingStateRequest req;
    req.set_trial_name(trial);
    v1::CheckTrialEarlyStoppingStateResponse resp;
    EXPECT_THAT(client_->Call(&Stub::CheckTrialEarlyStoppingState, req, &resp), GrpcOk());
    return resp.should_stop();
  };
  EXPECT_FALSE(check(good));
  const v1::Study before = client_->MustGetStudy(study);
  ASSERT_NO_FATAL_FAILURE(RestartServer());
  const v1::Study after = client_->MustGetStudy(study);
  EXPECT_DOUBLE_EQ(after.spent_core_seconds(), before.spent_core_seconds());
  EXPECT_DOUBLE_EQ(after.remaining_core_seconds(), before.remaining_core_seconds());
  // The stopped trial is still STOPPING and told so; the good one still continues.
  EXPECT_EQ(client_->MustGetTrial(study + "/trials/11").state(), v1::Trial::STOPPING);
  EXPECT_TRUE(check(study + "/trials/11"));
  EXPECT_FALSE(check(good));
}

TEST_F(StudyServiceTest, ABudgetMakesCostAwareTheDefaultOnceMaxStepIsSet) {
  v1::StudySpec spec = BudgetSpec(1e6, 1);
  spec.mutable_early_stopping()->set_max_step(9);
  EXPECT_TRUE(CheckAfterRankedHistory(*client_, client_->MustCreateStudy(spec, "budget").name())
                  .should_stop());
  // The same history without a budget: no policy, no stop.
  spec.set_budget_core_seconds(0);
  EXPECT_FALSE(CheckAfterRankedHistory(*client_, client_->MustCreateStudy(spec, "none").name())
                   .should_stop());
}

TEST_F(StudyServiceTest, CreateTrialMakesAnActiveTrialForItsClient) {
  const std::string study = client_->MustCreateStudy(ValidSpec()).name();
  v1::Trial in = AdamTrial(0.25, 4);
  in.set_state(v1::Trial::ACTIVE);
  in.set_client_id("optuna-7");
  const v1::Trial t = client_->MustCreateTrial(study, in);
  EXPECT_EQ(t.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(t.client_id(), "optuna-7");
  EXPECT_TRUE(t.has_start_time());
  // It is the client's: a retry of its SuggestTrials hands it back; another client's does not.
  EXPECT_THAT(Ids(client_->MustSuggest(study, 1, "optuna-7").trials()), ElementsAre(t.id()));
  EXPECT_THAT(Ids(client_->MustSuggest(study, 1, "other").trials()), Not(ElementsAre(t.id())));
  ASSERT_THAT(client_->AddMeasurement(t.name(), Loss(0.3, 1)), GrpcOk());
  EXPECT_EQ(client_->MustComplete(t.name(), Loss(0.2)).state(), v1::Trial::SUCCEEDED);
}

TEST_F(StudyServiceTest, CreateTrialRejectsAnActiveTrialWithoutClientOrWithAFinalMeasurement) {
  v1::Trial no_client = AdamTrial(0.25, 4);
  no_client.set_state(v1::Trial::ACTIVE);
  ExpectCreateTrialRejected(no_client, "trial.client_id: an ACTIVE trial needs the client running it");
  v1::Trial with_final = no_client;
  with_final.set_client_id("c");
  *with_final.mutable_final_measurement() = Loss(0.1);
  ExpectCreateTrialRejected(with_final,
                            "trial.final_measurement: an ACTIVE trial is still running; it has none");
}

TEST_F(StudyServiceTest, CreateTrialRefusesAnActiveTrialOnceTheBudgetIsSpent) {
  const std::string study = client_->MustCreateStudy(BudgetSpec(10, 1)).name();
  v1::SuggestTrialsResponse r = client_->MustSuggest(study, 1, "w");
  ASSERT_THAT(client_->AddMeasurement(r.trials(0).name(), LossAt(0.5, 1, 10)), GrpcOk());
  const std::string before = Dump();
  v1::CreateTrialRequest req;
  req.set_parent(study);
  *req.mutable_trial() = AdamTrial(0.5, 2);
  req.mutable_trial()->set_state(v1::Trial::ACTIVE);
  req.mutable_trial()->set_client_id("late");
  v1::Trial resp;
  EXPECT_THAT(client_->Call(&Stub::CreateTrial, req, &resp),
              GrpcStatusIs(StatusCode::FAILED_PRECONDITION,
                           HasSubstr("has spent its budget_core_seconds=10")));
  EXPECT_EQ(Dump(), before);
}

}  // namespace
}  // namespace evoscale::service
