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

template <typename M>
M ParseText(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

v1::Study DemoStudy() {
  return ParseText<v1::Study>(R"pb(
    display_name: "demo"
    state: ACTIVE
    spec {
      metrics { name: "loss" goal: MINIMIZE }
      parameters {
        name: "x"
        double_spec { min: 0 max: 1 }
      }
      max_trials: 10
    }
    create_time { seconds: 1700000000 }
  )pb");
}

v1::Trial DemoTrial(int64_t id, v1::Trial::State state) {
  v1::Trial t = ParseText<v1::Trial>(R"pb(
    parameters { name: "x" double_value: 0.25 }
    client_id: "worker-1"
  )pb");
  t.set_id(id);
  t.set_state(state);
  if (state == v1::Trial::SUCCEEDED)
    (*t.mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
  return t;
}

// Runs one statement on its own connection (as another process would).
void ExecSql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK) << path;
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

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

TEST_F(StoreTest, OpenCreatesTheLatestSchema) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 2);
  EXPECT_EQ(Store::kSchemaVersion, 2);
  EXPECT_TRUE(LoadAll(*store).empty());
}

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

TEST_F(StoreTest, ReopenKeepsSchemaVersion) {
  OpenStore().reset();
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 2);
}

TEST_F(StoreTest, WrittenBatchLoadsBackWithNamesFilledIn) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.PutStudy(7, DemoStudy());
  batch.PutTrial(7, DemoTrial(1, v1::Trial::ACTIVE), 0);
  batch.PutTrial(7, DemoTrial(2, v1::Trial::SUCCEEDED), 1);
  ASSERT_TRUE(store->Write(batch).ok());

  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, 7);
  v1::Study want_study = DemoStudy();
  want_study.set_name("studies/7");
  EXPECT_TRUE(MessageDifferencer::Equals(all[0].study, want_study)) << all[0].study.DebugString();
  ASSERT_EQ(all[0].trials.size(), 2u);
  v1::Trial want1 = DemoTrial(1, v1::Trial::ACTIVE);
  want1.set_name("studies/7/trials/1");
  v1::Trial want2 = DemoTrial(2, v1::Trial::SUCCEEDED);
  want2.set_name("studies/7/trials/2");
  EXPECT_TRUE(MessageDifferencer::Equals(all[0].trials[0].trial, want1));
  EXPECT_TRUE(MessageDifferencer::Equals(all[0].trials[1].trial, want2));
  EXPECT_EQ(all[0].trials[0].completion_seq, 0);
  EXPECT_EQ(all[0].trials[1].completion_seq, 1);
}

TEST_F(StoreTest, WrittenBatchSurvivesReopen) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.PutStudy(1, DemoStudy());
    batch.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);
    ASSERT_TRUE(store->Write(batch).ok());
  }
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].study.display_name(), "demo");
  ASSERT_EQ(all[0].trials.size(), 1u);
  EXPECT_EQ(all[0].trials[0].trial.state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(all[0].trials[0].completion_seq, 1);
}

TEST_F(StoreTest, PutOverwritesStudyAndTrial) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WriteBatch first;
  first.PutStudy(1, DemoStudy());
  first.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
  ASSERT_TRUE(store->Write(first).ok());
  WriteBatch second;
  v1::Study renamed = DemoStudy();
  renamed.set_display_name("renamed");
  renamed.set_state(v1::Study::COMPLETED);
  second.PutStudy(1, renamed);
  second.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);
  ASSERT_TRUE(store->Write(second).ok());

  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].study.display_name(), "renamed");
  EXPECT_EQ(all[0].study.state(), v1::Study::COMPLETED);
  ASSERT_EQ(all[0].trials.size(), 1u);
  EXPECT_EQ(all[0].trials[0].trial.state(), v1::Trial::SUCCEEDED);
  EXPECT_EQ(all[0].trials[0].completion_seq, 1);
}

TEST_F(StoreTest, DeleteStudyRemovesItsTrials) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.PutStudy(1, DemoStudy());
  batch.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
  batch.PutStudy(2, DemoStudy());
  batch.PutTrial(2, DemoTrial(1, v1::Trial::ACTIVE), 0);
  ASSERT_TRUE(store->Write(batch).ok());
  WriteBatch del;
  del.DeleteStudy(1);
  ASSERT_TRUE(store->Write(del).ok());

  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, 2);
  EXPECT_EQ(all[0].trials.size(), 1u);
}

TEST_F(StoreTest, FailingBatchWritesNothing) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WriteBatch good;
  good.PutStudy(1, DemoStudy());
  good.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
  ASSERT_TRUE(store->Write(good).ok());

  // Earlier ops of the batch are valid on their own; the last one breaks the foreign key.
  WriteBatch bad;
  bad.PutStudy(2, DemoStudy());
  bad.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);
  bad.PutTrial(1, DemoTrial(2, v1::Trial::ACTIVE), 0);
  bad.PutTrial(99, DemoTrial(1, v1::Trial::ACTIVE), 0);
  EXPECT_THAT(store->Write(bad), StatusIs(StatusCode::kInternal,
                                          Eq("sqlite: put trial: FOREIGN KEY constraint failed")));

  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, 1);
  ASSERT_EQ(all[0].trials.size(), 1u);
  EXPECT_EQ(all[0].trials[0].trial.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(all[0].trials[0].completion_seq, 0);

  // The transaction was rolled back: the store takes the next batch.
  WriteBatch next;
  next.PutStudy(2, DemoStudy());
  EXPECT_TRUE(store->Write(next).ok());
  EXPECT_EQ(LoadAll(*store).size(), 2u);
}

