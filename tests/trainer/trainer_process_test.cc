// End-to-end tests of the real evoscale-trainer binary as a child process: flags, exit codes,
// and crash recovery (kill -9 mid-training, then --resume); and jobs of several processes
// under Debian's Open MPI (`mpirun -np 2`, as root with --allow-run-as-root, --oversubscribe
// on 2 cores): the same model as one process, half the table each, a dead rank ending the job,
// resuming from the ranks' checkpoints.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/gpu.h"

namespace {

const std::string kTrainer = std::string(EVOSCALE_BIN_DIR) + "/evoscale-trainer";

struct ChildResult {
  std::vector<std::string> lines;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
};

// Runs the trainer with args (under `launcher`, e.g. mpirun, when given); calls stop(line) on
// each stdout line and, the first time it returns true, kill(pid) (default: SIGKILL the child).
ChildResult RunTrainer(const std::vector<std::string>& args,
                       const std::function<bool(const std::string&)>& stop = nullptr,
                       const std::vector<std::string>& launcher = {},
                       const std::function<void(pid_t)>& kill_fn = nullptr,
                       std::string* stderr_text = nullptr) {
  int errs[2];
  EXPECT_EQ(pipe(errs), 0);
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    if (stderr_text != nullptr) dup2(errs[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    close(errs[0]);
    close(errs[1]);
    std::vector<char*> argv;
    for (const auto& a : launcher) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(const_cast<char*>(kTrainer.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  close(errs[1]);
  // stderr drains on its own thread, so a chatty child never blocks on a full pipe.
  std::thread drain([&] {
    char chunk[4096];
    ssize_t n;
    while ((n = read(errs[0], chunk, sizeof(chunk))) > 0) {
      if (stderr_text != nullptr) stderr_text->append(chunk, size_t(n));
    }
    close(errs[0]);
  });
  ChildResult result;
  FILE* out = fdopen(fds[0], "r");
  char buffer[1 << 16];
  bool killed = false;
  while (std::fgets(buffer, sizeof(buffer), out) != nullptr) {
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    result.lines.push_back(line);
    if (!killed && stop && stop(line)) {
      if (kill_fn) {
        kill_fn(pid);
      } else {
        kill(pid, SIGKILL);
      }
      killed = true;
    }
  }
  fclose(out);
  int status = 0;
  waitpid(pid, &status, 0);
  drain.join();
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

// --stream on a file follows it past its end (tail -f): rows appended after the start are
// trained on, and SIGTERM ends the stream cleanly at the end of its step: one final line and a
// checkpoint whose position is where --resume goes on (the partial batch after it included).
TEST_F(TrainerProcessTest, AStreamFollowsItsFileUntilSigterm) {
  const std::string data = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";
  if (!std::filesystem::exists(data + "train.tsv")) GTEST_SKIP() << "no " << data;
  std::filesystem::create_directories(dir_);
  std::ifstream in(data + "train.tsv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::string file = dir_ + "/stream.tsv";
  {
    std::ofstream first(file);
    for (size_t i = 0; i < 3000; ++i) first << lines[i] << "\n";
  }
  bool appended = false;
  ChildResult r = RunTrainer(
      {"--stream", "--train", file, "--batch-size", "256", "--progress-every", "1",
       "--checkpoint-dir", dir_ + "/ckpt"},
      [&](const std::string& line) {
        const double examples = Number(line, "examples");
        if (!appended && examples >= 2816) {  // 11 full batches of the first 3,000 rows
          std::ofstream more(file, std::ios::app);
          for (size_t i = 3000; i < lines.size(); ++i) more << lines[i] << "\n";
          appended = true;
        }
        return appended && examples >= 7168;  // every full batch of the 7,200
      },
      {}, [](pid_t pid) { kill(pid, SIGTERM); });
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_FALSE(r.lines.empty());
  const std::string& last = r.lines.back();
  EXPECT_NE(last.find("\"event\":\"final\""), std::string::npos) << last;
  EXPECT_EQ(Number(last, "examples"), 7168) << last;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt/ckpt-000000000028/MANIFEST"));
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

// ---- Jobs of several processes (mpirun) ------------------------------------------------------

const char kMpirun[] = "/usr/bin/mpirun";

std::vector<std::string> Mpirun(int np) {
  return {kMpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
          std::to_string(np)};
}

// The pid of rank `rank` among the children of mpirun `launcher` (its OMPI_COMM_WORLD_RANK).
pid_t RankPid(pid_t launcher, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(text.c_str() + close_paren + 1, " %c %d", &state, &ppid) != 2 ||
        ppid != launcher) {
      continue;
    }
    std::ifstream environ(entry.path() / "environ");
    std::string env((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    if (env.find(absl::StrCat(std::string(1, '\0'), "OMPI_COMM_WORLD_RANK=", rank, std::string(1, '\0'))) !=
        std::string::npos) {
      return pid;
    }
  }
  return 0;
}

int Count(const std::vector<std::string>& lines, const std::string& text) {
  int n = 0;
  for (const std::string& line : lines) n += line.find(text) != std::string::npos;
  return n;
}

// A GPU job's ranks from the environment (EVOSCALE_WORLD_SIZE, EVOSCALE_RANK,
// EVOSCALE_RENDEZVOUS_FILE), set in this process for the children it starts, and unset after.
class EnvironmentRanksTest : public TrainerProcessTest {
 protected:
  void SetRank(int rank) {
    setenv("EVOSCALE_WORLD_SIZE", "2", 1);
    setenv("EVOSCALE_RANK", std::to_string(rank).c_str(), 1);
    setenv("EVOSCALE_RENDEZVOUS_FILE", (dir_ + "/rendezvous").c_str(), 1);
  }
  void TearDown() override {
    for (const char* name : {"EVOSCALE_WORLD_SIZE", "EVOSCALE_RANK", "EVOSCALE_RENDEZVOUS_FILE"}) {
      unsetenv(name);
    }
    TrainerProcessTest::TearDown();
  }
};

TEST_F(EnvironmentRanksTest, OnTheCpuTheyAreRefusedWithTheWayToStartRanks) {
  SetRank(0);
  ChildResult r = RunTrainer({"--synthetic", "1000"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_NE(r.lines[0].find("\"code\":\"INVALID_ARGUMENT\""), std::string::npos) << r.lines[0];
  EXPECT_NE(r.lines[0].find("EVOSCALE_WORLD_SIZE=2 starts a job of GPUs (--device cuda); on the "
                            "CPU start the ranks with mpirun -np N"),
            std::string::npos)
      << r.lines[0];
}

// Without a GPU every rank of a GPU job ends at once with the reason, rank 0 on stdout and the
// others on stderr, and none waits for the rendezvous.
TEST_F(EnvironmentRanksTest, OnAMachineWithoutAGpuEveryRankEndsWithTheReason) {
  absl::StatusOr<int> devices = evoscale::trainer::CudaDeviceCount();
  if (devices.ok() && *devices > 0) GTEST_SKIP() << "a GPU is here: gpu_check.sh runs the job";
  std::filesystem::create_directories(dir_);
  const std::string reason = evoscale::trainer::BuiltWithCuda() ? "no CUDA device"
                                                                : "built without CUDA";
  const auto start = std::chrono::steady_clock::now();
  SetRank(1);
  std::string err;
  ChildResult one = RunTrainer({"--synthetic", "1000", "--device", "cuda"}, nullptr, {}, nullptr,
                               &err);
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_TRUE(one.lines.empty());  // only rank 0 speaks the protocol
  EXPECT_NE(err.find("rank 1: --device cuda: " + reason), std::string::npos) << err;
  SetRank(0);
  ChildResult zero = RunTrainer({"--synthetic", "1000", "--device", "cuda"});
  EXPECT_EQ(zero.exit_code, 1);
  ASSERT_EQ(zero.lines.size(), 1u);
  EXPECT_NE(zero.lines[0].find("--device cuda: " + reason), std::string::npos) << zero.lines[0];
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/rendezvous"));
}

class TrainerMpiTest : public TrainerProcessTest {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kMpirun)) {
      GTEST_SKIP() << "no " << kMpirun << " (scripts/dev.sh deps installs openmpi-bin)";
    }
    TrainerProcessTest::SetUp();
  }

  // `common` as one process of two threads, then as two ranks of one thread each (the same two
  // cores); both must succeed.
  void RunOneAndTwo(const std::vector<std::string>& common, ChildResult* one, ChildResult* two) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--threads", "2"});
    *one = RunTrainer(args);
    ASSERT_EQ(one->exit_code, 0);
    args = common;
    args.insert(args.end(), {"--threads", "1"});
    std::string err;
    *two = RunTrainer(args, nullptr, Mpirun(2), nullptr, &err);
    ASSERT_EQ(two->exit_code, 0) << err;
  }
};

// Must show 1 and 2 of the distributed trainer: -np 2 reaches -np 1's AUC with the same seed,
// each rank holding about half the table; the job's figures come from rank 0 alone.
TEST_F(TrainerMpiTest, TwoRanksTrainAsOneOnSyntheticRowsWithHalfTheTableEach) {
  ChildResult single, job;
  ASSERT_NO_FATAL_FAILURE(RunOneAndTwo(
      {"--synthetic", "200000", "--seed", "3", "--progress-every", "50"}, &single, &job));
  // One protocol: rank 0's progress lines and one final line.
  EXPECT_EQ(Count(job.lines, "\"event\":\"final\""), 1);
  EXPECT_EQ(Count(job.lines, "\"event\":\"progress\""), Count(single.lines, "\"event\":\"progress\""));
  // Progress lines speak for the job: its examples so far (each rank trains on half of every
  // batch), and the window's metrics over every rank's examples.
  std::vector<const std::string*> single_progress, job_progress;
  for (const std::string& line : single.lines) {
    if (line.find("\"event\":\"progress\"") != std::string::npos) single_progress.push_back(&line);
  }
  for (const std::string& line : job.lines) {
    if (line.find("\"event\":\"progress\"") != std::string::npos) job_progress.push_back(&line);
  }
  ASSERT_EQ(job_progress.size(), single_progress.size());
  ASSERT_FALSE(job_progress.empty());
  for (size_t i = 0; i < job_progress.size(); ++i) {
    EXPECT_EQ(Number(*job_progress[i], "step"), Number(*single_progress[i], "step"));
    EXPECT_EQ(Number(*job_progress[i], "examples"), Number(*single_progress[i], "examples"))
        << *single_progress[i] << "\n" << *job_progress[i];
    EXPECT_NEAR(Number(*job_progress[i], "auc"), Number(*single_progress[i], "auc"), 0.02)
        << *single_progress[i] << "\n" << *job_progress[i];
  }
  const std::string& a = single.lines.back();
  const std::string& b = job.lines.back();
  EXPECT_EQ(Number(b, "ranks"), 2) << b;
  EXPECT_EQ(Number(b, "examples"), Number(a, "examples"));
  EXPECT_EQ(Number(b, "steps"), Number(a, "steps"));
  EXPECT_EQ(Number(b, "eval_examples"), Number(a, "eval_examples"));
  EXPECT_NEAR(Number(b, "auc"), Number(a, "auc"), 0.003) << a << "\n" << b;
  EXPECT_GT(Number(b, "bytes_exchanged_per_example"), 0);
  // Every row once over the job; each rank's table at most 0.6x the single process's.
  EXPECT_EQ(Number(b, "rows"), Number(a, "rows"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(b, m, std::regex(R"re("rank_table_bytes":\[(\d+),(\d+)\])re"))) << b;
  const double single_bytes = Number(a, "bytes");
  for (int r = 1; r <= 2; ++r) {
    double bytes = 0;
    ASSERT_TRUE(absl::SimpleAtod(m[r].str(), &bytes));
    EXPECT_LE(bytes, 0.6 * single_bytes) << "rank " << r - 1;
  }
}

TEST_F(TrainerMpiTest, TwoRanksTrainAsOneOnTheCriteoSample) {
  const std::string data = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/criteo-8k/";
  if (!std::filesystem::exists(data + "train.tsv")) GTEST_SKIP() << "no " << data;
  ChildResult single, job;
  ASSERT_NO_FATAL_FAILURE(RunOneAndTwo({"--train", data + "train.tsv", "--test", data + "test.tsv",
                                        "--epochs", "3", "--batch-size", "256", "--seed", "1"},
                                       &single, &job));
  EXPECT_EQ(Number(job.lines.back(), "eval_examples"), Number(single.lines.back(), "eval_examples"));
  EXPECT_NEAR(Number(job.lines.back(), "auc"), Number(single.lines.back(), "auc"), 0.003)
      << single.lines.back() << "\n" << job.lines.back();
}

// kill -9 of one rank ends the job (non-zero, within 10 s, mpirun naming the rank); the job
// resumes from the step both ranks checkpointed and ends with the uninterrupted run's AUC.
TEST_F(TrainerMpiTest, KillNineOfOneRankEndsTheJobAndItResumes) {
  const std::vector<std::string> common = {"--synthetic", "60000", "--batch-size", "256",
                                           "--embedding-dim", "8", "--hidden", "32,16",
                                           "--threads", "1", "--seed", "7", "--progress-every", "20",
                                           "--checkpoint-every", "20", "--full-checkpoint-every", "2"};
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--checkpoint-dir", dir_ + "/plain"});
  std::string err;
  ChildResult plain = RunTrainer(args, nullptr, Mpirun(2), nullptr, &err);
  ASSERT_EQ(plain.exit_code, 0) << err;
  const std::string& plain_final = plain.lines.back();

  args = common;
  args.insert(args.end(), {"--checkpoint-dir", dir_ + "/crash"});
  int checkpoints = 0;
  std::chrono::steady_clock::time_point killed_at;
  std::string crash_err;
  ChildResult crashed = RunTrainer(
      args,
      [&](const std::string& line) {
        return line.find("\"event\":\"checkpoint\"") != std::string::npos && ++checkpoints == 3;
      },
      Mpirun(2),
      [&](pid_t launcher) {
        const pid_t rank1 = RankPid(launcher, 1);
        ASSERT_GT(rank1, 0);
        killed_at = std::chrono::steady_clock::now();
        kill(rank1, SIGKILL);
      },
      &crash_err);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_NE(crashed.exit_code, 0);
  EXPECT_LT(seconds, 10) << "the job outlived its dead rank";
  EXPECT_EQ(Count(crashed.lines, "\"event\":\"final\""), 0);
  // mpirun says the job was aborted, naming the dead rank when its report keeps that part (not
  // every time under load).
  EXPECT_NE(crash_err.find("aborted"), std::string::npos) << crash_err;
  if (crash_err.find("process rank") != std::string::npos) {
    EXPECT_NE(crash_err.find("process rank 1"), std::string::npos) << crash_err;
  }

  args.push_back("--resume");
  ChildResult resumed = RunTrainer(args, nullptr, Mpirun(2), nullptr, &err);
  ASSERT_EQ(resumed.exit_code, 0) << err;
  ASSERT_FALSE(resumed.lines.empty());
  EXPECT_GE(Number(resumed.lines.front(), "step"), 40) << resumed.lines.front();
  EXPECT_EQ(Number(resumed.lines.back(), "examples"), Number(plain_final, "examples"));
  EXPECT_NEAR(Number(resumed.lines.back(), "auc"), Number(plain_final, "auc"), 0.002)
      << plain_final << "\n" << resumed.lines.back();
}

// Resharding: a job checkpointed by two ranks resumes as one process, and one process's as two
// ranks; each ends with the uninterrupted run's AUC and examples (give or take the row each old
// rank had read ahead), every id once, and the old layout gone.
TEST_F(TrainerMpiTest, ResumesWithAnotherNumberOfRanks) {
  const std::vector<std::string> common = {"--synthetic", "60000", "--batch-size", "256",
                                           "--embedding-dim", "8", "--hidden", "32,16",
                                           "--threads", "1", "--seed", "7", "--progress-every", "0",
                                           "--checkpoint-every", "20", "--full-checkpoint-every", "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = common;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  ChildResult plain = RunTrainer(with({"--checkpoint-dir", dir_ + "/plain"}));
  ASSERT_EQ(plain.exit_code, 0);
  const std::string& want = plain.lines.back();
  auto has = [](const std::string& dir, const std::string& prefix) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  std::string err;
  // Two ranks, then one process.
  ChildResult first = RunTrainer(with({"--checkpoint-dir", dir_ + "/a", "--max-steps", "60"}),
                                 nullptr, Mpirun(2), nullptr, &err);
  ASSERT_EQ(first.exit_code, 0) << err;
  ChildResult one = RunTrainer(with({"--checkpoint-dir", dir_ + "/a", "--resume"}));
  ASSERT_EQ(one.exit_code, 0) << (one.lines.empty() ? "" : one.lines.back());
  // One process, then two ranks.
  ChildResult second = RunTrainer(with({"--checkpoint-dir", dir_ + "/b", "--max-steps", "60"}));
  ASSERT_EQ(second.exit_code, 0);
  ChildResult two = RunTrainer(with({"--checkpoint-dir", dir_ + "/b", "--resume"}), nullptr,
                               Mpirun(2), nullptr, &err);
  ASSERT_EQ(two.exit_code, 0) << err;
  for (const ChildResult* r : {&one, &two}) {
    const std::string& got = r->lines.back();
    ASSERT_NE(got.find("\"event\":\"final\""), std::string::npos) << got;
    EXPECT_EQ(Number(got, "steps"), Number(want, "steps")) << got;
    EXPECT_NEAR(Number(got, "examples"), Number(want, "examples"), 2) << got;
    EXPECT_EQ(Number(got, "rows"), Number(want, "rows")) << got;
    EXPECT_NEAR(Number(got, "auc"), Number(want, "auc"), 0.003) << want << "\n" << got;
  }
  EXPECT_FALSE(has(dir_ + "/a", "rank-"));
  EXPECT_TRUE(has(dir_ + "/a", "ckpt-"));
  EXPECT_FALSE(has(dir_ + "/b", "ckpt-"));
  EXPECT_TRUE(has(dir_ + "/b", "rank-0-of-2"));
}

// A rank that cannot start (here: its checkpoint folder's name is taken by a file) ends the
// whole job at once, and rank 0's error event names that rank and its reason.
// A rank whose disk fails while it writes its part of a checkpoint (a failing fsync under
// rank 1's folder, made real by evoscale_fault_injection from the first checkpoint on): every
// rank ends at that step, and rank 0's error event gives rank 1's reason. (It used to be
// MPI_Abort, with nothing from rank 0.)
TEST_F(TrainerMpiTest, ARankThatFailsToCheckpointEndsTheJobWithItsReason) {
  std::filesystem::create_directories(dir_);
  const std::string rules = dir_ + "/faults";
  std::ofstream(rules).flush();  // nothing fails at first
  std::vector<std::string> launcher = Mpirun(2);
  launcher.insert(launcher.end() - 2, {"-x", std::string("LD_PRELOAD=") + EVOSCALE_FAULT_LIB,
                                       "-x", "EVOSCALE_FAULTS=" + rules});
  std::string err;
  int checkpoints_before = 0;
  ChildResult job = RunTrainer(
      {"--synthetic", "200000", "--threads", "1", "--batch-size", "256", "--checkpoint-every",
       "5", "--progress-every", "0", "--checkpoint-dir", dir_ + "/ck"},
      [&](const std::string& line) {
        return line.find("\"event\":\"checkpoint\"") != std::string::npos &&
               ++checkpoints_before == 1;
      },
      launcher,
      [&](pid_t) { std::ofstream(rules) << "fsync EIO /rank-1-of-2/\n"; }, &err);
  EXPECT_EQ(job.exit_code, 1) << err;
  ASSERT_GE(job.lines.size(), 2u) << err;
  const std::string& last = job.lines.back();
  EXPECT_NE(last.find("\"event\":\"error\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"message\":\"rank 1: "), std::string::npos) << last;
  EXPECT_NE(last.find("Input/output error"), std::string::npos) << last;
  EXPECT_EQ(Count(job.lines, "\"event\":\"final\""), 0);
  EXPECT_EQ(err.find("MPI_ABORT"), std::string::npos) << err;
  // It ended at the checkpoint after the fault, not at the end of the data (782 steps).
  EXPECT_LT(Number(last, "step"), 100) << last;
}

TEST_F(TrainerMpiTest, ARankThatCannotStartEndsTheJobWithItsReason) {
  std::filesystem::create_directories(dir_ + "/ck");
  std::ofstream(dir_ + "/ck/rank-1-of-2") << "not a folder";
  std::string err;
  const auto start = std::chrono::steady_clock::now();
  ChildResult job = RunTrainer({"--synthetic", "5000", "--threads", "1", "--checkpoint-dir",
                                dir_ + "/ck"},
                               nullptr, Mpirun(2), nullptr, &err);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  EXPECT_NE(job.exit_code, 0);
  ASSERT_EQ(job.lines.size(), 1u) << err;  // rank 0's error event, nothing else
  EXPECT_NE(job.lines[0].find("\"event\":\"error\""), std::string::npos) << job.lines[0];
  EXPECT_NE(job.lines[0].find("rank 1: checkpoint_dir: cannot make this rank's folder"),
            std::string::npos)
      << job.lines[0];
}

}  // namespace
