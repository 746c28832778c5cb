// Tests of service/store.h on real SQLite files in a temp dir.
#include "service/store/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "evoscale/v1/study.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "service/store/internal/sqlite.h"
#include "service/store/telemetry_store.h"
#include "tests/service/store/store_test_data.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::absl::StatusCode;
using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

class StoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path_, Durability::kProcessCrash);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::vector<StoredStudy> LoadAll(Store& store) {
    absl::StatusOr<std::vector<StoredStudy>> all = store.LoadAll();
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? *std::move(all) : std::vector<StoredStudy>{};
  }

  ScopedTempDir dir_;
  const std::string path_ = dir_.File("store.db");
};

TEST_F(StoreTest, OpensAVersion1DatabaseAndMigratesItKeepingItsStudies) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE studies(id INTEGER PRIMARY KEY, display_name TEXT NOT "
                           "NULL, state INTEGER NOT NULL, body BLOB NOT NULL);"
                           "CREATE TABLE trials(study_id INTEGER NOT NULL REFERENCES studies(id) "
                           "ON DELETE CASCADE, id INTEGER NOT NULL, state INTEGER NOT NULL, "
                           "client_id TEXT NOT NULL, completion_seq INTEGER NOT NULL, body BLOB "
                           "NOT NULL, PRIMARY KEY(study_id, id)) WITHOUT ROWID;"
                           "INSERT INTO studies VALUES(5, 'old', 1, x'');"
                           "PRAGMA user_version=1;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 2);
  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].study.name(), "studies/5");
  absl::StatusOr<int64_t> next = store->NextStudyId();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 6);
}

TEST_F(StoreTest, GarbageFileIsDataLossNamingThePath) {
  {
    std::ofstream out(path_, std::ios::binary);
    out << std::string(8192, '\xab');
  }
  EXPECT_THAT(Store::Open(path_, Durability::kProcessCrash).status(),
              StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr("database \"" + path_ + "\""),
                                                    HasSubstr("file is not a database"))));
}

TEST_F(StoreTest, NewerSchemaIsFailedPrecondition) {
  ExecSql(path_, "PRAGMA user_version=99");
  EXPECT_THAT(Store::Open(path_, Durability::kPowerLoss).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       Eq(absl::StrCat("database \"", path_,
                                       "\": schema version 99 is newer than this "
                                       "binary's ",
                                       Store::kSchemaVersion))));
}

TEST_F(StoreTest, MissingDirectoryIsFailedPreconditionNamingThePath) {
  const std::string path = dir_.File("no/such/dir/store.db");
  EXPECT_THAT(
      Store::Open(path, Durability::kProcessCrash).status(),
      StatusIs(StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("\"" + path + "\""), HasSubstr("No such file or directory"))));
}

TEST_F(StoreTest, SecondOpenOfTheSameDatabaseFailsNamingTheHolderUntilTheFirstCloses) {
  std::unique_ptr<Store> first = OpenStore();
  ASSERT_NE(first, nullptr);
  WriteBatch batch;
  batch.PutStudy(1, DemoStudy());
  ASSERT_TRUE(first->Write(batch).ok());
  EXPECT_THAT(Store::Open(path_, Durability::kPowerLoss).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       Eq(absl::StrCat("database \"", path_,
                                       "\" is in use by another evoscaled "
                                       "(pid ",
                                       getpid(), ", lock \"", path_,
                                       ".lock\"): one "
                                       "evoscaled serves a database; stop that one or give "
                                       "another --db"))));
  // The refused open wrote nothing: the first store's data and its lock are as they were.
  EXPECT_EQ(LoadAll(*first).size(), 1u);
  EXPECT_THAT(Store::Open(path_, Durability::kProcessCrash).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("in use")));
  first.reset();
  std::unique_ptr<Store> again = OpenStore();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(LoadAll(*again).size(), 1u);
}

TEST_F(StoreTest, TelemetryStoreTakesItsOwnLock) {
  const std::string telemetry = dir_.File("store.telemetry.db");
  absl::StatusOr<std::unique_ptr<TelemetryStore>> first =
      TelemetryStore::Open(telemetry, Durability::kProcessCrash);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(
      TelemetryStore::Open(telemetry, Durability::kProcessCrash).status(),
      StatusIs(StatusCode::kFailedPrecondition,
               HasSubstr(absl::StrCat("database \"", telemetry,
                                      "\" is in use by another evoscaled (pid ", getpid()))));
}

