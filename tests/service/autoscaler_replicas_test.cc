// Two AutoscalerCores on one PostgreSQL database, as two evoscaled replicas: telemetry
// reported to either counts in both one's recommendations, and only the holder of the chore
// lease compacts. A real throwaway PostgreSQL (tests/support/postgres_server.h; skipped,
// saying why, where PostgreSQL is not installed).
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/clock.h"
#include "service/store/telemetry_store.h"
#include "tests/support/postgres_server.h"

namespace evoscale::service {
namespace {

using ::evoscale::testing::PostgresServer;
using ::google::protobuf::util::MessageDifferencer;

constexpr int64_t kT0 = 1'700'000'040;
constexpr char kWeb[] = "default/web";

// One replica: its store (its own connection) and its core.
struct Replica {
  std::unique_ptr<TelemetryStore> store;
  std::unique_ptr<AutoscalerCore> core;
};

class AutoscalerReplicasTest : public ::testing::Test {
 protected:
  // Samples lie in the first hours after kT0; the clock is a day later, past the raw
  // retention below, so that a compaction has rows to fold.
  AutoscalerReplicasTest() : clock_(absl::FromUnixSeconds(kT0 + 86400)) {}

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
    if (server_ == nullptr) GTEST_SKIP() << PostgresServer::UnavailableReason();
    absl::StatusOr<std::string> uri = server_->CreateDatabase(absl::StrCat("replicas_", ++n_));
    ASSERT_TRUE(uri.ok()) << uri.status();
    uri_ = *uri;
    a_ = Open();
    b_ = Open();
  }

  Replica Open() {
    Replica r;
    absl::StatusOr<std::unique_ptr<TelemetryStore>> store =
        TelemetryStore::Open(uri_, Durability::kProcessCrash);
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return r;
    r.store = *std::move(store);
    const RetentionPolicy retention{.raw_retention_seconds = 3600,
                                    .bucket_seconds = 300,
                                    .bucket_retention_seconds = 35 * 86400.0};
    absl::StatusOr<std::unique_ptr<AutoscalerCore>> core =
        AutoscalerCore::Create(r.store.get(), &clock_, retention);
    EXPECT_TRUE(core.ok()) << core.status();
    if (core.ok()) r.core = *std::move(core);
    return r;
  }

  static void PutWorkload(AutoscalerCore& core, int max_replicas = 0) {
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(kWeb);
    req.mutable_workload()->set_max_replicas(max_replicas);
    ASSERT_TRUE(core.PutWorkload(req).ok());
  }

  // One sample a minute of `instance`, minutes [first, first + count).
  static void Report(AutoscalerCore& core, const std::string& instance, int first, int count) {
    v1::TelemetryBatch batch;
    for (int m = first; m < first + count; ++m) {
      v1::TelemetrySample* s = batch.add_samples();
      s->set_workload(kWeb);
      s->set_instance(instance);
      s->mutable_time()->set_seconds(kT0 + 60 * m);
      s->set_cpu_cores(0.5 + 0.01 * m);
      s->set_memory_bytes(1e8 + 1e6 * m);
      s->set_qps(10 + m);
    }
    v1::ReportTelemetryResponse resp;
    ASSERT_TRUE(core.Ingest(batch, &resp).ok());
    ASSERT_EQ(resp.accepted(), count) << resp.DebugString();
  }

  static int64_t SampleCount(AutoscalerCore& core) {
    v1::GetWorkloadRequest req;
    req.set_name(kWeb);
    absl::StatusOr<v1::Workload> w = core.GetWorkload(req);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? w->sample_count() : -1;
  }

