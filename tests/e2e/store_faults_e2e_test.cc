// Faults of the disk under a real evoscaled: each gives the client a clear error and never a
// wrong answer, nothing acknowledged is lost, and once the fault clears service resumes (or
// evoscaled refuses to start, saying what to do).
//  - a full disk and a read-only file system at start are real: a small tmpfs mounted for the
//    test (skipped, saying why, where the test may not mount);
//  - a disk turning read-only while files are open for writing, and a failing fsync, cannot be
//    made real here: evoscale_fault_injection (LD_PRELOAD, tests/support/fault_injection.cc)
//    fails those calls in the real evoscaled;
//  - a damaged or truncated write-ahead log: the real file, edited after a kill -9.
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/e2e/http_get.h"
#include "tests/support/test_support.h"

namespace evoscale {
namespace {

using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::ExitedProcess;
using ::evoscale::testing::ReadFile;
using ::evoscale::testing::TempDir;
using ::testing::HasSubstr;

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

v1::Study SmallStudy(int i) {
  v1::Study study;
  static int serial = 0;  // get-or-create: a name used before would not write a new study
  study.set_display_name(absl::StrCat("fault-", i, "-", ++serial, "-", std::string(200, 'x')));
  v1::StudySpec* spec = study.mutable_spec();
  auto* m = spec->add_metrics();
  m->set_name("loss");
  m->set_goal(v1::MetricSpec::MINIMIZE);
  auto* p = spec->add_parameters();
  p->set_name("lr");
  p->mutable_double_spec()->set_min(1e-4);
  p->mutable_double_spec()->set_max(1);
  return study;
}

uint32_t Be32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

class StoreFaultTest : public ::testing::Test {
 protected:
  void TearDown() override {
    server_.reset();
    if (mounted_) umount2(dir_.path().c_str(), MNT_DETACH);
    unsetenv("LD_PRELOAD");
    unsetenv("EVOSCALE_FAULTS");
  }

  // A tmpfs of `size` over the test's directory; false (and the reason) where not allowed.
  bool MountTmpfs(const std::string& size, std::string* why) {
    if (mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0) {
      *why = absl::StrCat("cannot mount a tmpfs here (", std::strerror(errno),
                          "): needs root with CAP_SYS_ADMIN");
      return false;
    }
    mounted_ = true;
    return true;
  }

  void Start(const std::vector<std::string>& extra = {}) {
    server_.reset();
    auto p = EvoscaledProcess::Start(db_, extra, /*merge_stderr=*/true);
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
    stub_ = server_->NewStub();
  }

  // Starts the next evoscaled with evoscale_fault_injection loaded, reading rules_.
  void StartWithFaults(const std::vector<std::string>& extra = {}) {
    std::ofstream(rules_, std::ios::trunc);
    setenv("LD_PRELOAD", EVOSCALE_FAULT_LIB, 1);
    setenv("EVOSCALE_FAULTS", rules_.c_str(), 1);
    Start(extra);
    unsetenv("LD_PRELOAD");
    unsetenv("EVOSCALE_FAULTS");
  }
  void SetFaults(const std::string& rules) { std::ofstream(rules_, std::ios::trunc) << rules; }

  grpc::Status Create(int i, std::string* name = nullptr) {
    v1::CreateStudyRequest req;
    *req.mutable_study() = SmallStudy(i);
    v1::Study out;
    grpc::Status st = stub_->CreateStudy(Ctx().get(), req, &out);
    if (st.ok() && name != nullptr) *name = out.name();
    return st;
  }

