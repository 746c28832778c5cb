// What only the PostgreSQL study store has: URIs (bad ones, passwords), an unreachable, a
// read-only or a newer database, replicas migrating at once, and the server restarting under
// the store. A real throwaway server (tests/support/postgres_server.h); skipped, saying why,
// where PostgreSQL is not installed.
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/store.h"
#include "tests/service/store/store_test_data.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::absl::StatusCode;
using ::evoscale::testing::PostgresServer;
using ::evoscale::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class StorePostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = PostgresServer::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::string> uri = server_->CreateDatabase("evoscale");
    ASSERT_TRUE(uri.ok()) << uri.status();
    uri_ = *uri;
  }

  std::unique_ptr<PostgresServer> server_;
  std::string uri_;
};

TEST_F(StorePostgresTest, AUriLibpqCannotParseIsInvalidArgumentNamingIt) {
  const std::string bad = uri_ + "?no_such_option=1";
  EXPECT_THAT(Store::Open(bad, Durability::kPowerLoss).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("database \"" + bad + "\": not a PostgreSQL URI"),
                             HasSubstr("no_such_option"),
                             HasSubstr("postgresql://USER@HOST:PORT/DATABASE"))));
}

TEST_F(StorePostgresTest, APasswordInTheUriIsRefusedWithoutShowingIt) {
  const std::string with_password =
      absl::StrCat("postgresql://postgres:s3cret@127.0.0.1:", server_->port(), "/evoscale");
  const absl::Status st = Store::Open(with_password, Durability::kPowerLoss).status();
  EXPECT_THAT(
      st, StatusIs(StatusCode::kInvalidArgument,
                   AllOf(HasSubstr("~/.pgpass or PGPASSWORD"),
                         HasSubstr("postgresql://postgres@127.0.0.1:"), Not(HasSubstr("s3cret")))));
}

TEST_F(StorePostgresTest, AnUnreachableServerIsUnavailableNamingTheUri) {
  const std::string uri = uri_;
  server_->Stop(/*immediate=*/false).IgnoreError();
  EXPECT_THAT(Store::Open(uri, Durability::kPowerLoss).status(),
              StatusIs(StatusCode::kUnavailable,
                       AllOf(HasSubstr("database \"" + uri + "\": cannot connect"),
                             HasSubstr("Connection refused"))));
}

TEST_F(StorePostgresTest, AReadOnlyDatabaseIsFailedPrecondition) {
  ASSERT_TRUE(
      server_->Exec("postgres", "ALTER DATABASE evoscale SET default_transaction_read_only = on")
          .ok());
  EXPECT_THAT(Store::Open(uri_, Durability::kPowerLoss).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("read-only transaction"), HasSubstr("25006"))));
}

TEST_F(StorePostgresTest, ANewerSchemaIsFailedPreconditionAndNothingIsWritten) {
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(uri_, Durability::kPowerLoss);
    ASSERT_TRUE(store.ok()) << store.status();
    WriteBatch batch;
    batch.PutStudy(1, DemoStudy());
    ASSERT_TRUE((*store)->Write(batch).ok());
  }
  ASSERT_TRUE(
      server_
          ->Exec("evoscale", "UPDATE evoscale_schema SET version = 99 WHERE component = 'studies'")
          .ok());
  EXPECT_THAT(Store::Open(uri_, Durability::kPowerLoss).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("database \"" + uri_ + "\""),
                             HasSubstr("schema version 99 is newer than this binary's 2"),
                             HasSubstr("run a newer evoscaled"))));
  // Back to the version it had, the study is intact.
  ASSERT_TRUE(
      server_
          ->Exec("evoscale", "UPDATE evoscale_schema SET version = 2 WHERE component = 'studies'")
          .ok());
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(uri_, Durability::kPowerLoss);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::vector<StoredStudy>> all = (*store)->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 1u);
}