  static v1::Recommendation RecommendationOf(AutoscalerCore& core) {
    v1::GetRecommendationRequest req;
    req.set_workload(kWeb);
    absl::StatusOr<v1::Recommendation> r = core.GetRecommendation(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.value_or(v1::Recommendation());
  }

  static PostgresServer* server_;
  static int n_;
  ManualClock clock_;
  std::string uri_;
  Replica a_, b_;
};

PostgresServer* AutoscalerReplicasTest::server_ = nullptr;
int AutoscalerReplicasTest::n_ = 0;

TEST_F(AutoscalerReplicasTest, TelemetryReportedToOneReplicaCountsInTheOthersRecommendation) {
  PutWorkload(*a_.core, /*max_replicas=*/4);
  // B learns the workload from the database, with its definition.
  v1::ListWorkloadsResponse listed = b_.core->ListWorkloads();
  ASSERT_EQ(listed.workloads_size(), 1);
  EXPECT_EQ(listed.workloads(0).max_replicas(), 4);

  Report(*a_.core, "web-0", 0, 30);
  EXPECT_EQ(SampleCount(*b_.core), 30);
  // Fed the same samples in the same order, B's models answer as A's.
  const v1::Recommendation from_a = RecommendationOf(*a_.core);
  const v1::Recommendation from_b = RecommendationOf(*b_.core);
  EXPECT_TRUE(MessageDifferencer::Equals(from_a, from_b))
      << "A: " << from_a.ShortDebugString() << "\nB: " << from_b.ShortDebugString();

  // And the other way, on a series B starts: both hold both series, under the same ids.
  Report(*b_.core, "web-1", 0, 10);
  Report(*b_.core, "web-0", 30, 5);  // B continues A's series
  EXPECT_EQ(SampleCount(*a_.core), 45);
  EXPECT_EQ(SampleCount(*b_.core), 45);
  EXPECT_EQ(a_.core->series_count(), 2);
  EXPECT_EQ(b_.core->series_count(), 2);
  absl::StatusOr<std::vector<StoredInstance>> instances = a_.store->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  EXPECT_EQ(instances->size(), 2u);
  EXPECT_TRUE(MessageDifferencer::Equals(RecommendationOf(*a_.core), RecommendationOf(*b_.core)));

  // A replica started later reads it all from the database.
  Replica c = Open();
  ASSERT_NE(c.core, nullptr);
  EXPECT_EQ(SampleCount(*c.core), 45);
}

TEST_F(AutoscalerReplicasTest, OnlyTheChoreLeaderCompactsAndAnotherTakesOverWhenItIsGone) {
  PutWorkload(*a_.core);
  Report(*a_.core, "web-0", 0, 20);
  EXPECT_TRUE(a_.core->chore_leader());
  EXPECT_FALSE(b_.core->chore_leader());
  absl::StatusOr<int64_t> count = a_.store->CountSamples();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 20);

  // B does not hold the lease: it leaves the rows alone.
  absl::StatusOr<int64_t> removed = b_.core->Compact();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(*b_.store->CountSamples(), 20);

  // A replica gone (its session ended): the next one to ask takes the lease, and compacts.
  a_.core.reset();
  a_.store.reset();
  removed = b_.core->Compact();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 20);
  EXPECT_TRUE(b_.core->chore_leader());
  // 20 minutes from kT0 (a multiple of 60, not of 300) fold into 5-minute buckets.
  count = b_.store->CountSamples();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 5);
}

// Pod churn: a series silent past the bucket retention goes from every replica's memory, and
// from the database by the leader's compaction only.
TEST_F(AutoscalerReplicasTest, ASeriesSilentPastTheRetentionIsForgottenByEveryReplica) {
  PutWorkload(*a_.core);
  Report(*a_.core, "web-old", 0, 5);
  clock_.Advance(absl::Hours(24 * 40));
  Report(*a_.core, "web-new", 60 * 24 * 40, 5);  // 40 days later
  EXPECT_EQ(SampleCount(*b_.core), 10);          // B has caught up: both series
  EXPECT_EQ(b_.core->series_count(), 2);

  absl::StatusOr<int64_t> removed = b_.core->Compact();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(b_.core->series_count(), 1);
  absl::StatusOr<std::vector<StoredInstance>> instances = b_.store->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  EXPECT_EQ(instances->size(), 2u);  // the rows are the leader's to drop

  removed = a_.core->Compact();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_GT(*removed, 0);
  EXPECT_EQ(a_.core->series_count(), 1);
  instances = b_.store->LoadInstances();
  ASSERT_TRUE(instances.ok()) << instances.status();
  ASSERT_EQ(instances->size(), 1u);
  EXPECT_EQ((*instances)[0].name, "web-new");
}

}  // namespace
}  // namespace evoscale::service