  // Every study evoscaled lists, by name, each also answering GetStudy whole.
  std::set<std::string> Listed() {
    std::set<std::string> names;
    v1::ListStudiesRequest req;
    req.set_page_size(1000);
    v1::ListStudiesResponse resp;
    grpc::Status st = stub_->ListStudies(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    for (const v1::Study& s : resp.studies()) {
      names.insert(s.name());
      v1::GetStudyRequest get;
      get.set_name(s.name());
      v1::Study got;
      EXPECT_TRUE(stub_->GetStudy(Ctx().get(), get, &got).ok()) << s.name();
      EXPECT_EQ(got.spec().parameters_size(), 1) << s.name();
    }
    return names;
  }

  // Starts evoscaled, acknowledges a burst of 40 studies and kills it (-9): its WAL then holds
  // the burst's last commits, not yet copied into the database.
  void BurstThenKill(std::vector<std::string>* acknowledged) {
    ASSERT_NO_FATAL_FAILURE(Start());
    ASSERT_TRUE(CreateUntilFailure(40, acknowledged).ok());
    server_->Stop(SIGKILL);
  }

  // Creates studies until one fails; returns the names acknowledged and that failure.
  grpc::Status CreateUntilFailure(int limit, std::vector<std::string>* acknowledged) {
    for (int i = 0; i < limit; ++i) {
      std::string name;
      grpc::Status st = Create(i, &name);
      if (!st.ok()) return st;
      acknowledged->push_back(name);
    }
    return grpc::Status::OK;
  }

  void ExpectAllListed(const std::vector<std::string>& acknowledged) {
    const std::set<std::string> listed = Listed();
    for (const std::string& name : acknowledged) EXPECT_TRUE(listed.contains(name)) << name;
  }

  TempDir dir_;
  const std::string db_ = dir_.path() + "/evoscale.db";
  const std::string rules_ = dir_.path() + "/faults";
  bool mounted_ = false;
  std::unique_ptr<EvoscaledProcess> server_;
  std::unique_ptr<v1::StudyService::Stub> stub_;
};

// The disk fills (a real 3 MiB tmpfs): the write that does not fit is RESOURCE_EXHAUSTED saying
// so, reads still answer, nothing acknowledged is lost; with room again writes go on
// (durability "process") and a restart finds everything.
TEST_F(StoreFaultTest, FullDiskRefusesTheWriteKeepsEverythingAcknowledgedAndResumes) {
  std::string why;
  if (!MountTmpfs("3m", &why)) GTEST_SKIP() << why;
  ASSERT_NO_FATAL_FAILURE(Start());
  std::vector<std::string> acknowledged;
  ASSERT_TRUE(CreateUntilFailure(5, &acknowledged).ok());
  // Leave a little room (allocated, not sparse), then write until it is gone.
  const std::string filler = dir_.path() + "/filler";
  {
    const int fd = open(filler.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const auto available = std::filesystem::space(dir_.path()).available;
    ASSERT_EQ(posix_fallocate(fd, 0, static_cast<off_t>(available - (96 << 10))), 0);
    close(fd);
  }
  grpc::Status full = CreateUntilFailure(1000, &acknowledged);
  ASSERT_FALSE(full.ok()) << "1000 studies fitted in 96 KiB";
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
  EXPECT_THAT(full.error_message(), HasSubstr("No space left on device"));
  EXPECT_THAT(full.error_message(), HasSubstr("nothing of this write was stored: free disk space"));
  ExpectAllListed(acknowledged);
  EXPECT_EQ(Listed().size(), acknowledged.size());  // the refused study is nowhere

  std::filesystem::remove(filler);
  std::string after;
  ASSERT_TRUE(Create(7, &after).ok());
  acknowledged.push_back(after);
  ASSERT_NO_FATAL_FAILURE(Start());  // a restart (SIGKILL of the old one)
  ExpectAllListed(acknowledged);
}

// A database on a file system that is read-only when evoscaled starts: it refuses to start
// (exit 2) naming the database and the reason; writable again, it serves everything.
TEST_F(StoreFaultTest, ReadOnlyFileSystemAtStartIsRefusedWithTheReason) {
  std::string why;
  if (!MountTmpfs("16m", &why)) GTEST_SKIP() << why;
  ASSERT_NO_FATAL_FAILURE(Start());
  std::vector<std::string> acknowledged;
  ASSERT_TRUE(CreateUntilFailure(3, &acknowledged).ok());
  server_->Stop(SIGTERM);
  ASSERT_EQ(mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr), 0)
      << std::strerror(errno);
  ExitedProcess refused =
      EvoscaledProcess::RunToExit({"--db", db_, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr(db_));
  EXPECT_THAT(refused.output, HasSubstr("Read-only file system"));
  ASSERT_EQ(mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_REMOUNT, nullptr), 0)
      << std::strerror(errno);
  ASSERT_NO_FATAL_FAILURE(Start());
  ExpectAllListed(acknowledged);
}

// The disk turns read-only while evoscaled runs (its files open): writes are
// FAILED_PRECONDITION saying so, reads answer, and once writable again writes go on.
TEST_F(StoreFaultTest, DiskTurningReadOnlyWhileServingRefusesWritesUntilItIsWritable) {
  ASSERT_NO_FATAL_FAILURE(StartWithFaults());
  std::vector<std::string> acknowledged;
  ASSERT_TRUE(CreateUntilFailure(3, &acknowledged).ok());
  SetFaults(absl::StrCat("write EROFS ", dir_.path(), "/\n"));
  grpc::Status refused = Create(10);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("Read-only file system"));
  EXPECT_THAT(refused.error_message(), HasSubstr("make the database writable again"));
  ExpectAllListed(acknowledged);
  EXPECT_EQ(Listed().size(), acknowledged.size());
  SetFaults("");
  std::string after;
  ASSERT_TRUE(Create(11, &after).ok());
  acknowledged.push_back(after);
  server_->Stop(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(Start());
  ExpectAllListed(acknowledged);
}

// fsync fails (durability "power": every commit is fsync'ed before it is acknowledged): that
// write is not acknowledged, evoscaled stops writing (UNAVAILABLE, "restart it": after a failed
// fsync the page cache cannot be trusted), and a restart finds every acknowledged write.
TEST_F(StoreFaultTest, FailedFsyncStopsWritesAndARestartKeepsEverythingAcknowledged) {
  ASSERT_NO_FATAL_FAILURE(StartWithFaults({"--durability", "power"}));
  std::vector<std::string> acknowledged;
  ASSERT_TRUE(CreateUntilFailure(4, &acknowledged).ok());
  SetFaults(absl::StrCat("fsync EIO ", dir_.path(), "/\n"));
  grpc::Status failed = Create(20);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.error_message(), HasSubstr("disk I/O error"));
  SetFaults("");  // even with the disk well again, this process writes no more
  grpc::Status after = Create(21);
  EXPECT_EQ(after.error_code(), grpc::StatusCode::UNAVAILABLE) << after.error_message();
  EXPECT_THAT(after.error_message(), HasSubstr("restart it"));
  server_->Stop(SIGTERM);
  ASSERT_NO_FATAL_FAILURE(Start({"--durability", "power"}));
  ExpectAllListed(acknowledged);
  ASSERT_TRUE(Create(22).ok());
}

// With durability "process" commits write the write-ahead log without syncing it; the
// background checkpoints copy it into the database file and sync that. When that sync fails
// nothing is lost (every commit stays in the log) but the log grows until a checkpoint
// succeeds: evoscaled says so once when checkpoints start failing and once when they succeed
// again, and keeps serving.
TEST_F(StoreFaultTest, FailingCheckpointsAreReportedAndRecover) {
  ASSERT_NO_FATAL_FAILURE(StartWithFaults());
  std::vector<std::string> acknowledged;
  SetFaults(absl::StrCat("fsync EIO ", db_, "$\n"));  // the database file, not its log
  ASSERT_TRUE(CreateUntilFailure(8, &acknowledged).ok());
  // The next lines of evoscaled's log, until one has `what` (up to 20 s).
  auto await_log = [&](const std::string& what) -> std::string {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      absl::StatusOr<std::string> line = server_->ReadLine(std::chrono::seconds(1));
      if (line.ok() && line->find(what) != std::string::npos) return *line;
    }
    return "";
  };
  const std::string failed = await_log("\"checkpoint failed\"");
  ASSERT_FALSE(failed.empty()) << "no \"checkpoint failed\" line";
  EXPECT_THAT(failed, HasSubstr("\"event\":\"store\""));
  EXPECT_THAT(failed, HasSubstr(db_));
  EXPECT_THAT(failed, HasSubstr("disk I/O error"));
  EXPECT_THAT(failed, HasSubstr("write-ahead log"));
  ASSERT_TRUE(CreateUntilFailure(4, &acknowledged).ok());  // still serving
  const std::string metrics =
      ::evoscale::testing::HttpGet(server_->http_address(), "/metrics").body;
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "evoscale_store_checkpoint_failures_total\\{database=\"study\"\\} [1-9]"));
  SetFaults("");
  const std::string recovered = await_log("\"checkpoint recovered\"");
  ASSERT_FALSE(recovered.empty()) << "no \"checkpoint recovered\" line";
  EXPECT_THAT(recovered, HasSubstr("failed attempts"));
  ExpectAllListed(acknowledged);
  server_->Stop(SIGKILL);  // and nothing acknowledged was lost
  ASSERT_NO_FATAL_FAILURE(Start());
  ExpectAllListed(acknowledged);
}

