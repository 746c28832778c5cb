// TLS on evoscaled's gRPC and HTTP listeners, with certificates made by the openssl command
// for each test suite (a CA, a server certificate for 127.0.0.1 and localhost, a client
// certificate, and a second CA that signed nothing of ours): the real evoscaled, real gRPC
// clients, the real CLI and curl.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_support.h"

namespace evoscale {
namespace {


using ::evoscale::testing::BinDir;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::ReadFile;
using ::evoscale::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; its exit status (-1 when it did not exit).
int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string d = certs_->path();
    const std::string script = absl::StrCat(
        "set -e; cd ", Quote(d), "\n",
        "ca() { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj \"/CN=$1\" "
        "-keyout $1.key -out $1.pem 2>/dev/null; }\n",
        "ca ca; ca other-ca\n",
        "leaf() { openssl req -newkey rsa:2048 -nodes -subj \"/CN=$1\" -keyout $1.key -out $1.csr "
        "2>/dev/null; printf '%s\\n' \"$2\" > $1.ext; openssl x509 -req -in $1.csr -CA ca.pem "
        "-CAkey ca.key -CAcreateserial -days 2 -extfile $1.ext -out $1.pem 2>/dev/null; }\n",
        "leaf server 'subjectAltName=IP:127.0.0.1,DNS:localhost'\n",
        "leaf client 'extendedKeyUsage=clientAuth'\n",
        "echo not a certificate > junk.pem\n");
    ASSERT_EQ(Shell(script), 0) << "openssl could not make the test certificates";
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  static std::string Cert(const std::string& name) { return certs_->path() + "/" + name; }

  void StartServer(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--tls-cert", Cert("server.pem"), "--tls-key",
                                     Cert("server.key")};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = EvoscaledProcess::Start(dir_.path() + "/evoscale.db", args);
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
  }

  // ListStudies over a channel with `credentials`.
  grpc::Status ListStudies(const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto stub = v1::StudyService::NewStub(
        grpc::CreateChannel(server_->grpc_address(), credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListStudiesRequest req;
    v1::ListStudiesResponse resp;
    return stub->ListStudies(&context, req, &resp);
  }

  static std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca,
                                                       bool with_client_cert = false) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(Cert(ca));
    if (with_client_cert) {
      ssl.pem_cert_chain = ReadFile(Cert("client.pem"));
      ssl.pem_private_key = ReadFile(Cert("client.key"));
    }
    return grpc::SslCredentials(ssl);
  }

  // `evoscale ARGS... study list` against the server: the exit status.
  int Cli(const std::vector<std::string>& args) {
    std::string cmd = absl::StrCat(Quote(BinDir() + "/evoscale"), " --server ",
                                   server_->grpc_address(), " --timeout 10");
    for (const std::string& a : args) absl::StrAppend(&cmd, " ", Quote(a));
    absl::StrAppend(&cmd, " study list >/dev/null 2>", Quote(dir_.path() + "/cli.err"));
    return Shell(cmd);
  }

  // curl ARGS... https://HTTP/healthz: its exit status (0 when evoscaled answered "ok").
  int Curl(const std::vector<std::string>& args, const std::string& scheme = "https") {
    std::string cmd = "curl -sS --fail --max-time 10";
    for (const std::string& a : args) absl::StrAppend(&cmd, " ", Quote(a));
    const std::string out = dir_.path() + "/curl.out";
    absl::StrAppend(&cmd, " ", scheme, "://", server_->http_address(), "/healthz >", Quote(out),
                    " 2>/dev/null");
    const int code = Shell(cmd);
    if (code == 0) {
      EXPECT_EQ(ReadFile(out), "ok\n");
    }
    return code;
  }

  static TempDir* certs_;
  TempDir dir_;
  std::unique_ptr<EvoscaledProcess> server_;
};

