// Shared by the tests that run the real evoscale-serve and evoscale-trainer binaries
// (serve_process_test, sharded_serve_test): starting them, feeding a streaming trainer, and
// asking replicas for criteo-8k's test scores and their versions.
#ifndef EVOSCALE_TESTS_SERVE_SERVE_PROCESS_H_
#define EVOSCALE_TESTS_SERVE_SERVE_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/evoscaled_process.h"

namespace evoscale::testing {

// criteo-8k's folder (train.tsv, test.tsv).
extern const std::string kData;
inline constexpr char kMpirun[] = "/usr/bin/mpirun";

// Runs `binary args...` to its end; its last stdout line as JSON (null if none) and exit code.
struct Ran {
  nlohmann::json last;
  std::string output;
  int exit_code = -1;
};
Ran RunToEnd(const std::string& binary, const std::vector<std::string>& args,
             bool merge_stderr = false);

// evoscale-trainer's flags for two epochs of criteo-8k into checkpoints in `dir`.
std::vector<std::string> TrainerArgs(const std::string& dir, int threads);

// A started evoscale-serve and the addresses of its listening line (--grpc and --http on
// port 0 unless `extra` gives them).
struct Served {
  std::unique_ptr<EvoscaledProcess> process;
  nlohmann::json listening;
  std::string grpc, http;
};
absl::StatusOr<Served> StartServe(const std::vector<std::string>& extra);

// Every probability the replica at `address` answers for the test file, 100 examples a call;
// `version`, when given, the sparse version of the last answer (and each answer's dense version
// must be its sparse one).
std::vector<float> Scores(const std::string& address, int64_t* version = nullptr);
// The AUC of the replica's answers for the test file (-1 when it did not answer them all).
double ServedAuc(const std::string& address, int64_t* version);

// A child with a pipe to its stdin (the stream) and one from its stdout.
struct Piped {
  pid_t pid = -1;
  FILE* in = nullptr;
  int out = -1;
};
Piped SpawnPiped(const std::vector<std::string>& args);

// Online training's start: criteo-8k's training lines, the first 2,000 trained into `ckpt`
// (what a replica is deployed from); empty, after a failure, when that training failed.
std::vector<std::string> DeployFirstRows(const std::string& dir, const std::string& ckpt);

// Ends a streaming trainer's input and waits for it: its final line (not an object, after a
// failure, when it did not exit 0 or printed none); `out`, everything it printed.
nlohmann::json EndStream(Piped& trainer, std::string* out);

// How many of two equally long lists of answers differ.
int Differing(const std::vector<float>& a, const std::vector<float>& b);

// The replica's sparse version (its SyncState), -1 when it does not answer.
int64_t ReplicaVersion(const std::string& address);

// The fixture of the tests that run the binaries: skipped when evoscale-serve is not built or
// criteo-8k is missing.
class ServeBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_SERVE_SERVE_PROCESS_H_