// Group commit: batches queued before a wait commit together, in ticket order, each in its
// own savepoint.
TEST_F(StoreTest, QueuedBatchesCommitTogetherInTicketOrderAndABadOneFailsAlone) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WriteBatch study;
  study.PutStudy(1, DemoStudy());
  ASSERT_TRUE(store->Write(study).ok());
  const int64_t commits_before = store->commits();

  WriteBatch first, bad, last;
  first.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
  bad.PutTrial(1, DemoTrial(2, v1::Trial::ACTIVE), 0);
  bad.PutTrial(99, DemoTrial(1, v1::Trial::ACTIVE), 0);     // breaks the foreign key
  last.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);  // overwrites `first`
  absl::StatusOr<uint64_t> t1 = store->Enqueue(first);
  absl::StatusOr<uint64_t> t2 = store->Enqueue(bad);
  absl::StatusOr<uint64_t> t3 = store->Enqueue(last);
  ASSERT_TRUE(t1.ok() && t2.ok() && t3.ok());
  EXPECT_LT(*t1, *t2);
  EXPECT_LT(*t2, *t3);
  EXPECT_EQ(store->last_ticket(), *t3);
  // One wait commits all three in one transaction.
  EXPECT_TRUE(store->WaitDurable(*t3).ok());
  EXPECT_EQ(store->commits(), commits_before + 1);
  EXPECT_TRUE(store->WaitDurable(*t1).ok());
  EXPECT_THAT(store->WaitDurable(*t2),
              StatusIs(StatusCode::kInternal, HasSubstr("FOREIGN KEY constraint failed")));

  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].trials.size(), 1u);  // trial 2 of the bad batch was rolled back
  EXPECT_EQ(all[0].trials[0].trial.state(), v1::Trial::SUCCEEDED);  // `last` won
  EXPECT_EQ(all[0].trials[0].completion_seq, 1);
  // With kProcessCrash a failed batch does not stop the store.
  WriteBatch next;
  next.PutStudy(2, DemoStudy());
  EXPECT_TRUE(store->Write(next).ok());
}

TEST_F(StoreTest, PowerLossStoreStopsAfterAFailedWriteAndKeepsWhatCommitted) {
  {
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(path_, Durability::kPowerLoss);
    ASSERT_TRUE(opened.ok()) << opened.status();
    Store& store = **opened;
    EXPECT_TRUE(store.defers_sync());
    WriteBatch study;
    study.PutStudy(1, DemoStudy());
    ASSERT_TRUE(store.Write(study).ok());
    WriteBatch good, bad;
    good.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
    bad.PutTrial(99, DemoTrial(1, v1::Trial::ACTIVE), 0);
    absl::StatusOr<uint64_t> tg = store.Enqueue(good);
    absl::StatusOr<uint64_t> tb = store.Enqueue(bad);
    ASSERT_TRUE(tg.ok() && tb.ok());
    // The service has already shown these writes, so any failure stops the store.
    EXPECT_THAT(store.WaitDurable(*tb),
                StatusIs(StatusCode::kUnavailable,
                         AllOf(HasSubstr("FOREIGN KEY constraint failed"), HasSubstr("restart"))));
    EXPECT_THAT(store.WaitDurable(*tg), StatusIs(StatusCode::kUnavailable, HasSubstr("restart")));
    WriteBatch later;
    later.PutStudy(2, DemoStudy());
    EXPECT_THAT(store.Enqueue(later).status(),
                StatusIs(StatusCode::kUnavailable, HasSubstr("restart")));
    EXPECT_THAT(store.Write(later), StatusIs(StatusCode::kUnavailable, HasSubstr("restart")));
  }
  // What committed is intact: the study and the good batch (its savepoint was released
  // before the bad one's was rolled back), nothing of the bad batch or of the later one.
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<StoredStudy> all = LoadAll(*store);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].trials.size(), 1u);
  EXPECT_EQ(all[0].trials[0].trial.state(), v1::Trial::ACTIVE);
}

TEST_F(StoreTest, ConcurrentWritersAllLandInTheirOwnOrder) {
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(path_, Durability::kPowerLoss);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  WriteBatch study;
  study.PutStudy(1, DemoStudy());
  ASSERT_TRUE(store.Write(study).ok());
  constexpr int kThreads = 8, kWrites = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      // Each thread owns trial w + 1 and writes it kWrites times: step k stores k as the
      // completion order, so the last write must win.
      for (int k = 1; k <= kWrites; ++k) {
        WriteBatch b;
        b.PutTrial(1, DemoTrial(w + 1, v1::Trial::ACTIVE), k);
        if (!store.Write(b).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(store.commits(), 1 + kThreads * kWrites);
  std::vector<StoredStudy> all = LoadAll(store);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].trials.size(), static_cast<size_t>(kThreads));
  for (const StoredTrial& t : all[0].trials) EXPECT_EQ(t.completion_seq, kWrites) << t.trial.id();
}

TEST_F(StoreTest, EmptyBatchIsOk) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Write(WriteBatch()).ok());
}

TEST_F(StoreTest, UnreadableTrialRecordIsDataLoss) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.PutStudy(3, DemoStudy());
    batch.PutTrial(3, DemoTrial(1, v1::Trial::ACTIVE), 0);
    ASSERT_TRUE(store->Write(batch).ok());
  }
  ExecSql(path_, "UPDATE trials SET body = x'ffffffff'");
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->LoadAll().status(),
              StatusIs(StatusCode::kDataLoss, Eq("study 3 trial 1: unreadable record")));
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
