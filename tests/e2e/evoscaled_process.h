// Runs the real evoscaled binary as a child process for end-to-end tests.
#ifndef EVOSCALE_TESTS_E2E_EVOSCALED_PROCESS_H_
#define EVOSCALE_TESTS_E2E_EVOSCALED_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace evoscale::testing {

inline std::string BinDir() { return EVOSCALE_BIN_DIR; }

// A fresh temporary directory, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/evoscale-test.XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What an evoscaled that was expected to exit on its own did.
struct ExitedProcess {
  int exit_code = -1;  // -1: killed by a signal, or still running at the deadline (then killed)
  std::string output;  // stdout and stderr together
};

class EvoscaledProcess {
 public:
  // Starts `build/bin/<binary> args...` (evoscaled unless told; an absolute path as it is)
  // with its stdout (and, with
  // `merge_stderr`, its stderr) on a pipe that ReadLine reads; waits for nothing.
  static absl::StatusOr<std::unique_ptr<EvoscaledProcess>> Spawn(
      const std::vector<std::string>& args, bool merge_stderr = false,
      const std::string& binary = "evoscaled") {
    int out[2];
    if (pipe(out) != 0) return absl::InternalError("pipe");
    std::vector<std::string> argv_strings = {binary[0] == '/' ? binary : BinDir() + "/" + binary};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      if (merge_stderr) dup2(out[1], STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (auto& a : argv_strings) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    return std::unique_ptr<EvoscaledProcess>(new EvoscaledProcess(pid, out[0]));
  }

  // Runs `build/bin/evoscaled args...` and waits (up to 30 s) for it to exit by itself, as a
  // server refusing to start must.
  static ExitedProcess RunToExit(const std::vector<std::string>& args) {
    ExitedProcess result;
    absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p = Spawn(args, /*merge_stderr=*/true);
    if (!p.ok()) return result;
    // Read until EOF (the process and its children closed the pipe) or the deadline.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    absl::StatusOr<std::string> line;
    while ((line = (*p)->ReadLine(std::chrono::duration_cast<std::chrono::seconds>(
                deadline - std::chrono::steady_clock::now())))
               .ok()) {
      result.output += *line + "\n";
    }
    if (absl::IsNotFound(line.status())) {  // EOF: whatever came without a newline too
      result.output += (*p)->buffer_;
      const int status = (*p)->Stop(0);
      if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    }
    return result;  // a process still running at the deadline is killed by the destructor
  }

  // Starts `build/bin/evoscaled --db db --grpc 127.0.0.1:0 --http 127.0.0.1:0 extra...` and
  // waits (up to 30 s) for its "listening" line. With `merge_stderr`, its log lines follow on
  // ReadLine too (those before "listening" are skipped).
  static absl::StatusOr<std::unique_ptr<EvoscaledProcess>> Start(
      const std::string& db, const std::vector<std::string>& extra = {},
      bool merge_stderr = false) {
    std::vector<std::string> args = {"--db", db, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<EvoscaledProcess>> p = Spawn(args, merge_stderr);
    if (!p.ok()) return p.status();
    absl::StatusOr<std::string> line = (*p)->ReadLine(std::chrono::seconds(30));
    for (int skipped = 0; merge_stderr && line.ok() && skipped < 20 &&
                          line->find("\"listening\"") == std::string::npos;
         ++skipped) {
      (*p)->early_output_ += *line + "\n";
      line = (*p)->ReadLine(std::chrono::seconds(30));
    }
    if (!line.ok()) {
      return absl::UnavailableError(
          absl::StrCat("evoscaled did not start listening: ", line.status().message()));
    }
    const nlohmann::json listening =
        nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
    if (!listening.is_object() || listening.value("event", "") != "listening" ||
        !listening.contains("grpc") || !listening.contains("http")) {
      return absl::InternalError("unexpected first line: " + *line);
    }
    (*p)->grpc_ = listening["grpc"].get<std::string>();
    (*p)->http_ = listening["http"].get<std::string>();
    if (listening.contains("katib")) (*p)->katib_ = listening["katib"].get<std::string>();
    return p;
  }

  ~EvoscaledProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }

  // The next line of its output, without the newline, waiting up to `timeout`. NOT_FOUND when
  // the output ends first (what came after the last newline stays unread), DEADLINE_EXCEEDED
  // at the timeout.
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
      if (n <= 0) return absl::NotFoundError(absl::StrCat("output ended after: ", buffer_));
      buffer_.append(chunk, n);
    }
  }

  // Sends `sig` (0: none, the process is ending by itself) and reaps the process. Returns its
  // wait status.
  int Stop(int sig) {
    if (sig != 0) kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // With merge_stderr: the log lines before "listening".
  const std::string& early_output() const { return early_output_; }
  const std::string& grpc_address() const { return grpc_; }
  const std::string& http_address() const { return http_; }
  // With --katib-grpc: the address Katib's Suggestion API listens on ("" without).
  const std::string& katib_address() const { return katib_; }
  pid_t pid() const { return pid_; }

  std::unique_ptr<v1::StudyService::Stub> NewStub() const {
    return v1::StudyService::NewStub(
        grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
  }

 private:
  EvoscaledProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}

  pid_t pid_;
  const int fd_;        // the read end of its output
  std::string buffer_;  // read from fd_, not yet returned by ReadLine()
  std::string grpc_;
  std::string http_;
  std::string katib_;
  std::string early_output_;
};

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_E2E_EVOSCALED_PROCESS_H_