// After a kill -9 the WAL holds acknowledged commits. A damaged frame in its middle would make
// SQLite's recovery drop every commit after it, silently: evoscaled refuses to start, naming
// the damage and what to do, and changes nothing; --accept-damaged-wal opens what comes before.
TEST_F(StoreFaultTest, DamagedWalIsRefusedUntilAccepted) {
  std::vector<std::string> acknowledged;
  ASSERT_NO_FATAL_FAILURE(BurstThenKill(&acknowledged));
  const std::string wal_path = db_ + "-wal";
  std::string wal = ReadFile(wal_path);
  ASSERT_GT(wal.size(), 32u);
  const uint32_t page = Be32(wal, 8);
  const size_t frame = 24 + page;
  int commits = 0;  // of this WAL generation (its salts)
  for (size_t at = 32; at + frame <= wal.size(); at += frame) {
    if (Be32(wal, at + 8) != Be32(wal, 16) || Be32(wal, at + 12) != Be32(wal, 20)) break;
    if (Be32(wal, at + 4) != 0) ++commits;
  }
  ASSERT_GE(commits, 2) << "the WAL should hold the burst's commits";
  wal[32 + 24 + 100] ^= 0x5A;  // a byte of the first frame's page
  std::ofstream(wal_path, std::ios::binary | std::ios::trunc) << wal;
  const std::string db_before = ReadFile(db_);

  ExitedProcess refused =
      EvoscaledProcess::RunToExit({"--db", db_, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr(absl::StrCat("\"", wal_path, "\" is damaged at frame 1")));
  EXPECT_THAT(refused.output, HasSubstr("cannot be replayed"));
  EXPECT_THAT(refused.output, HasSubstr("--accept-damaged-wal"));
  EXPECT_EQ(ReadFile(wal_path), wal);
  EXPECT_EQ(ReadFile(db_), db_before);

  ASSERT_NO_FATAL_FAILURE(Start({"--accept-damaged-wal"}));
  // What it serves is consistent: every listed study is whole, and new ones follow.
  const std::set<std::string> listed = Listed();
  EXPECT_LE(listed.size(), acknowledged.size());
  ASSERT_TRUE(Create(99).ok());
}

// A crash (or power loss) while a commit is being written leaves a torn frame at the WAL's end:
// that commit was never acknowledged. evoscaled starts, logs the torn tail, and every
// acknowledged write is there.
TEST_F(StoreFaultTest, TornWalTailStartsWithEverythingAcknowledgedAndSaysSo) {
  std::vector<std::string> acknowledged;
  ASSERT_NO_FATAL_FAILURE(BurstThenKill(&acknowledged));
  const std::string wal_path = db_ + "-wal";
  const std::string wal = ReadFile(wal_path);
  ASSERT_GT(wal.size(), 32u);
  const size_t frame = 24 + Be32(wal, 8);
  ASSERT_GE(wal.size(), 32 + frame);
  // Half of a frame more: the start of a commit that never finished.
  std::ofstream(wal_path, std::ios::binary | std::ios::app)
      << wal.substr(wal.size() - frame, frame / 2);
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_THAT(server_->early_output(), HasSubstr("WAL ends in a partial frame"));
  ExpectAllListed(acknowledged);
  EXPECT_EQ(Listed().size(), acknowledged.size());
  ASSERT_TRUE(Create(99).ok());
}

// The limit: a WAL cut into acknowledged commits (a truncated copy, not a crash: a crash cannot
// cut a commit that was acknowledged) looks like a crash that came earlier; the commits in the
// cut part are gone, and nothing in the remaining files can tell. evoscaled starts with the
// commits before the cut, each study whole, logs the torn tail, and numbers on after them.
TEST_F(StoreFaultTest, WalCutIntoAcknowledgedCommitsStartsWithTheCommitsBeforeTheCut) {
  std::vector<std::string> acknowledged;
  ASSERT_NO_FATAL_FAILURE(BurstThenKill(&acknowledged));
  const std::string wal_path = db_ + "-wal";
  const auto size = std::filesystem::file_size(wal_path);
  ASSERT_GT(size, 32u + 24u);
  std::filesystem::resize_file(wal_path, size - 1000);
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_THAT(server_->early_output(), HasSubstr("WAL ends in a partial frame"));
  const std::set<std::string> listed = Listed();
  // The cut reached into the last commit only: every study before it is there.
  EXPECT_GE(listed.size() + 1, acknowledged.size());
  for (size_t i = 0; i + 1 < acknowledged.size(); ++i) {
    EXPECT_TRUE(listed.contains(acknowledged[i])) << acknowledged[i];
  }
  ASSERT_TRUE(Create(99).ok());
}

}  // namespace
}  // namespace evoscale

