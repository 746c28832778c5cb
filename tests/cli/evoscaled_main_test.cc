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

using ::evoscale::testing::BinDir;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::ExitedProcess;
using ::evoscale::testing::TempDir;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// evoscaled as a child process whose stdout the test reads line by line. Killed (SIGKILL)
// and reaped by the destructor if still running.
class Evoscaled {
 public:
  static absl::StatusOr<std::unique_ptr<Evoscaled>> Start(const std::vector<std::string>& flags) {
    int out[2];
    if (pipe(out) != 0) return absl::InternalError("pipe");
    std::vector<std::string> args = {BinDir() + "/evoscaled"};
    args.insert(args.end(), flags.begin(), flags.end());
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    return std::unique_ptr<Evoscaled>(new Evoscaled(pid, out[0]));
  }

  ~Evoscaled() {
    if (pid_ > 0) Stop(SIGKILL);
    close(fd_);
  }

  // The next line of its stdout, without the newline, waiting up to `timeout`. NotFound when
  // stdout ends first.
  absl::StatusOr<std::string> ReadLine(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (size_t newline = buffer_.find('\n'); newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return absl::DeadlineExceededError("no line from evoscaled");
      pollfd readable{fd_, POLLIN, 0};
      if (poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[512];
      const ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n <= 0) return absl::NotFoundError(absl::StrCat("stdout ended after: ", buffer_));
      buffer_.append(chunk, n);
    }
  }

  // Sends `signal` and reaps the process; returns its wait status.
  int Stop(int signal) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  Evoscaled(pid_t pid, int fd) : pid_(pid), fd_(fd) {}

  pid_t pid_;
  const int fd_;        // the read end of its stdout
  std::string buffer_;  // read from fd_, not yet returned by ReadLine()
};

constexpr std::chrono::seconds kTimeout(30);

TEST(EvoscaledFlagsTest, ListeningLineIsJsonForADatabasePathWithQuotesAndBackslashes) {
  TempDir dir;
  const std::string db = dir.path() + "/we\"ird\\ name's.db";
  // Both flag forms, and every flag that does not need a token file.
  absl::StatusOr<std::unique_ptr<Evoscaled>> evoscaled =
      Evoscaled::Start({"--db=" + db, "--grpc", "127.0.0.1:0", "--http=127.0.0.1:0", "--durability",
                        "power", "--max-running-trials=0", "--gpus", "1"});
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
      {{"--db"}, "evoscaled: --db: 1 required PATH missing (see evoscaled --help)\n"},
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

}  // namespace
}  // namespace evoscale
