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
    std::string tmpl = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/evoscale-test.XXXXXX";
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
  // Runs `build/bin/evoscaled args...` and waits (up to 30 s) for it to exit by itself, as a
  // server refusing to start must.
  static ExitedProcess RunToExit(const std::vector<std::string>& args) {
    ExitedProcess result;
    int out[2];
    if (pipe(out) != 0) return result;
    std::vector<std::string> argv_strings = {BinDir() + "/evoscaled"};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    pid_t pid = fork();
    if (pid < 0) return result;
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (auto& a : argv_strings) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    // Read until EOF (the process and its children closed the pipe) or the deadline.
    bool eof = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!eof && std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{out[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char c[512];
      ssize_t n = read(out[0], c, sizeof c);
      if (n <= 0) {
        eof = true;
      } else {
        result.output.append(c, n);
      }
    }
    close(out[0]);
    if (!eof) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (eof && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    return result;
  }

  // Starts `build/bin/evoscaled --db db --grpc 127.0.0.1:0 --http 127.0.0.1:0 extra...` and
  // waits (up to 30 s) for its "listening" line.
  static absl::StatusOr<std::unique_ptr<EvoscaledProcess>> Start(
      const std::string& db, const std::vector<std::string>& extra = {}) {
    int out[2];
    if (pipe(out) != 0) return absl::InternalError("pipe");
    std::vector<std::string> args = {BinDir() + "/evoscaled", "--db", db, "--grpc", "127.0.0.1:0",
                                     "--http", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    auto p = std::unique_ptr<EvoscaledProcess>(new EvoscaledProcess(pid, out[0]));
    if (absl::Status st = p->AwaitListening(); !st.ok()) return st;
    return p;
  }

  ~EvoscaledProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }

  // Sends `sig` and reaps the process. Returns its wait status.
  int Stop(int sig) {
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  const std::string& grpc_address() const { return grpc_; }
  const std::string& http_address() const { return http_; }
  pid_t pid() const { return pid_; }

  std::unique_ptr<v1::StudyService::Stub> NewStub() const {
    return v1::StudyService::NewStub(
        grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
  }

 private:
  EvoscaledProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}

  absl::Status AwaitListening() {
    std::string buf;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char c[512];
      ssize_t n = read(fd_, c, sizeof c);
      if (n <= 0) return absl::UnavailableError("evoscaled exited before listening: " + buf);
      buf.append(c, n);
      if (size_t nl = buf.find('\n'); nl != std::string::npos) {
        const std::string line = buf.substr(0, nl);
        const nlohmann::json listening =
            nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!listening.is_object() || listening.value("event", "") != "listening" ||
            !listening.contains("grpc") || !listening.contains("http")) {
          return absl::InternalError("unexpected first line: " + line);
        }
        grpc_ = listening["grpc"].get<std::string>();
        http_ = listening["http"].get<std::string>();
        return absl::OkStatus();
      }
    }
    return absl::DeadlineExceededError("evoscaled did not start within 30 s");
  }

  pid_t pid_;
  int fd_;
  std::string grpc_;
  std::string http_;
};

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_E2E_EVOSCALED_PROCESS_H_