// A telemetry database of schema 1 (before containers, and with workloads that held
// latency_slo_ms) opens as schema 2: its instances are the unnamed container of each, and a
// workload's latency objective comes back in seconds.
TEST_F(StoreTest, TelemetryStoreMigratesSchema1ToContainersAndSeconds) {
  const std::string telemetry = dir_.File("old.telemetry.db");
  {
    v1::Workload w;
    w.set_name("default/ranker");
    w.set_max_replicas(4);
    std::string body = w.SerializeAsString();
    body += '\x39';  // field 7 (latency_slo_ms), 64-bit: the double 250.0 as schema 1 wrote it
    const double ms = 250;
    body.append(reinterpret_cast<const char*>(&ms), sizeof ms);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(telemetry.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE workloads(id INTEGER PRIMARY KEY, name TEXT NOT NULL "
                           "UNIQUE, body BLOB NOT NULL);"
                           "CREATE TABLE instances(id INTEGER PRIMARY KEY, workload_id INTEGER "
                           "NOT NULL REFERENCES workloads(id) ON DELETE CASCADE, name TEXT NOT "
                           "NULL, UNIQUE(workload_id, name));"
                           "CREATE TABLE samples(instance_id INTEGER NOT NULL, resolution "
                           "INTEGER NOT NULL, ts REAL NOT NULL, cpu REAL NOT NULL, mem REAL NOT "
                           "NULL, gpu_util REAL NOT NULL, gpu_mem REAL NOT NULL, qps REAL NOT "
                           "NULL, latency REAL NOT NULL, oom INTEGER NOT NULL, "
                           "PRIMARY KEY(resolution, ts, instance_id)) WITHOUT ROWID;"
                           "PRAGMA user_version=1;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_stmt* put = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO workloads VALUES(1, 'default/ranker', ?1)", -1,
                                 &put, nullptr),
              SQLITE_OK);
    sqlite3_bind_blob(put, 1, body.data(), body.size(), SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(put), SQLITE_DONE);
    sqlite3_finalize(put);
    ASSERT_EQ(sqlite3_exec(db,
                           "INSERT INTO instances VALUES(3, 1, 'pod-0');"
                           "INSERT INTO samples VALUES(3, 0, 1700000000, 1, 2, 0, 0, 5, 20, 0);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  absl::StatusOr<std::unique_ptr<TelemetryStore>> store =
      TelemetryStore::Open(telemetry, Durability::kProcessCrash);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::vector<StoredWorkload>> workloads = (*store)->LoadWorkloads();
  ASSERT_TRUE(workloads.ok()) << workloads.status();
  ASSERT_EQ(workloads->size(), 1u);
  const v1::Workload& w = (*workloads)[0].workload;
  EXPECT_DOUBLE_EQ(w.latency_slo_seconds(), 0.25);
  EXPECT_EQ(w.max_replicas(), 4);
  EXPECT_EQ(w.GetReflection()->GetUnknownFields(w).field_count(), 0);
  absl::StatusOr<std::vector<StoredInstance>> instances = (*store)->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  ASSERT_EQ(instances->size(), 1u);
  EXPECT_EQ((*instances)[0].id, 3);
  EXPECT_EQ((*instances)[0].name, "pod-0");
  EXPECT_EQ((*instances)[0].container, "");
  int scanned = 0;
  ASSERT_TRUE((*store)
                  ->ScanSamples([&](const TelemetryRow& r) {
                    ++scanned;
                    EXPECT_EQ(r.instance_id, 3);
                    EXPECT_DOUBLE_EQ(r.latency_ms, 20);
                  })
                  .ok());
  EXPECT_EQ(scanned, 1);
  // One instance may now have several containers; each (instance, container) once.
  const StoredInstance sidecar{.id = 4, .workload_id = 1, .name = "pod-0", .container = "envoy"};
  EXPECT_TRUE((*store)->Append({sidecar}, {}).ok());
  const StoredInstance again{.id = 5, .workload_id = 1, .name = "pod-0", .container = ""};
  EXPECT_FALSE((*store)->Append({again}, {}).ok());
}

// Schema 3 keeps each sample's reported CPU request: the migrated rows read 0 (not reported),
// new rows keep theirs, and folding raw samples into a bucket keeps their mean.
TEST_F(StoreTest, TelemetryStoreKeepsReportedCpuRequestsThroughBuckets) {
  const std::string telemetry = dir_.File("requests.telemetry.db");
  absl::StatusOr<std::unique_ptr<TelemetryStore>> store =
      TelemetryStore::Open(telemetry, Durability::kProcessCrash);
  ASSERT_TRUE(store.ok()) << store.status();
  v1::Workload w;
  w.set_name("default/ranker");
  ASSERT_TRUE((*store)->PutWorkload(1, w).ok());
  const StoredInstance pod{.id = 1, .workload_id = 1, .name = "pod-0"};
  std::vector<TelemetryRow> rows;
  for (double request : {0.25, 0.75}) {
    rows.push_back({.instance_id = 1, .timestamp = 1000.0 + 100 * rows.size(), .cpu_cores = 0.1,
                    .cpu_request_cores = request});
  }
  ASSERT_TRUE((*store)->Append({pod}, rows).ok());
  std::vector<double> requests;
  auto scan = [&] {
    requests.clear();
    ASSERT_TRUE((*store)
                    ->ScanSamples([&](const TelemetryRow& r) {
                      requests.push_back(r.cpu_request_cores);
                    })
                    .ok());
  };
  scan();
  EXPECT_THAT(requests, ElementsAre(0.25, 0.75));
  RetentionPolicy policy;
  policy.raw_retention_seconds = 60;
  policy.bucket_seconds = 600;
  ASSERT_TRUE((*store)->Compact(policy, /*now=*/5000).ok());
  scan();
  EXPECT_THAT(requests, ElementsAre(0.5));
}

// Found by the soak bench (the studies WAL reached 14 GB in 10 minutes): the checkpointer's
// connection had never read the database, so it did not know it was in WAL mode and every
// checkpoint did nothing. Now a log longer than the checkpointer's limit is copied into the
// database and emptied (TRUNCATE).
TEST(CheckpointerTest, ALogLongerThanTheLimitIsCopiedAndEmptied) {
  ScopedTempDir dir;
  const std::string path = dir.path() + "/wal.db";
  constexpr const char* kMigrations[] = {"CREATE TABLE t(v BLOB NOT NULL);"};
  absl::StatusOr<sqlite3*> db =
      internal::OpenDatabase(path, Durability::kProcessCrash, kMigrations);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(internal::Exec(*db, "PRAGMA wal_autocheckpoint=0").ok());
  for (int i = 0; i < 200; ++i) {  // 200 commits of a 4 KiB row each: well over 64 frames
    ASSERT_TRUE(internal::Exec(*db, "INSERT INTO t(v) VALUES(zeroblob(4096))").ok());
  }
  const std::string wal = path + "-wal";
  ASSERT_GT(std::filesystem::file_size(wal), 64u * 4096);
  absl::StatusOr<std::unique_ptr<internal::Checkpointer>> checkpointer =
      internal::Checkpointer::Start(path, absl::Milliseconds(10), /*max_log_frames=*/64);
  ASSERT_TRUE(checkpointer.ok()) << checkpointer.status();
  EXPECT_TRUE(::evoscale::testing::AwaitCondition(
      [&] {
        return (*checkpointer)->truncations() >= 1 && std::filesystem::file_size(wal) == 0;
      },
      absl::Seconds(30)))
      << std::filesystem::file_size(wal) << " bytes of WAL left, "
      << (*checkpointer)->truncations() << " truncations";
  // Every row is in the database file now, and writes go on.
  ASSERT_TRUE(internal::Exec(*db, "INSERT INTO t(v) VALUES(zeroblob(16))").ok());
  int64_t rows = 0;
  ASSERT_TRUE(internal::ForEachRow(*db, "SELECT count(*) FROM t", "count", [&](sqlite3_stmt* s) {
                rows = sqlite3_column_int64(s, 0);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(rows, 201);
  checkpointer->reset();
  sqlite3_close(*db);
}

}  // namespace
}  // namespace evoscale::service
