// The telemetry store on each backend: a real SQLite file in a temp dir and a real PostgreSQL
// server (tests/support/postgres_server.h; skipped, saying why, where PostgreSQL is not
// installed). The same calls store, fold and delete the same rows on both. Then what only
// PostgreSQL has, where several replicas share the tables: ids from the database, the chore
// lease, and reading what another store appended.
#include <sqlite3.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/telemetry_store.h"
#include "tests/service/store/store_test_data.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::absl::StatusCode;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::IsEmpty;

// Every stored field, for comparing whole rows.
struct Row {
  int64_t instance_id;
  int32_t resolution;
  double timestamp, cpu, memory, gpu_utilization, gpu_memory, qps, latency_ms;
  bool oom;
  double cpu_request;
  bool operator==(const Row&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Row& r) {
  return os << "{instance " << r.instance_id << " res " << r.resolution << " t " << r.timestamp
            << " cpu " << r.cpu << " mem " << r.memory << " gpu " << r.gpu_utilization << "/"
            << r.gpu_memory << " qps " << r.qps << " lat " << r.latency_ms << " oom " << r.oom
            << " req " << r.cpu_request << "}";
}

MATCHER_P(HoldsValue, value, absl::StrCat("holds ", ::testing::PrintToString(value))) {
  if (!arg.ok()) {
    *result_listener << "which failed: " << arg.status();
    return false;
  }
  *result_listener << "which holds " << ::testing::PrintToString(*arg);
  return *arg == value;
}

// Binary-exact fields, so that sums and means compare exactly on both backends.
TelemetryRow Sample(int64_t instance, double t, double cpu, double memory) {
  return {.instance_id = instance,
          .timestamp = t,
          .cpu_cores = cpu,
          .memory_bytes = memory,
          .gpu_utilization = cpu / 4,
          .gpu_memory_bytes = memory / 2,
          .qps = cpu * 100,
          .latency_ms = cpu * 8,
          .cpu_request_cores = 0.5};
}

v1::Workload NamedWorkload(const std::string& name, int max_replicas = 0) {
  v1::Workload w;
  w.set_name(name);
  w.set_max_replicas(max_replicas);
  return w;
}

class PostgresFixture {
 protected:
  // One server for a suite; a database of its own for each test.
  static void StartServer() {
    if (!PostgresServer::UnavailableReason().empty()) return;
    absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void StopServer() {
    delete server_;
    server_ = nullptr;
  }
  // A new database's URI (and its name in db_name_).
  std::string NewDatabase() {
    db_name_ = absl::StrCat("telemetry_", ++databases_);
    absl::StatusOr<std::string> uri = server_->CreateDatabase(db_name_);
    EXPECT_TRUE(uri.ok()) << uri.status();
    return uri.ok() ? *uri : "";
  }

  static PostgresServer* server_;
  static int databases_;
  std::string db_name_;
};

PostgresServer* PostgresFixture::server_ = nullptr;
int PostgresFixture::databases_ = 0;

class TelemetryConformanceTest : public ::testing::TestWithParam<std::string>,
                                 public PostgresFixture {
 protected:
  static void SetUpTestSuite() { StartServer(); }
  static void TearDownTestSuite() { StopServer(); }

  void SetUp() override {
    if (GetParam() == "sqlite") {
      database_ = dir_.File("store.telemetry.db");
      return;
    }
    if (server_ == nullptr) GTEST_SKIP() << PostgresServer::UnavailableReason();
    database_ = NewDatabase();
  }

  std::unique_ptr<TelemetryStore> OpenStore() {
    absl::StatusOr<std::unique_ptr<TelemetryStore>> store =
        TelemetryStore::Open(database_, Durability::kProcessCrash);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  static std::vector<Row> Scan(TelemetryStore& store) {
    std::vector<Row> rows;
    absl::Status st = store.ScanSamples([&](const TelemetryRow& r) {
      rows.push_back({r.instance_id, r.resolution, r.timestamp, r.cpu_cores, r.memory_bytes,
                      r.gpu_utilization, r.gpu_memory_bytes, r.qps, r.latency_ms, r.oom,
                      r.cpu_request_cores});
    });
    EXPECT_TRUE(st.ok()) << st;
    return rows;
  }

  // A workload with two series: "pod-0" (no container) and "pod-1"/"sidecar". Returns their
  // ids as stored.
  struct Fixture {
    int64_t workload = 0, a = 0, b = 0;
  };
  Fixture Register(TelemetryStore& store) {
    Fixture f;
    absl::StatusOr<int64_t> w = store.PutWorkload(1, NamedWorkload("default/ranker"));
    EXPECT_TRUE(w.ok()) << w.status();
    f.workload = w.value_or(0);
    const StoredInstance instances[] = {
        {.id = 1, .workload_id = f.workload, .name = "pod-0"},
        {.id = 2, .workload_id = f.workload, .name = "pod-1", .container = "sidecar"}};
    absl::StatusOr<std::vector<int64_t>> ids = store.Append(instances, {});
    EXPECT_TRUE(ids.ok()) << ids.status();
    if (ids.ok() && ids->size() == 2) {
      f.a = (*ids)[0];
      f.b = (*ids)[1];
    }
    return f;
  }

  ScopedTempDir dir_;
  std::string database_;
};

TEST_P(TelemetryConformanceTest, StoredRowsLoadBackAndScanInTimeOrder) {
  std::unique_ptr<TelemetryStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const Fixture f = Register(*store);
  EXPECT_NE(f.a, f.b);
  const TelemetryRow rows[] = {Sample(f.b, 1050, 2, 20), Sample(f.a, 1000, 1, 10),
                               Sample(f.a, 1100.25, 3, 30)};
  ASSERT_TRUE(store->Append({}, rows).ok());

  absl::StatusOr<std::vector<StoredWorkload>> workloads = store->LoadWorkloads();
  ASSERT_TRUE(workloads.ok()) << workloads.status();
  ASSERT_EQ(workloads->size(), 1u);
  EXPECT_EQ((*workloads)[0].id, f.workload);
  EXPECT_EQ((*workloads)[0].workload.name(), "default/ranker");
  absl::StatusOr<std::vector<StoredInstance>> instances = store->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  ASSERT_EQ(instances->size(), 2u);
  EXPECT_EQ((*instances)[0].id, f.a);
  EXPECT_EQ((*instances)[0].name, "pod-0");
  EXPECT_EQ((*instances)[0].container, "");
  EXPECT_EQ((*instances)[1].id, f.b);
  EXPECT_EQ((*instances)[1].workload_id, f.workload);
  EXPECT_EQ((*instances)[1].container, "sidecar");
  const Row a0{f.a, 0, 1000, 1, 10, 0.25, 5, 100, 8, false, 0.5};
  const Row b0{f.b, 0, 1050, 2, 20, 0.5, 10, 200, 16, false, 0.5};
  const Row a1{f.a, 0, 1100.25, 3, 30, 0.75, 15, 300, 24, false, 0.5};
  EXPECT_THAT(Scan(*store), ElementsAre(a0, b0, a1));
  EXPECT_THAT(store->CountSamples(), HoldsValue(3));
}

TEST_P(TelemetryConformanceTest, PutWorkloadReplacesTheRecordOfTheSameName) {
  std::unique_ptr<TelemetryStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<int64_t> first = store->PutWorkload(1, NamedWorkload("default/ranker", 2));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<int64_t> again = store->PutWorkload(*first, NamedWorkload("default/ranker", 9));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  absl::StatusOr<std::vector<StoredWorkload>> workloads = store->LoadWorkloads();
  ASSERT_TRUE(workloads.ok()) << workloads.status();
  ASSERT_EQ(workloads->size(), 1u);
  EXPECT_EQ((*workloads)[0].workload.max_replicas(), 9);
}

// Two samples of one series at one time: the second violates the key, and nothing of the
// call is stored, not even the instance it registers.
TEST_P(TelemetryConformanceTest, AppendStoresNothingWhenAnyRowIsRefused) {
  std::unique_ptr<TelemetryStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const Fixture f = Register(*store);
  const StoredInstance extra{.id = 3, .workload_id = f.workload, .name = "pod-2"};
  const TelemetryRow rows[] = {Sample(3, 1000, 1, 10), Sample(3, 1000, 2, 20)};
  EXPECT_THAT(store->Append({extra}, rows).status(), StatusIs(StatusCode::kInternal, ::testing::_));
  EXPECT_THAT(Scan(*store), IsEmpty());
  absl::StatusOr<std::vector<StoredInstance>> instances = store->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  EXPECT_EQ(instances->size(), 2u);
  // The store goes on: the same rows, one of them only, are taken.
  ASSERT_TRUE(store->Append({extra}, {rows[0]}).ok());
  EXPECT_THAT(store->CountSamples(), HoldsValue(1));
}

// Raw rows older than the raw retention (rounded down to a whole bucket) fold into buckets:
// means of CPU, GPU, QPS, latency and requests, peaks of memory and GPU memory, any OOM;
// buckets older than the bucket retention go. The same rows on both backends.
TEST_P(TelemetryConformanceTest, CompactFoldsAndDeletesTheSameRows) {
  std::unique_ptr<TelemetryStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const Fixture f = Register(*store);
  TelemetryRow old_bucket = Sample(f.a, 0, 9, 90);
  old_bucket.resolution = 600;
  TelemetryRow oom = Sample(f.a, 1100, 3, 30);
  oom.oom = true;
  const TelemetryRow rows[] = {old_bucket,
                               Sample(f.a, 1000, 1, 10),
                               oom,
                               Sample(f.b, 1050, 2, 20),
                               Sample(f.a, 1200, 4, 40),
                               Sample(f.a, 1700, 5, 50)};
  ASSERT_TRUE(store->Append({}, rows).ok());
  const RetentionPolicy policy{
      .raw_retention_seconds = 60, .bucket_seconds = 600, .bucket_retention_seconds = 700};
  // now 1300: raw rows before 1200 fold (1240 rounded down to a bucket), buckets before 600 go.
  EXPECT_THAT(store->Compact(policy, /*now=*/1300), HoldsValue(4));
  const Row a_bucket{f.a, 600, 600, 2, 30, 0.5, 15, 200, 16, true, 0.5};
  const Row b_bucket{f.b, 600, 600, 2, 20, 0.5, 10, 200, 16, false, 0.5};
  const Row a_raw{f.a, 0, 1200, 4, 40, 1, 20, 400, 32, false, 0.5};
  const Row a_new{f.a, 0, 1700, 5, 50, 1.25, 25, 500, 40, false, 0.5};
  EXPECT_THAT(Scan(*store), ElementsAre(a_bucket, b_bucket, a_raw, a_new));

  // A later compaction merges into the bucket that exists: the later mean, the larger peak.
  TelemetryRow late = Sample(f.a, 1150, 6, 5);
  ASSERT_TRUE(store->Append({}, {late}).ok());
  EXPECT_THAT(store->Compact(policy, /*now=*/1300), HoldsValue(1));
  const Row merged{f.a, 600, 600, 6, 30, 1.5, 15, 600, 48, true, 0.5};
  EXPECT_THAT(Scan(*store), ElementsAre(merged, b_bucket, a_raw, a_new));

  // Dropped instances go with the compaction.
  const int64_t drop[] = {f.b};
  ASSERT_TRUE(store->Compact(policy, /*now=*/1300, drop).ok());
  absl::StatusOr<std::vector<StoredInstance>> instances = store->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  ASSERT_EQ(instances->size(), 1u);
  EXPECT_EQ((*instances)[0].id, f.a);
}

TEST_P(TelemetryConformanceTest, ANewerSchemaIsRefusedNamingBothVersions) {
  OpenStore().reset();
  if (GetParam() == "sqlite") {
    ExecSql(database_, "PRAGMA user_version=99");
    EXPECT_THAT(TelemetryStore::Open(database_, Durability::kProcessCrash).status(),
                StatusIs(StatusCode::kFailedPrecondition,
                         Eq(absl::StrCat("database \"", database_,
                                         "\": schema version 99 is newer than this binary's 3"))));
    return;
  }
  ASSERT_TRUE(
      server_
          ->Exec(db_name_, "UPDATE evoscale_schema SET version = 99 WHERE component = 'telemetry'")
          .ok());
  EXPECT_THAT(TelemetryStore::Open(database_, Durability::kProcessCrash).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       Eq(absl::StrCat("database \"", database_,
                                       "\": schema version 99 is newer than this binary's 1 (the "
                                       "telemetry tables): run a newer evoscaled"))));
}

INSTANTIATE_TEST_SUITE_P(Backends, TelemetryConformanceTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Two stores on one PostgreSQL database, as two evoscaled replicas.
class TelemetryReplicasTest : public ::testing::Test, public PostgresFixture {
 protected:
  static void SetUpTestSuite() { StartServer(); }
  static void TearDownTestSuite() { StopServer(); }

  void SetUp() override {
    if (server_ == nullptr) GTEST_SKIP() << PostgresServer::UnavailableReason();
    const std::string uri = NewDatabase();
    for (auto* store : {&a_, &b_}) {
      absl::StatusOr<std::unique_ptr<TelemetryStore>> opened =
          TelemetryStore::Open(uri, Durability::kProcessCrash);
      ASSERT_TRUE(opened.ok()) << opened.status();
      *store = *std::move(opened);
    }
  }

  std::unique_ptr<TelemetryStore> a_, b_;
};

// Ids come from the database: each replica's own counter would give both workloads id 1.
TEST_F(TelemetryReplicasTest, TwoReplicasRegisteringTheSameInstanceGetOneRow) {
  absl::StatusOr<int64_t> wa = a_->PutWorkload(1, NamedWorkload("default/ranker"));
  absl::StatusOr<int64_t> wb = b_->PutWorkload(1, NamedWorkload("default/ranker"));
  absl::StatusOr<int64_t> other = b_->PutWorkload(1, NamedWorkload("default/search"));
  ASSERT_TRUE(wa.ok() && wb.ok() && other.ok());
  EXPECT_EQ(*wa, *wb);
  EXPECT_NE(*other, *wa);

  const StoredInstance pod{.id = 1, .workload_id = *wa, .name = "pod-0"};
  absl::StatusOr<std::vector<int64_t>> ia = a_->Append({pod}, {Sample(1, 1000, 1, 10)});
  // Replica B's own counter says 7; the database's id wins, and B's row goes under it.
  StoredInstance pod_b = pod;
  pod_b.id = 7;
  absl::StatusOr<std::vector<int64_t>> ib = b_->Append({pod_b}, {Sample(7, 1001, 2, 20)});
  ASSERT_TRUE(ia.ok()) << ia.status();
  ASSERT_TRUE(ib.ok()) << ib.status();
  ASSERT_EQ(ia->size(), 1u);
  EXPECT_THAT(*ib, ElementsAre((*ia)[0]));
  absl::StatusOr<std::vector<StoredInstance>> instances = a_->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  ASSERT_EQ(instances->size(), 1u);
  std::vector<int64_t> owners;
  ASSERT_TRUE(
      a_->ScanSamples([&](const TelemetryRow& r) { owners.push_back(r.instance_id); }).ok());
  EXPECT_THAT(owners, ElementsAre((*ia)[0], (*ia)[0]));
}

TEST_F(TelemetryReplicasTest, OneReplicaHoldsTheChoreLeaseAndAnotherTakesItWhenItCloses) {
  // A opened first and took it at once; B asks and is refused, for as long as A lives.
  EXPECT_TRUE(a_->chore_leader());
  EXPECT_FALSE(b_->chore_leader());
  EXPECT_THAT(a_->TakeChoreLease(), HoldsValue(true));
  EXPECT_THAT(b_->TakeChoreLease(), HoldsValue(false));
  EXPECT_FALSE(b_->chore_leader());
  a_.reset();
  EXPECT_THAT(b_->TakeChoreLease(), HoldsValue(true));
  EXPECT_TRUE(b_->chore_leader());
}

// A replica that dies does not let go: its session does, when the server ends it. The next
// replica to ask then holds the lease; the dead one's store, reconnected, no longer does.
TEST_F(TelemetryReplicasTest, TheChoreLeaseOfAReplicaWhoseSessionEndedGoesToTheNextToAsk) {
  ASSERT_TRUE(a_->chore_leader());
  ASSERT_TRUE(server_
                  ->Exec(db_name_,
                         "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = "
                         "'advisory' AND classid = 1702260597 AND objid = 1 AND granted")
                  .ok());
  EXPECT_TRUE(::evoscale::testing::AwaitCondition(
      [&] {
        absl::StatusOr<bool> held = b_->TakeChoreLease();
        return held.ok() && *held;
      },
      absl::Seconds(30)))
      << "replica B never took the chore lease";
  EXPECT_THAT(a_->TakeChoreLease(), HoldsValue(false));
  EXPECT_FALSE(a_->chore_leader());
}

// What A stores, B reads as changes: the workload, its instance and the raw samples in the
// order they were appended; its own writes come back too, and nothing twice.
TEST_F(TelemetryReplicasTest, ReadChangesReturnsWhatAnotherReplicaStoredSinceTheLastLook) {
  ASSERT_TRUE(b_->LoadWorkloads().ok());
  ASSERT_TRUE(b_->LoadInstances().ok());
  absl::StatusOr<int64_t> w = a_->PutWorkload(1, NamedWorkload("default/ranker", 3));
  ASSERT_TRUE(w.ok()) << w.status();
  const StoredInstance pod{.id = 1, .workload_id = *w, .name = "pod-0", .container = "app"};
  absl::StatusOr<std::vector<int64_t>> ids =
      a_->Append({pod}, {Sample(1, 1000, 1, 10), Sample(1, 1010, 2, 20)});
  ASSERT_TRUE(ids.ok()) << ids.status();

  absl::StatusOr<TelemetryChanges> changes = b_->ReadChanges();
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->workloads.size(), 1u);
  EXPECT_EQ(changes->workloads[0].id, *w);
  EXPECT_EQ(changes->workloads[0].workload.max_replicas(), 3);
  ASSERT_EQ(changes->instances.size(), 1u);
  EXPECT_EQ(changes->instances[0].id, (*ids)[0]);
  EXPECT_EQ(changes->instances[0].container, "app");
  ASSERT_EQ(changes->rows.size(), 2u);
  EXPECT_EQ(changes->rows[0].instance_id, (*ids)[0]);
  EXPECT_EQ(changes->rows[0].timestamp, 1000);
  EXPECT_EQ(changes->rows[1].timestamp, 1010);

  // Nothing new: nothing again. Then one more sample, and a compaction's buckets, which are
  // not changes (they fold samples every replica has read).
  changes = b_->ReadChanges();
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->workloads.empty() && changes->instances.empty() && changes->rows.empty());
  ASSERT_TRUE(a_->Append({}, {Sample((*ids)[0], 5000, 3, 30)}).ok());
  const RetentionPolicy policy{
      .raw_retention_seconds = 60, .bucket_seconds = 600, .bucket_retention_seconds = 1e9};
  ASSERT_TRUE(a_->Compact(policy, /*now=*/4000).ok());
  changes = b_->ReadChanges();
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->workloads.empty());
  EXPECT_TRUE(changes->instances.empty());
  ASSERT_EQ(changes->rows.size(), 1u);
  EXPECT_EQ(changes->rows[0].timestamp, 5000);
  EXPECT_EQ(changes->rows[0].resolution, 0);
}

}  // namespace
}  // namespace evoscale::service
