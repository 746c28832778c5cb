// End-to-end tests of the real evoscale-trainer binary as a child process: flags, exit codes,
// and crash recovery (kill -9 mid-training, then --resume).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace {

const std::string kTrainer = std::string(EVOSCALE_BIN_DIR) + "/evoscale-trainer";

struct ChildResult {
  std::vector<std::string> lines;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
};

// Runs the trainer with args; calls stop(line) on each stdout line and sends SIGKILL the first
// time it returns true.
ChildResult RunTrainer(const std::vector<std::string>& args,
                       const std::function<bool(const std::string&)>& stop = nullptr) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv = {const_cast<char*>(kTrainer.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kTrainer.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  ChildResult result;
  FILE* out = fdopen(fds[0], "r");
  char buffer[1 << 16];
  bool killed = false;
  while (std::fgets(buffer, sizeof(buffer), out) != nullptr) {
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    result.lines.push_back(line);
    if (!killed && stop && stop(line)) {
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  fclose(out);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

double Number(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":([-0-9.e+]+)"))) return -1;
  double v = -1;
  absl::SimpleAtod(m[1].str(), &v);
  return v;
}

class TrainerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTrainer)) GTEST_SKIP() << kTrainer << " not built";
    dir_ =
        (std::filesystem::temp_directory_path() / absl::StrCat("trainer_process_test_", getpid()))
            .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TrainerProcessTest, KillNineThenResumeEndsWithTheUninterruptedAuc) {
  const std::vector<std::string> common = {"--synthetic",
                                           "40000",
                                           "--batch-size",
                                           "128",
                                           "--embedding-dim",
                                           "8",
                                           "--hidden",
                                           "32,16",
                                           "--threads",
                                           "2",
                                           "--shards",
                                           "3",
                                           "--seed",
                                           "5",
                                           "--progress-every",
                                           "50",
                                           "--checkpoint-every",
                                           "20",
                                           "--full-checkpoint-every",
                                           "3"};
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--checkpoint-dir", dir_ + "/plain"});
  ChildResult plain = RunTrainer(args);
  ASSERT_EQ(plain.exit_code, 0);
  const double plain_auc = Number(plain.lines.back(), "auc");
  ASSERT_GT(plain_auc, 0.55) << plain.lines.back();

  args = common;
  args.insert(args.end(), {"--checkpoint-dir", dir_ + "/crash"});
  // Kill at the fifth checkpoint (step 100 of 282): two deltas on top of a full one, and the
  // worker threads are already into the next steps.
  int checkpoints = 0;
  ChildResult crashed = RunTrainer(args, [&](const std::string& line) {
    return line.find("\"event\":\"checkpoint\"") != std::string::npos && ++checkpoints == 5;
  });
  ASSERT_EQ(crashed.signal, SIGKILL);
  ASSERT_EQ(crashed.lines.back().find("\"event\":\"final\""), std::string::npos);

  args.push_back("--resume");
  ChildResult resumed = RunTrainer(args);
  ASSERT_EQ(resumed.exit_code, 0) << (resumed.lines.empty() ? "" : resumed.lines.back());
  const std::string& final_line = resumed.lines.back();
  ASSERT_NE(final_line.find("\"event\":\"final\""), std::string::npos) << final_line;
  // It continued from a checkpoint (not from scratch) and saw exactly the same examples.
  ASSERT_FALSE(resumed.lines.empty());
  EXPECT_GE(Number(resumed.lines.front(), "step"), 100) << resumed.lines.front();
  EXPECT_EQ(Number(final_line, "examples"), Number(plain.lines.back(), "examples"));
  EXPECT_EQ(Number(final_line, "rows"), Number(plain.lines.back(), "rows"));
  EXPECT_NEAR(Number(final_line, "auc"), plain_auc, 0.002);
  EXPECT_NEAR(Number(final_line, "logloss"), Number(plain.lines.back(), "logloss"), 0.002);
}

TEST_F(TrainerProcessTest, BadFlagsExitWithUsageAndAnErrorEvent) {
  ChildResult bad = RunTrainer({"--synthetic", "10", "--batch-size", "x"});
  EXPECT_EQ(bad.exit_code, 2);
  ASSERT_EQ(bad.lines.size(), 1u);
  EXPECT_NE(bad.lines[0].find("flag --batch-size: \\\"x\\\" is not an integer"), std::string::npos)
      << bad.lines[0];
  ChildResult missing = RunTrainer({"--train", "/nonexistent.tsv"});
  EXPECT_EQ(missing.exit_code, 1);
  ASSERT_EQ(missing.lines.size(), 1u);
  EXPECT_NE(missing.lines[0].find("NOT_FOUND"), std::string::npos) << missing.lines[0];
}

TEST_F(TrainerProcessTest, ResumeWithADifferentShapeIsRefused) {
  ChildResult first = RunTrainer({"--synthetic", "3000", "--batch-size", "256", "--hidden", "8",
                                  "--checkpoint-dir", dir_, "--checkpoint-every", "5"});
  ASSERT_EQ(first.exit_code, 0);
  ChildResult second = RunTrainer({"--synthetic", "3000", "--batch-size", "256", "--hidden", "8",
                                   "--embedding-dim", "4", "--checkpoint-dir", dir_, "--resume"});
  EXPECT_EQ(second.exit_code, 1);
  ASSERT_FALSE(second.lines.empty());
  EXPECT_NE(second.lines.back().find("FAILED_PRECONDITION"), std::string::npos);
  EXPECT_NE(second.lines.back().find("embedding-dim 16 but this run has 4"), std::string::npos)
      << second.lines.back();
}

}  // namespace
