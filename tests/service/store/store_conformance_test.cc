// The study store's conformance suite: every behaviour the service relies on, on each
// backend: a real SQLite file in a temp dir, and a real PostgreSQL server (a throwaway one
// from Debian's binaries, tests/support/postgres_server.h; skipped, saying why, where
// PostgreSQL is not installed). What only one backend has (SQLite's file lock and WAL,
// PostgreSQL's URIs and reconnects) is tested in store_test.cc and store_postgres_test.cc.
#include <sqlite3.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/study.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "service/store/store.h"
#include "tests/service/store/store_test_data.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::absl::StatusCode;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;

// SQLite says "FOREIGN KEY constraint failed", PostgreSQL "violates foreign key constraint".
::testing::Matcher<std::string> ForeignKey() {
  return AnyOf(HasSubstr("FOREIGN KEY constraint failed"), HasSubstr("foreign key constraint"));
}

class StoreConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  // One server for the suite; a database of its own for each test.
  static void SetUpTestSuite() {
    if (!PostgresServer::UnavailableReason().empty()) return;
    absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    if (GetParam() == "sqlite") {
      database_ = dir_.File("store.db");
      return;
    }
    if (server_ == nullptr) GTEST_SKIP() << PostgresServer::UnavailableReason();
    absl::StatusOr<std::string> uri = server_->CreateDatabase(absl::StrCat("store_", ++databases_));
    ASSERT_TRUE(uri.ok()) << uri.status();
    database_ = *uri;
    db_name_ = absl::StrCat("store_", databases_);
  }

  absl::StatusOr<std::unique_ptr<Store>> Open(Durability durability) {
    return Store::Open(database_, durability);
  }
  std::unique_ptr<Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<Store>> store = Open(Durability::kProcessCrash);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::vector<StoredStudy> LoadAll(Store& store) {
    absl::StatusOr<std::vector<StoredStudy>> all = store.LoadAll();
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? *std::move(all) : std::vector<StoredStudy>{};
  }
  // Runs SQL on the database behind the store's back, as another program would.
  void RawExec(const char* sqlite_sql, const char* postgres_sql) {
    if (GetParam() == "sqlite") {
      ExecSql(database_, sqlite_sql);
    } else {
      ASSERT_TRUE(server_->Exec(db_name_, postgres_sql).ok());
    }
  }

  static PostgresServer* server_;
  static int databases_;
  ScopedTempDir dir_;
  std::string database_, db_name_;
};

PostgresServer* StoreConformanceTest::server_ = nullptr;
int StoreConformanceTest::databases_ = 0;

TEST_P(StoreConformanceTest, OpenCreatesTheLatestSchema) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 2);
  EXPECT_EQ(Store::kSchemaVersion, 2);
  EXPECT_TRUE(LoadAll(*store).empty());
}

TEST_P(StoreConformanceTest, ReopenKeepsSchemaVersion) {
  OpenStore().reset();
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), 2);
}

TEST_P(StoreConformanceTest, WrittenBatchLoadsBackWithNamesFilledIn) {
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

TEST_P(StoreConformanceTest, WrittenBatchSurvivesReopen) {
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

TEST_P(StoreConformanceTest, PutOverwritesStudyAndTrial) {
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

TEST_P(StoreConformanceTest, DeleteStudyRemovesItsTrials) {
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

TEST_P(StoreConformanceTest, LoadStudiesSelectsByIdRangeNameAndLimit) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  for (int64_t id : {2, 3, 5, 8}) {
    v1::Study study = DemoStudy();
    study.set_display_name(id % 2 == 0 ? "even" : "odd");
    batch.PutStudy(id, study);
    batch.PutTrial(id, DemoTrial(1, v1::Trial::ACTIVE), 0);
    batch.PutTrial(id, DemoTrial(2, v1::Trial::SUCCEEDED), 1);
  }
  ASSERT_TRUE(store->Write(batch).ok());
  auto ids = [](const std::vector<StoredStudy>& studies) {
    std::vector<int64_t> out;
    for (const StoredStudy& s : studies) out.push_back(s.id);
    return out;
  };
  absl::StatusOr<std::vector<StoredStudy>> page =
      store->LoadStudies(StudyQuery{.after_id = 2, .limit = 2});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(ids(*page), (std::vector<int64_t>{3, 5}));
  ASSERT_EQ((*page)[1].trials.size(), 2u);  // each with its own trials only
  EXPECT_EQ((*page)[1].trials[1].trial.name(), "studies/5/trials/2");

  absl::StatusOr<std::vector<StoredStudy>> named =
      store->LoadStudies(StudyQuery{.display_name = "even", .with_trials = false});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(ids(*named), (std::vector<int64_t>{2, 8}));
  EXPECT_TRUE((*named)[0].trials.empty());
  EXPECT_EQ((*named)[1].study.name(), "studies/8");

  absl::StatusOr<StoredStudy> one = store->LoadStudy(5);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->id, 5);
  EXPECT_EQ(one->trials.size(), 2u);
  absl::StatusOr<StoredStudy> missing = store->LoadStudy(4);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "study \"studies/4\" not found");
}

TEST_P(StoreConformanceTest, FailingBatchWritesNothing) {
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
  EXPECT_THAT(store->Write(bad),
              StatusIs(StatusCode::kInternal, AllOf(HasSubstr("put trial"), ForeignKey())));

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
TEST_P(StoreConformanceTest, QueuedBatchesCommitTogetherInTicketOrderAndABadOneFailsAlone) {
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
  EXPECT_THAT(store->WaitDurable(*t2), StatusIs(StatusCode::kInternal, ForeignKey()));

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

TEST_P(StoreConformanceTest, PowerLossStoreStopsAfterAFailedWriteAndKeepsWhatCommitted) {
  {
    absl::StatusOr<std::unique_ptr<Store>> opened = Open(Durability::kPowerLoss);
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
                StatusIs(StatusCode::kUnavailable, AllOf(ForeignKey(), HasSubstr("restart"))));
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

TEST_P(StoreConformanceTest, ConcurrentWritersAllLandInTheirOwnOrder) {
  absl::StatusOr<std::unique_ptr<Store>> opened = Open(Durability::kPowerLoss);
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

TEST_P(StoreConformanceTest, EmptyBatchIsOk) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Write(WriteBatch()).ok());
}

TEST_P(StoreConformanceTest, UnreadableTrialRecordIsDataLoss) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    WriteBatch batch;
    batch.PutStudy(3, DemoStudy());
    batch.PutTrial(3, DemoTrial(1, v1::Trial::ACTIVE), 0);
    ASSERT_TRUE(store->Write(batch).ok());
  }
  RawExec("UPDATE trials SET body = x'ffffffff'", "UPDATE trials SET body = '\\xffffffff'");
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->LoadAll().status(),
              StatusIs(StatusCode::kDataLoss, Eq("study 3 trial 1: unreadable record")));
}

// Study ids are never reused: the next id is above every id written, deleted ones included,
// also after a reopen.
TEST_P(StoreConformanceTest, NextStudyIdIsAboveEveryIdEverWritten) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->NextStudyId(), 1);
    WriteBatch batch;
    batch.PutStudy(4, DemoStudy());
    batch.PutStudy(9, DemoStudy());
    ASSERT_TRUE(store->Write(batch).ok());
    WriteBatch del;
    del.DeleteStudy(9);
    ASSERT_TRUE(store->Write(del).ok());
    EXPECT_EQ(*store->NextStudyId(), 10);
  }
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->NextStudyId(), 10);
  EXPECT_EQ(LoadAll(*store).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformanceTest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace evoscale::service