// Replicas starting together on an empty database: the migration runs once, under its lock,
// and every one of them opens.
TEST_F(StorePostgresTest, StoresOpeningAtOnceMigrateOnce) {
  constexpr int kStores = 4;
  std::vector<absl::Status> opened(kStores);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back(
        [&, i] { opened[i] = Store::Open(uri_, Durability::kPowerLoss).status(); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& st : opened) EXPECT_TRUE(st.ok()) << st;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(uri_, Durability::kPowerLoss);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->schema_version(), Store::kSchemaVersion);
}

// PostgreSQL going away under a store: a write meanwhile fails UNAVAILABLE and writes nothing;
// once the server is back, the store reconnects by itself and the next write lands.
TEST_F(StorePostgresTest, WritesFailUnavailableWhileTheServerIsDownAndResumeAfter) {
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(uri_, Durability::kProcessCrash);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  WriteBatch first;
  first.PutStudy(1, DemoStudy());
  first.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
  ASSERT_TRUE(store.Write(first).ok());
  ASSERT_TRUE(server_->Stop(/*immediate=*/false).ok());  // a fast shutdown: commits flushed
  WriteBatch lost;
  lost.PutTrial(1, DemoTrial(2, v1::Trial::ACTIVE), 0);
  EXPECT_THAT(store.Write(lost), StatusIs(StatusCode::kUnavailable, HasSubstr("postgresql")));
  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  WriteBatch after;
  after.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);
  EXPECT_TRUE(store.Write(after).ok());
  absl::StatusOr<std::vector<StoredStudy>> all = store.LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  ASSERT_EQ((*all)[0].trials.size(), 1u);  // trial 2 was never written
  EXPECT_EQ((*all)[0].trials[0].trial.state(), v1::Trial::SUCCEEDED);
}

// With kPowerLoss the service shows a write before it is durable, so a failed commit stops
// the store; a PostgreSQL restart (immediate: SIGQUIT, recovery from its WAL) under a steady
// stream of writes is ridden out instead: writes wait, none fails, every acknowledged one is
// there afterwards, and the store goes on.
TEST_F(StorePostgresTest, APowerLossStoreRidesOutAnImmediateRestartLosingNothing) {
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(uri_, Durability::kPowerLoss);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  WriteBatch study;
  study.PutStudy(1, DemoStudy());
  ASSERT_TRUE(store.Write(study).ok());
  constexpr int kWriters = 4;
  std::atomic<bool> stop{false};
  std::vector<std::vector<int64_t>> acknowledged(kWriters);
  std::vector<absl::Status> failed(kWriters);
  std::atomic<int> acks{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int64_t id = w + 1; !stop; id += kWriters) {
        WriteBatch b;
        b.PutTrial(1, DemoTrial(id, v1::Trial::ACTIVE), 0);
        absl::Status st = store.Write(b);
        if (!st.ok()) {
          failed[w] = st;
          return;
        }
        acknowledged[w].push_back(id);
        ++acks;
      }
    });
  }
  ASSERT_TRUE(::evoscale::testing::AwaitCondition([&] { return acks > 20; }));
  ASSERT_TRUE(server_->Stop(/*immediate=*/true).ok());
  absl::SleepFor(absl::Milliseconds(700));  // the outage
  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  const int at_restart = acks;
  EXPECT_TRUE(::evoscale::testing::AwaitCondition([&] { return acks > at_restart + 20; }))
      << "writes did not resume";
  stop = true;
  for (std::thread& t : writers) t.join();
  size_t total = 0;
  for (int w = 0; w < kWriters; ++w) {
    EXPECT_TRUE(failed[w].ok()) << failed[w];
    total += acknowledged[w].size();
  }
  EXPECT_GT(total, 0u);
  absl::StatusOr<std::vector<StoredStudy>> all = store.LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  std::set<int64_t> stored;
  for (const StoredTrial& t : (*all)[0].trials) stored.insert(t.trial.id());
  for (int w = 0; w < kWriters; ++w) {
    for (int64_t id : acknowledged[w]) EXPECT_TRUE(stored.contains(id)) << "trial " << id;
  }
  WriteBatch after;
  after.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);
  EXPECT_TRUE(store.Write(after).ok());
}

}  // namespace
}  // namespace evoscale::service