TempDir* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, ClientsNeedTheCaThatSignedTheServersCertificate) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_TRUE(ListStudies(Tls("ca.pem")).ok());
  const grpc::Status wrong_ca = ListStudies(Tls("other-ca.pem"));
  EXPECT_EQ(wrong_ca.error_code(), grpc::StatusCode::UNAVAILABLE) << wrong_ca.error_message();
  EXPECT_EQ(ListStudies(grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The CLI: --tls-ca (or $EVOSCALE_TLS_CA) connects; without it, or with another CA, it fails.
  EXPECT_EQ(Cli({"--tls-ca", Cert("ca.pem")}), 0) << ReadFile(dir_.path() + "/cli.err");
  EXPECT_EQ(Cli({"--tls-ca", Cert("other-ca.pem")}), 1);
  EXPECT_EQ(Cli({}), 1);
  EXPECT_EQ(Cli({"--tls-ca", Cert("junk.pem")}), 2);
  EXPECT_THAT(ReadFile(dir_.path() + "/cli.err"), HasSubstr("--tls-ca"));
  // HTTPS on the HTTP listener, with the same certificate.
  EXPECT_EQ(Curl({"--cacert", Cert("ca.pem")}), 0);
  EXPECT_NE(Curl({"--cacert", Cert("other-ca.pem")}), 0);
  EXPECT_NE(Curl({}, "http"), 0);
}

TEST_F(TlsTest, MutualTlsRefusesAClientWithoutACertificate) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--tls-client-ca", Cert("ca.pem")}));
  EXPECT_NE(ListStudies(Tls("ca.pem")).error_code(), grpc::StatusCode::OK);
  EXPECT_TRUE(ListStudies(Tls("ca.pem", /*with_client_cert=*/true)).ok());
  EXPECT_EQ(Cli({"--tls-ca", Cert("ca.pem")}), 1);
  EXPECT_EQ(Cli({"--tls-ca", Cert("ca.pem"), "--tls-cert", Cert("client.pem"), "--tls-key",
                 Cert("client.key")}),
            0)
      << ReadFile(dir_.path() + "/cli.err");
  EXPECT_NE(Curl({"--cacert", Cert("ca.pem")}), 0);
  EXPECT_EQ(Curl({"--cacert", Cert("ca.pem"), "--cert", Cert("client.pem"), "--key",
                  Cert("client.key")}),
            0);
}

TEST_F(TlsTest, TokensBeyondLoopbackNeedTlsOrInsecurePlaintext) {
  const std::string tokens = dir_.path() + "/tokens";
  std::ofstream(tokens) << "admin-0123456789abcdef admin\n";
  const std::vector<std::string> beyond = {"--db",   dir_.path() + "/x.db", "--grpc",
                                           "0.0.0.0:0", "--http",        "127.0.0.1:0",
                                           "--auth-tokens", tokens};
  testing::ExitedProcess refused = EvoscaledProcess::RunToExit(beyond);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("--grpc \"0.0.0.0:0\" is not a loopback address and "
                                        "there is no TLS"));
  EXPECT_THAT(refused.output, HasSubstr("--tls-cert and --tls-key"));

  // With TLS it serves; with --insecure-plaintext too, saying so loudly.
  for (const bool tls : {true, false}) {
    std::vector<std::string> args = beyond;
    if (tls) {
      args.insert(args.end(), {"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key")});
    } else {
      args.push_back("--insecure-plaintext");
    }
    auto p = EvoscaledProcess::Spawn(args, /*merge_stderr=*/true);
    ASSERT_TRUE(p.ok()) << p.status();
    std::string seen;
    for (int i = 0; i < 5 && seen.find("\"listening\"") == std::string::npos; ++i) {
      absl::StatusOr<std::string> line = (*p)->ReadLine(std::chrono::seconds(30));
      if (!line.ok()) break;
      seen += *line + "\n";
    }
    EXPECT_THAT(seen, HasSubstr("\"listening\"")) << seen;
    if (tls) {
      EXPECT_THAT(seen, Not(HasSubstr("INSECURE")));
    } else {
      EXPECT_THAT(seen, HasSubstr("INSECURE: --grpc 0.0.0.0:0 serves tokens and data in plaintext"));
    }
  }
}