namespace evoscale {
namespace {

// The hold in progress in `holds` (a fault-injection HOLD log: "start N" / "end N" lines), or 0.
long HoldInProgress(const std::string& holds) {
  std::set<long> open;
  std::istringstream in(holds);
  std::string what;
  long n = 0;
  while (in >> what >> n) {
    if (what == "start") open.insert(n);
    if (what == "end") open.erase(n);
  }
  return open.empty() ? 0 : *open.rbegin();
}

// A stalled disk (every fsync of the study database held until the test releases it,
// durability "power") while a managed trial finishes: its completion waits for the fsync, and so
// do the scheduler's calls of the study core, but the scheduler never holds its lock across
// them, so /metrics (which reads the scheduler's gauges) answers throughout the hold. (With
// the scheduler of 1316ab8, which held its lock across those calls, a scrape waits until the
// release.)
TEST_F(StoreFaultTest, MetricsAnswerWhileAFinishingManagedTrialWaitsForItsFsync) {
  const std::string go = dir_.path() + "/go";
  ASSERT_NO_FATAL_FAILURE(StartWithFaults({"--durability", "power"}));
  v1::CreateStudyRequest req;
  *req.mutable_study() = SmallStudy(0);
  req.mutable_study()->mutable_spec()->set_max_trials(1);
  v1::TrialTemplate* t = req.mutable_study()->mutable_spec()->mutable_trial_template();
  t->set_command("/bin/sh");
  for (const std::string& arg :
       {std::string("-c"),
        absl::StrCat("touch ", go, ".started; while [ ! -e ", go, " ]; do sleep 0.05; done; ",
                     R"(echo '{"event":"final","metrics":{"loss":0.25}}')")}) {
    t->add_args(arg);
  }
  v1::Study study;
  ASSERT_TRUE(stub_->CreateStudy(Ctx().get(), req, &study).ok());
  v1::GetTrialRequest get;
  get.set_name(study.name() + "/trials/1");
  v1::Trial trial;
  ASSERT_TRUE(testing::AwaitCondition([&] { return std::filesystem::exists(go + ".started"); }));
  // Held until the test releases it (30 s at most): a scrape that waits behind the disk waits
  // until then.
  SetFaults(absl::StrCat("fsync HOLD30000 ", dir_.path(), "/evoscale.db\n"));
  std::ofstream(go) << "go";  // the trial prints its final event and exits: it completes
  long held = 0;
  ASSERT_TRUE(testing::AwaitCondition([&] {
    held = HoldInProgress(ReadFile(rules_ + ".holds"));
    return held > 0;
  }));
  // Scrapes back to back through 2 s of the hold: the scheduler passes every 250 ms, so
  // its calls of the core meet the held fsync meanwhile. Each scrape gets 10 s; one still
  // waiting then waits behind the disk (it ends once the hold is released, below).
  std::vector<std::future<testing::HttpResult>> scrapes;
  int answered = 0;
  const absl::Time until = absl::Now() + absl::Seconds(2);
  while (scrapes.size() < 200 && (scrapes.empty() || absl::Now() < until)) {
    scrapes.push_back(std::async(std::launch::async, [&] {
      return testing::HttpGet(server_->http_address(), "/metrics");
    }));
    if (scrapes.back().wait_for(std::chrono::seconds(10)) != std::future_status::ready) break;
    const testing::HttpResult metrics = scrapes.back().get();
    EXPECT_EQ(metrics.status, 200);
    if (answered++ == 0) {
      EXPECT_THAT(metrics.body, HasSubstr("evoscale_capacity_requested_cpu_cores"));
    }
  }
  const std::string holds = ReadFile(rules_ + ".holds");
  std::ofstream(rules_ + ".release") << "go";  // ends the hold, and lets later fsyncs through
  SetFaults("");
  EXPECT_EQ(answered, static_cast<int>(scrapes.size()))
      << "a /metrics scrape waited behind fsync hold " << held << ":\n" << holds;
  EXPECT_THAT(holds, ::testing::Not(HasSubstr(absl::StrCat("end ", held, "\n"))))
      << "fsync hold " << held << " ended before the test released it:\n" << holds;
  ASSERT_TRUE(testing::AwaitCondition([&] {
    return stub_->GetTrial(Ctx().get(), get, &trial).ok() &&
           trial.state() == v1::Trial::SUCCEEDED;
  })) << trial.ShortDebugString();
}

}  // namespace
}  // namespace evoscale
