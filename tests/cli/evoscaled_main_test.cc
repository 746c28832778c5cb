// Tests of evoscaled's command line (service/evoscaled_main.cc): its flags, its errors and
// the JSON lines it prints, on the real binary started as a child process.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/evoscaled_process.h"

namespace evoscale {
namespace {

using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::ExitedProcess;
using ::evoscale::testing::TempDir;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::chrono::seconds kTimeout(30);

TEST(EvoscaledFlagsTest, ListeningLineIsJsonForADatabasePathWithQuotesAndBackslashes) {
  TempDir dir;
  const std::string db = dir.path() + "/we\"ird\\ name's.db";
  // Both flag forms, and every flag that does not need a token file.
  absl::StatusOr<std::unique_ptr<EvoscaledProcess>> evoscaled =
      EvoscaledProcess::Spawn({"--db=" + db, "--grpc", "127.0.0.1:0", "--http=127.0.0.1:0",
                               "--durability", "power", "--max-running-trials=0", "--gpus", "1"});
  ASSERT_TRUE(evoscaled.ok()) << evoscaled.status();

  absl::StatusOr<std::string> line = (*evoscaled)->ReadLine(kTimeout);
  ASSERT_TRUE(line.ok()) << line.status();
  const nlohmann::json listening = nlohmann::json::parse(*line, nullptr, false);
  ASSERT_TRUE(listening.is_object()) << *line;
  EXPECT_EQ(listening.size(), 4u) << *line;
  EXPECT_EQ(listening.value("event", ""), "listening");
  EXPECT_THAT(listening.value("grpc", ""), ContainsRegex("^127\\.0\\.0\\.1:[1-9][0-9]*$"));
  EXPECT_THAT(listening.value("http", ""), ContainsRegex("^127\\.0\\.0\\.1:[1-9][0-9]*$"));
  EXPECT_EQ(listening.value("db", ""), db);
  // The keys in the documented order.
  EXPECT_THAT(*line, ContainsRegex("^\\{\"event\":\"listening\",\"grpc\":\"[^\"]*\","
                                   "\"http\":\"[^\"]*\",\"db\":"));
  EXPECT_EQ(access(db.c_str(), F_OK), 0) << "no database at " << db;

  const int status = (*evoscaled)->Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  line = (*evoscaled)->ReadLine(kTimeout);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, R"({"event":"stopped"})");
}

TEST(EvoscaledFlagsTest, HelpListsEveryFlagAndExits0) {
  for (const char* help : {"-h", "--help"}) {
    ExitedProcess run = EvoscaledProcess::RunToExit({help});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    for (const char* flag :
         {"--db PATH", "--grpc HOST:PORT", "--http HOST:PORT", "--auth-tokens FILE",
          "--durability process|power", "--max-running-trials N", "--gpus N",
          "--capacity cpu=N,memory=SIZE,gpus=N"}) {
      EXPECT_THAT(run.output, HasSubstr(flag)) << help;
    }
  }
}

TEST(EvoscaledFlagsTest, BadFlagExits2NamingIt) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const Case cases[] = {
      {{"--durability", "disk"},
       "evoscaled: --durability: disk not in {process,power} (see evoscaled --help)\n"},
      {{"--gpus=-1"},
       "evoscaled: --gpus: Value -1 not in range 0 to 100000 (see evoscaled --help)\n"},
      {{"--max-running-trials", "many"},
       "evoscaled: --max-running-trials: Value many not in range 0 to 100000 (see evoscaled "
       "--help)\n"},
      {{"--bogus", "1"}, "evoscaled: unknown flag --bogus (see evoscaled --help)\n"},
      {{"serve"}, "evoscaled: unexpected argument serve (see evoscaled --help)\n"},
      {{"--db"}, "evoscaled: --db: 1 required PATH|URI missing (see evoscaled --help)\n"},
      {{"--capacity", "cpu=0"},
       "evoscaled: --capacity cpu: \"0\" is not a number of cores > 0 (see evoscaled --help)\n"},
      {{"--capacity=memory=12Qi"},
       "evoscaled: --capacity memory: \"12Qi\" is not a size > 0 such as 16Gi or 2000000000 "
       "(see evoscaled --help)\n"},
      {{"--capacity", "disk=1"},
       "evoscaled: --capacity: unknown key \"disk\" (want cpu=N, memory=SIZE, gpus=N) (see "
       "evoscaled --help)\n"},
  };
  for (const Case& c : cases) {
    ExitedProcess run = EvoscaledProcess::RunToExit(c.flags);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_EQ(run.output, c.message);
    EXPECT_THAT(run.output, Not(HasSubstr("listening")));
  }
}

// A PostgreSQL --db that cannot be served is refused before anything listens: the URI shows a
// password (which must come from ~/.pgpass or PGPASSWORD, never the command line), or nothing
// answers at the address (with telemetry in that database too, or in a file of its own).
TEST(EvoscaledFlagsTest, APostgresqlDatabaseItCannotServeIsRefusedNamingWhy) {
  const std::string telemetry = ::testing::TempDir() + "evoscaled_main_test.telemetry.db";
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const Case cases[] = {
      {{"--db", "postgresql://evoscale@127.0.0.1:1/evoscale"},
       "database \"postgresql://evoscale@127.0.0.1:1/evoscale\": cannot connect"},
      {{"--db", "postgresql://evoscale:hunter2@127.0.0.1:1/evoscale", "--telemetry-db", telemetry},
       "the URI holds a password, which would show in the process list: remove it and put it in "
       "~/.pgpass or PGPASSWORD"},
      {{"--db", "postgresql://evoscale@127.0.0.1:1/evoscale", "--telemetry-db", telemetry},
       "database \"postgresql://evoscale@127.0.0.1:1/evoscale\": cannot connect"},
  };
  for (const Case& c : cases) {
    ExitedProcess run = EvoscaledProcess::RunToExit(c.flags);
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_THAT(run.output, HasSubstr(c.message));
    EXPECT_THAT(run.output, Not(HasSubstr("hunter2")));
    EXPECT_THAT(run.output, Not(HasSubstr("listening")));
  }
}

}  // namespace
}  // namespace evoscale