TEST_F(TlsTest, BadTlsFlagsRefuseToStartNamingTheFlag) {
  const std::string db = dir_.path() + "/x.db";
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tls-cert", Cert("server.pem")}, "--tls-cert and --tls-key go together"},
      {{"--tls-cert", Cert("junk.pem"), "--tls-key", Cert("server.key")},
       "--tls-cert \"" + Cert("junk.pem") + "\": not a PEM file"},
      {{"--tls-cert", Cert("server.pem"), "--tls-key", dir_.path() + "/absent.key"},
       "--tls-key: \"" + dir_.path() + "/absent.key\": No such file"},
      {{"--tls-client-ca", Cert("ca.pem")}, "--tls-client-ca (mutual TLS) needs --tls-cert"},
      {{"--tls-cert", Cert("server.pem"), "--tls-key", Cert("client.key")},
       "--tls-key \"" + Cert("client.key") + "\" is not the key of --tls-cert"},
      {{"--tls-peer-ca", Cert("ca.pem")},
       "--tls-peer-ca: the replicas talk plaintext without --tls-cert and --tls-key"},
      {{"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key"), "--tls-peer-ca",
        Cert("junk.pem")},
       "--tls-peer-ca \"" + Cert("junk.pem") + "\": not a PEM file"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--db", db, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    testing::ExitedProcess p = EvoscaledProcess::RunToExit(args);
    EXPECT_EQ(p.exit_code, 2) << p.output;
    EXPECT_THAT(p.output, HasSubstr(c.message));
  }
}

// Two replicas on one PostgreSQL database, both serving mutual TLS (issue 30): with
// --tls-peer-ca, a call on a study the other replica owns is forwarded to it over TLS (this
// replica's certificate as the client's); a replica without it answers UNAVAILABLE naming the
// owner's address.
TEST_F(TlsTest, ReplicasForwardOverTlsGivenTheirPeersCa) {
  if (std::string why = PostgresServer::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  absl::StatusOr<std::string> uri = (*pg)->CreateDatabase("evoscale");
  ASSERT_TRUE(uri.ok()) << uri.status();
  auto start = [&](bool peer_ca) {
    std::vector<std::string> args = {"--tls-cert", Cert("server.pem"), "--tls-key",
                                     Cert("server.key"), "--tls-client-ca", Cert("ca.pem")};
    if (peer_ca) args.insert(args.end(), {"--tls-peer-ca", Cert("ca.pem")});
    absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p = EvoscaledProcess::Start(*uri, args);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  };
  std::unique_ptr<EvoscaledProcess> owner = start(true), peer = start(true), other = start(false);
  ASSERT_TRUE(owner && peer && other);
  auto stub = [&](EvoscaledProcess& replica) {
    return v1::StudyService::NewStub(
        grpc::CreateChannel(replica.grpc_address(), Tls("ca.pem", /*with_client_cert=*/true)));
  };
  auto deadline = [](grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  };
  v1::CreateStudyRequest create;
  create.mutable_study()->set_display_name("tls-replicas");
  v1::StudySpec* spec = create.mutable_study()->mutable_spec();
  spec->add_metrics()->set_name("loss");
  spec->mutable_metrics(0)->set_goal(v1::MetricSpec::MINIMIZE);
  spec->add_parameters()->set_name("x");
  spec->mutable_parameters(0)->mutable_double_spec()->set_min(0);
  spec->mutable_parameters(0)->mutable_double_spec()->set_max(1);
  spec->mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  v1::Study study;
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    grpc::Status st = stub(*owner)->CreateStudy(&ctx, create, &study);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  v1::SuggestTrialsRequest suggest;
  suggest.set_parent(study.name());
  suggest.set_client_id("worker");
  suggest.set_suggestion_count(1);
  v1::SuggestTrialsResponse through_peer;
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    grpc::Status st = stub(*peer)->SuggestTrials(&ctx, suggest, &through_peer);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(through_peer.trials_size(), 1);
  }
  {
    // The owner handed it out (the client's id means the same there): forwarded, not taken.
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::SuggestTrialsResponse at_owner;
    ASSERT_TRUE(stub(*owner)->SuggestTrials(&ctx, suggest, &at_owner).ok());
    ASSERT_EQ(at_owner.trials_size(), 1);
    EXPECT_EQ(at_owner.trials(0).name(), through_peer.trials(0).name());
  }
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    v1::SuggestTrialsResponse resp;
    grpc::Status st = stub(*other)->SuggestTrials(&ctx, suggest, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(owner->grpc_address())) << st.error_message();
  }
  owner.reset();
  peer.reset();
  other.reset();  // before their database
}

}  // namespace
}  // namespace evoscale
