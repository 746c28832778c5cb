// Tests of AutoscalerCore::History and InstanceHistory (service/autoscaler/autoscaler_core.h):
// the in-memory usage history, on a real telemetry store in a temp SQLite file and a manual
// clock.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/autoscaler/autoscaler_core.h"
#include "service/common/clock.h"
#include "service/store/telemetry_store.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::evoscale::testing::ScopedTempDir;
using ::evoscale::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A multiple of 120 s, so that 1- and 2-minute intervals start on it.
constexpr int64_t kT0 = 1'700'000'040;
constexpr char kWeb[] = "default/web";

v1::TelemetrySample Sample(absl::string_view workload, absl::string_view instance,
                           absl::string_view container, int64_t time, double cpu_cores,
                           double memory_bytes, double qps = 0) {
  v1::TelemetrySample s;
  s.set_workload(std::string(workload));
  s.set_instance(std::string(instance));
  s.set_container(std::string(container));
  s.mutable_time()->set_seconds(time);
  s.set_cpu_cores(cpu_cores);
  s.set_memory_bytes(memory_bytes);
  s.set_qps(qps);
  return s;
}

// One sample a minute, 30 s into it.
int64_t Minute(int m) { return kT0 + 60 * m + 30; }

void ExpectSameRecommendation(const WorkloadHistoryBucket& b, const v1::Recommendation& r) {
  EXPECT_TRUE(b.has_recommendation);
  EXPECT_DOUBLE_EQ(b.cpu_target, r.cpu_cores().target());
  EXPECT_DOUBLE_EQ(b.cpu_lower, r.cpu_cores().lower_bound());
  EXPECT_DOUBLE_EQ(b.cpu_upper, r.cpu_cores().upper_bound());
  EXPECT_DOUBLE_EQ(b.memory_target, r.memory_bytes().target());
  EXPECT_DOUBLE_EQ(b.memory_lower, r.memory_bytes().lower_bound());
  EXPECT_DOUBLE_EQ(b.memory_upper, r.memory_bytes().upper_bound());
  EXPECT_DOUBLE_EQ(b.cpu_limit, r.cpu_cores().limit());
  EXPECT_DOUBLE_EQ(b.memory_limit, r.memory_bytes().limit());
  EXPECT_EQ(b.replicas, r.replicas());
}

void ExpectSameRecommendation(const WorkloadHistoryBucket& a, const WorkloadHistoryBucket& b) {
  EXPECT_EQ(a.has_recommendation, b.has_recommendation);
  EXPECT_DOUBLE_EQ(a.cpu_target, b.cpu_target);
  EXPECT_DOUBLE_EQ(a.cpu_lower, b.cpu_lower);
  EXPECT_DOUBLE_EQ(a.cpu_upper, b.cpu_upper);
  EXPECT_DOUBLE_EQ(a.memory_target, b.memory_target);
  EXPECT_DOUBLE_EQ(a.memory_lower, b.memory_lower);
  EXPECT_DOUBLE_EQ(a.memory_upper, b.memory_upper);
  EXPECT_DOUBLE_EQ(a.cpu_limit, b.cpu_limit);
  EXPECT_DOUBLE_EQ(a.memory_limit, b.memory_limit);
  EXPECT_EQ(a.replicas, b.replicas);
}

void ExpectSameBucket(const WorkloadHistoryBucket& a, const WorkloadHistoryBucket& b) {
  EXPECT_EQ(a.start, b.start);
  EXPECT_EQ(a.instances, b.instances);
  EXPECT_DOUBLE_EQ(a.cpu_cores_mean, b.cpu_cores_mean);
  EXPECT_DOUBLE_EQ(a.cpu_cores_max, b.cpu_cores_max);
  EXPECT_DOUBLE_EQ(a.memory_bytes_max, b.memory_bytes_max);
  EXPECT_DOUBLE_EQ(a.qps, b.qps);
  ExpectSameRecommendation(a, b);
}

class AutoscalerHistoryTest : public ::testing::Test {
 protected:
  // Every sample of these tests lies in the 26 hours after kT0: none is in the future, and
  // none old enough for the store to fold it (two days).
  AutoscalerHistoryTest() : clock_(absl::FromUnixSeconds(kT0 + 36 * 3600)) {}

  void SetUp() override {
    OpenCore();
    PutWorkload(kWeb);
  }

  void OpenCore() {
    absl::StatusOr<std::unique_ptr<TelemetryStore>> store =
        TelemetryStore::Open(dir_.File("telemetry.db"), Durability::kProcessCrash);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    absl::StatusOr<std::unique_ptr<AutoscalerCore>> core =
        AutoscalerCore::Create(store_.get(), &clock_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
  }

  // As evoscaled restarts: the core replays the samples from the same file.
  void Reopen() {
    core_.reset();
    store_.reset();
    OpenCore();
  }

  void PutWorkload(absl::string_view name, v1::Workload::Kind kind = v1::Workload::SERVING,
                   v1::Workload::Policy policy = v1::Workload::POLICY_UNSPECIFIED) {
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(std::string(name));
    req.mutable_workload()->set_kind(kind);
    req.mutable_workload()->set_policy(policy);
    ASSERT_TRUE(core_->PutWorkload(req).ok());
  }

  // One batch; every sample must be accepted.
  void Ingest(const std::vector<v1::TelemetrySample>& samples) {
    v1::TelemetryBatch batch;
    for (const v1::TelemetrySample& s : samples) *batch.add_samples() = s;
    v1::ReportTelemetryResponse resp;
    ASSERT_TRUE(core_->Ingest(batch, &resp).ok());
    ASSERT_EQ(resp.rejected(), 0) << resp.DebugString();
  }

  // Pods web-0..2 of two containers each report every 10 s for `minutes` minutes from kT0,
  // one batch per report time. Pod i: app 0.1 (i + 1) cores, 100 MB (i + 1) plus 0..5 MB
  // through each minute, 10 (i + 1) QPS; sidecar 0.05 cores, 10 MB.
  void IngestThreePods(int minutes) {
    for (int k = 0; k < 6 * minutes; ++k) {
      std::vector<v1::TelemetrySample> batch;
      for (int i = 0; i < 3; ++i) {
        const std::string pod = absl::StrCat("web-", i);
        batch.push_back(Sample(kWeb, pod, "app", kT0 + 10 * k, 0.1 * (i + 1),
                               100e6 * (i + 1) + 1e6 * (k % 6), 10 * (i + 1)));
        batch.push_back(Sample(kWeb, pod, "sidecar", kT0 + 10 * k, 0.05, 10e6));
      }
      Ingest(batch);
    }
  }

  WorkloadHistory HistoryOf(absl::string_view workload, int max_points = 0) {
    absl::StatusOr<WorkloadHistory> h = core_->History(workload, max_points);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *std::move(h) : WorkloadHistory{};
  }

  std::vector<UsagePoint> InstanceHistoryOf(absl::string_view workload, absl::string_view instance,
                                            int max_points = 0) {
    absl::StatusOr<std::vector<UsagePoint>> h =
        core_->InstanceHistory(workload, instance, max_points);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *std::move(h) : std::vector<UsagePoint>{};
  }

  v1::Recommendation RecommendationOf(absl::string_view workload) {
    v1::GetRecommendationRequest req;
    req.set_workload(std::string(workload));
    absl::StatusOr<v1::Recommendation> r = core_->GetRecommendation(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : v1::Recommendation{};
  }

  ScopedTempDir dir_;
  ManualClock clock_;
  std::unique_ptr<TelemetryStore> store_;
  std::unique_ptr<AutoscalerCore> core_;
};

TEST_F(AutoscalerHistoryTest, MinuteBucketsCountPodsAndSumTheirContainers) {
  IngestThreePods(10);

  const WorkloadHistory h = HistoryOf(kWeb);
  EXPECT_EQ(h.bucket_seconds, 60);
  ASSERT_EQ(h.buckets.size(), 10u);
  for (int m = 0; m < 10; ++m) {
    SCOPED_TRACE(absl::StrCat("minute ", m));
    const WorkloadHistoryBucket& b = h.buckets[m];
    EXPECT_EQ(b.start, kT0 + 60 * m);
    EXPECT_EQ(b.instances, 3);
    // Pods use 0.15, 0.25 and 0.35 cores (app + sidecar).
    EXPECT_NEAR(b.cpu_cores_mean, 0.25, 1e-12);
    EXPECT_NEAR(b.cpu_cores_max, 0.35, 1e-12);
    // web-2's peak: app 300 MB + 5 MB, sidecar 10 MB.
    EXPECT_DOUBLE_EQ(b.memory_bytes_max, 315e6);
    // Mean QPS of a pod (20) x 3 instances.
    EXPECT_NEAR(b.qps, 60, 1e-9);
    EXPECT_TRUE(b.has_recommendation);
  }
}

TEST_F(AutoscalerHistoryTest, BucketsKeepTheRecommendationAsItStoodWhenTheyClosed) {
  EXPECT_TRUE(HistoryOf(kWeb).buckets.empty());

  IngestThreePods(1);
  const v1::Recommendation after_first_minute = RecommendationOf(kWeb);
  ASSERT_GT(after_first_minute.cpu_cores().target(), 0);
  ASSERT_GT(after_first_minute.memory_bytes().target(), 0);
  Ingest({Sample(kWeb, "web-0", "app", kT0 + 60, 5.0, 900e6),
          Sample(kWeb, "web-0", "app", kT0 + 70, 5.0, 900e6)});

  const WorkloadHistory h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 2u);
  {
    SCOPED_TRACE("closed bucket");
    ExpectSameRecommendation(h.buckets[0], after_first_minute);
  }
  {
    SCOPED_TRACE("newest bucket");
    ExpectSameRecommendation(h.buckets[1], RecommendationOf(kWeb));
  }
}

// What evoscaled recommends must not depend on how often clients, scrapes and the dashboard
// asked: two workloads get the same samples, one is read after every sample, the other only at
// the end, and they end with the same recommendation (and the same history).
TEST_F(AutoscalerHistoryTest, ReadingARecommendationDoesNotChangeLaterOnes) {
  constexpr char kTwin[] = "default/twin";
  // Both calibrate their CPU margin at every sample against the limit then in force.
  for (const char* name : {kWeb, kTwin}) {
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(name);
    req.mutable_workload()->set_kind(v1::Workload::SERVING);
    req.mutable_workload()->set_throttle_rate(0.01);
    ASSERT_TRUE(core_->PutWorkload(req).ok());
  }
  uint64_t seed = 12345;
  auto uniform = [&seed] {  // A fixed pseudo-random sequence in [0, 1).
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(seed >> 11) / double(uint64_t{1} << 53);
  };
  for (int k = 0; k < 6 * 60 * 8; ++k) {  // Every 10 s for 8 hours.
    // Bursty CPU (a heavy tail of short bursts) over a decaying spike, memory that creeps up.
    const double u = uniform();
    const double cpu = (k >= 300 && k < 360 ? 3.0 : 1.0) * (1.0 + 0.3 * uniform()) /
                       (u < 0.02 ? 0.3 : 1.0);
    const double memory = (400e6 + 50e3 * k) * (1.0 + 0.1 * uniform());
    Ingest({Sample(kWeb, "web-0", "app", kT0 + 10 * k, cpu, memory),
            Sample(kTwin, "twin-0", "app", kT0 + 10 * k, cpu, memory)});
    (void)RecommendationOf(kWeb);
  }
  const v1::Recommendation read = RecommendationOf(kWeb), unread = RecommendationOf(kTwin);
  EXPECT_EQ(read.cpu_cores().target(), unread.cpu_cores().target());
  EXPECT_EQ(read.cpu_cores().limit(), unread.cpu_cores().limit());
  EXPECT_EQ(read.memory_bytes().target(), unread.memory_bytes().target());
  EXPECT_EQ(read.memory_bytes().limit(), unread.memory_bytes().limit());
  // The CPU spike has been forgotten: the limit moved down through the hysteresis.
  EXPECT_LT(read.cpu_cores().target(), 3.0);
  const WorkloadHistory a = HistoryOf(kWeb), b = HistoryOf(kTwin);
  ASSERT_EQ(a.buckets.size(), b.buckets.size());
  for (size_t i = 0; i < a.buckets.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("bucket ", i));
    ExpectSameRecommendation(a.buckets[i], b.buckets[i]);
  }
}

TEST_F(AutoscalerHistoryTest, BucketClosedWhileTheWorkloadHadNoRecommendationHasNone) {
  Ingest({Sample(kWeb, "web-0", "", Minute(0), 1, 100e6)});
  // A new policy starts the models afresh: until the next sample, no recommendation.
  PutWorkload(kWeb, v1::Workload::SERVING, v1::Workload::VPA);
  Ingest({Sample(kWeb, "web-0", "", Minute(1), 1, 100e6)});

  const WorkloadHistory h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 2u);
  EXPECT_FALSE(h.buckets[0].has_recommendation);
  EXPECT_EQ(h.buckets[0].instances, 1);
  ExpectSameRecommendation(h.buckets[1], RecommendationOf(kWeb));
}

TEST_F(AutoscalerHistoryTest, MergesAdjacentBucketsWeightingCpuByPodSamples) {
  // Minute 0: web-a six times at 1 core. Minute 1: web-a at 4 cores and web-b at 2. Minutes 2
  // and 3: web-a once each at 1 core.
  std::vector<v1::TelemetrySample> minute0;
  for (int j = 0; j < 6; ++j)
    minute0.push_back(Sample(kWeb, "web-a", "", kT0 + 10 * j, 1, 100, 10));
  Ingest(minute0);
  Ingest({Sample(kWeb, "web-a", "", kT0 + 60, 4, 50, 40),
          Sample(kWeb, "web-b", "", kT0 + 60, 2, 300, 20)});
  Ingest({Sample(kWeb, "web-a", "", kT0 + 120, 1, 100, 10)});
  Ingest({Sample(kWeb, "web-a", "", kT0 + 180, 1, 100, 10)});

  const WorkloadHistory every = HistoryOf(kWeb);
  ASSERT_EQ(every.buckets.size(), 4u);
  EXPECT_EQ(HistoryOf(kWeb, 4).buckets.size(), 4u);
  EXPECT_EQ(HistoryOf(kWeb, 4).bucket_seconds, 60);

  const WorkloadHistory two = HistoryOf(kWeb, 2);
  EXPECT_EQ(two.bucket_seconds, 120);
  ASSERT_EQ(two.buckets.size(), 2u);
  const WorkloadHistoryBucket& first = two.buckets[0];
  EXPECT_EQ(first.start, kT0);
  EXPECT_EQ(first.instances, 2);
  EXPECT_DOUBLE_EQ(first.cpu_cores_mean, (6 * 1.0 + 4 + 2) / 8);  // not (1 + 3) / 2
  EXPECT_DOUBLE_EQ(first.cpu_cores_max, 4);
  EXPECT_DOUBLE_EQ(first.memory_bytes_max, 300);
  EXPECT_DOUBLE_EQ(first.qps, (10 + 60) / 2.0);  // minute 1: mean 30 per pod x 2 instances
  ExpectSameRecommendation(first, every.buckets[1]);
  const WorkloadHistoryBucket& second = two.buckets[1];
  EXPECT_EQ(second.start, kT0 + 120);
  EXPECT_EQ(second.instances, 1);
  EXPECT_DOUBLE_EQ(second.cpu_cores_mean, 1);
  EXPECT_DOUBLE_EQ(second.qps, 10);
  ExpectSameRecommendation(second, RecommendationOf(kWeb));

  // One point: the four minutes straddle 4- and 5-minute boundaries; 6 minutes is the least
  // whole-minute width, aligned to multiples of 360 s, that holds them all.
  const WorkloadHistory one = HistoryOf(kWeb, 1);
  EXPECT_EQ(one.bucket_seconds, 360);
  ASSERT_EQ(one.buckets.size(), 1u);
  EXPECT_EQ(one.buckets[0].start, kT0 - 120);
  EXPECT_EQ(one.buckets[0].instances, 2);
  EXPECT_DOUBLE_EQ(one.buckets[0].cpu_cores_mean, (6 * 1.0 + 4 + 2 + 1 + 1) / 10);
  EXPECT_DOUBLE_EQ(one.buckets[0].qps, (10 + 60 + 10 + 10) / 4.0);
}

TEST_F(AutoscalerHistoryTest, KeepsTheNewestDayOfBuckets) {
  // 1,500 minutes of one sample each, at m cores in minute m.
  for (int first = 0; first < 1500; first += 100) {
    std::vector<v1::TelemetrySample> batch;
    for (int m = first; m < first + 100; ++m) {
      batch.push_back(Sample(kWeb, "web-0", "", Minute(m), m, 100e6));
    }
    Ingest(batch);
  }

  WorkloadHistory h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 1440u);
  EXPECT_EQ(h.buckets.front().start, kT0 + 60 * 60);
  EXPECT_EQ(h.buckets.back().start, kT0 + 60 * 1499);
  for (size_t i = 0; i < h.buckets.size(); ++i) {
    ASSERT_EQ(h.buckets[i].cpu_cores_mean, 60.0 + i) << "bucket " << i;
  }

  // A sample from before the day goes into its instance's series only.
  Ingest({Sample(kWeb, "web-late", "", Minute(10), 7, 100e6)});
  h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 1440u);
  EXPECT_EQ(h.buckets.front().start, kT0 + 60 * 60);
  const std::vector<UsagePoint> late = InstanceHistoryOf(kWeb, "web-late");
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].time, Minute(10));

  const WorkloadHistory merged = HistoryOf(kWeb, 100);
  EXPECT_LE(merged.buckets.size(), 100u);
  EXPECT_EQ(merged.bucket_seconds, 900);
}

TEST_F(AutoscalerHistoryTest, LateSamplesJoinTheirBucketWithoutChangingItsRecommendation) {
  // web-a's app container every 10 s in minutes 0, 1 and 3, and the first 20 s of minute 4,
  // growing: m + 1 cores and 100 MB (m + 1) in minute m.
  for (int m : {0, 1, 3}) {
    std::vector<v1::TelemetrySample> batch;
    for (int j = 0; j < 6; ++j) {
      batch.push_back(Sample(kWeb, "web-a", "app", kT0 + 60 * m + 10 * j, m + 1, 100e6 * (m + 1)));
    }
    Ingest(batch);
  }
  Ingest({Sample(kWeb, "web-a", "app", kT0 + 240, 5, 500e6),
          Sample(kWeb, "web-a", "app", kT0 + 250, 5, 500e6)});
  const WorkloadHistory before = HistoryOf(kWeb);
  ASSERT_EQ(before.buckets.size(), 4u);  // minutes 0, 1, 3, 4
  // The recommendation grew since minute 1 closed: recomputing it now would show.
  ASSERT_GT(before.buckets[3].memory_target, before.buckets[1].memory_target);

  // Late: web-a's sidecar for its last report of minute 3; web-b in minutes 1 and 2.
  Ingest({Sample(kWeb, "web-a", "sidecar", kT0 + 230, 0.6, 50e6),
          Sample(kWeb, "web-b", "app", kT0 + 65, 5, 300e6),
          Sample(kWeb, "web-b", "app", kT0 + 125, 3, 10e6)});

  const WorkloadHistory after = HistoryOf(kWeb);
  ASSERT_EQ(after.buckets.size(), 5u);
  const WorkloadHistoryBucket& minute1 = after.buckets[1];
  EXPECT_EQ(minute1.start, kT0 + 60);
  EXPECT_EQ(minute1.instances, 2);
  EXPECT_DOUBLE_EQ(minute1.cpu_cores_mean, (6 * 2.0 + 5) / 7);
  EXPECT_DOUBLE_EQ(minute1.cpu_cores_max, 5);
  EXPECT_DOUBLE_EQ(minute1.memory_bytes_max, 300e6);
  ExpectSameRecommendation(minute1, before.buckets[1]);
  // Minute 2 had no bucket: it closed with the recommendation of the one before it.
  const WorkloadHistoryBucket& minute2 = after.buckets[2];
  EXPECT_EQ(minute2.start, kT0 + 120);
  EXPECT_EQ(minute2.instances, 1);
  EXPECT_DOUBLE_EQ(minute2.cpu_cores_mean, 3);
  ExpectSameRecommendation(minute2, before.buckets[1]);
  // The sidecar joins web-a's pod sample at kT0 + 230: one pod, not two.
  const WorkloadHistoryBucket& minute3 = after.buckets[3];
  EXPECT_EQ(minute3.start, kT0 + 180);
  EXPECT_EQ(minute3.instances, 1);
  EXPECT_DOUBLE_EQ(minute3.cpu_cores_mean, (6 * 4.0 + 0.6) / 6);
  EXPECT_DOUBLE_EQ(minute3.cpu_cores_max, 4.6);
  EXPECT_DOUBLE_EQ(minute3.memory_bytes_max, 450e6);
  ExpectSameRecommendation(minute3, before.buckets[2]);

  const std::vector<UsagePoint> pod = InstanceHistoryOf(kWeb, "web-a");
  ASSERT_EQ(pod.size(), 20u);
  EXPECT_EQ(pod[17].time, kT0 + 230);
  EXPECT_DOUBLE_EQ(pod[17].cpu_cores, 4.6);
  EXPECT_DOUBLE_EQ(pod[17].memory_bytes, 450e6);
}

TEST_F(AutoscalerHistoryTest, TrialSeriesThinsTo512PointsSpanningItsWholeLife) {
  // A managed trial's usage: once a second, as the scheduler's usage sink sends it.
  constexpr char kStudy[] = "studies/7";
  constexpr char kTrial[] = "studies/7/trials/3";
  PutWorkload(kStudy, v1::Workload::TRAINING);
  for (int first = 0; first < 2000; first += 500) {
    std::vector<v1::TelemetrySample> batch;
    for (int k = first; k < first + 500; ++k) {
      batch.push_back(Sample(kStudy, kTrial, "", kT0 + k, 0.001 * k, 1e6 + k));
    }
    Ingest(batch);
  }

  const std::vector<UsagePoint> all = InstanceHistoryOf(kStudy, kTrial);
  // Halved at the 512th and the 1,024th sample: every 4th sample (0, 4, ..., 1996), then the
  // newest.
  ASSERT_EQ(all.size(), 501u);
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    ASSERT_EQ(all[i].time, kT0 + 4 * static_cast<int64_t>(i)) << "point " << i;
    ASSERT_DOUBLE_EQ(all[i].cpu_cores, 0.004 * i) << "point " << i;
    ASSERT_DOUBLE_EQ(all[i].memory_bytes, 1e6 + 4 * i) << "point " << i;
  }
  EXPECT_EQ(all.back().time, kT0 + 1999);
  EXPECT_DOUBLE_EQ(all.back().memory_bytes, 1e6 + 1999);

  const std::vector<UsagePoint> hundred = InstanceHistoryOf(kStudy, kTrial, 100);
  ASSERT_EQ(hundred.size(), 100u);
  EXPECT_EQ(hundred.front().time, kT0);
  EXPECT_EQ(hundred.back().time, kT0 + 1999);
  for (size_t i = 1; i < hundred.size(); ++i) {
    ASSERT_GT(hundred[i].time, hundred[i - 1].time) << "point " << i;
  }
}

TEST_F(AutoscalerHistoryTest, TrialUsageMakesItsTrainingWorkloadAndCountsWhatItCannotStore) {
  constexpr char kStudy[] = "studies/9";
  constexpr char kTrial[] = "studies/9/trials/1";
  ASSERT_TRUE(core_->IngestTrialUsage(Sample(kStudy, kTrial, "", kT0, 0.5, 2e6)).ok());
  ASSERT_TRUE(core_->IngestTrialUsage(Sample(kStudy, kTrial, "", kT0 + 1, 0.6, 3e6)).ok());
  v1::GetWorkloadRequest get;
  get.set_name(kStudy);
  absl::StatusOr<v1::Workload> made = core_->GetWorkload(get);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->kind(), v1::Workload::TRAINING);
  EXPECT_EQ(InstanceHistoryOf(kStudy, kTrial).size(), 2u);
  EXPECT_EQ(core_->trial_usage_errors_total(), 0);

  // A sample the validation rejects (older than the series' newest) is refused, named, and
  // counted; nothing of it is stored.
  EXPECT_THAT(core_->IngestTrialUsage(Sample(kStudy, kTrial, "", kT0, 0.7, 4e6)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trial usage sample")));
  EXPECT_THAT(core_->IngestTrialUsage(Sample("", kTrial, "", kT0 + 2, 0.7, 4e6)),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(core_->trial_usage_errors_total(), 2);
  EXPECT_EQ(InstanceHistoryOf(kStudy, kTrial).size(), 2u);
}

TEST_F(AutoscalerHistoryTest, ForgetsInstancesSilentForADay) {
  Ingest({Sample(kWeb, "web-old", "", kT0, 1, 100e6)});
  EXPECT_EQ(InstanceHistoryOf(kWeb, "web-old").size(), 1u);
  Ingest({Sample(kWeb, "web-new", "", kT0 + 26 * 3600, 1, 100e6)});

  EXPECT_EQ(InstanceHistoryOf(kWeb, "web-new").size(), 1u);
  EXPECT_THAT(core_->InstanceHistory(kWeb, "web-old", 0).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"web-old\"")));
  // The buckets keep the day before the newest only.
  const WorkloadHistory h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 1u);
  EXPECT_EQ(h.buckets[0].start, kT0 + 26 * 3600);
}

// Pod churn: every rollout brings new pod names. A series silent past the bucket retention
// (35 days) is forgotten at compaction, in the store and in memory; one still reporting stays,
// and so do the live series of a replayed trace, old by the clock but recent by their own.
TEST_F(AutoscalerHistoryTest, CompactionForgetsSeriesSilentPastTheRetention) {
  constexpr char kTrace[] = "default/trace";
  PutWorkload(kTrace);
  Ingest({Sample(kWeb, "web-old", "app", kT0, 1, 100e6),
          Sample(kWeb, "web-old", "sidecar", kT0, 0.1, 10e6),
          Sample(kWeb, "web-live", "app", kT0, 1, 100e6),
          Sample(kTrace, "trace-0", "", kT0, 2, 200e6)});
  EXPECT_EQ(core_->series_count(), 4);
  // 40 days on, web-live still reports; the trace goes on where it was.
  clock_.Advance(absl::Hours(40 * 24));
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  Ingest({Sample(kWeb, "web-live", "app", now - 60, 1, 100e6),
          Sample(kTrace, "trace-0", "", kT0 + 10, 2, 200e6)});
  ASSERT_TRUE(core_->Compact().ok());

  absl::StatusOr<std::vector<StoredInstance>> rows = store_->LoadInstances();
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<std::string> names;
  for (const StoredInstance& in : *rows) names.push_back(absl::StrCat(in.name, "/", in.container));
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("web-live/app", "trace-0/"));
  EXPECT_EQ(core_->series_count(), 2);
  // The trace's samples are past the retention by the clock and gone from the store; its
  // series keeps its id, so its next sample adds no instance row.
  Ingest({Sample(kTrace, "trace-0", "", kT0 + 20, 2, 200e6)});
  rows = store_->LoadInstances();
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 2u);
  // The recommendations stand (the models keep what they learnt).
  EXPECT_GT(RecommendationOf(kWeb).cpu_cores().target(), 0);
  EXPECT_GT(RecommendationOf(kTrace).cpu_cores().target(), 0);

  // A restart holds the same series.
  Reopen();
  EXPECT_EQ(core_->series_count(), 2);
  // A forgotten pod that reports again is a new series: even a sample older than its last
  // one is taken, as nothing of it is left to be out of order with.
  Ingest({Sample(kWeb, "web-old", "app", kT0 - 10, 1, 100e6)});
  EXPECT_EQ(core_->series_count(), 3);
}

TEST_F(AutoscalerHistoryTest, KeepsTheSeriesOfAtMost10000InstancesDroppingTheLeastRecent) {
  std::vector<v1::TelemetrySample> batch;
  for (int i = 0; i < 10000; ++i) {
    batch.push_back(Sample(kWeb, absl::StrCat("web-", i), "", kT0 + i, 1, 100e6));
  }
  Ingest(batch);
  EXPECT_EQ(InstanceHistoryOf(kWeb, "web-0").size(), 1u);

  // One more: the tenth heard from least recently goes.
  Ingest({Sample(kWeb, "web-new", "", kT0 + 10000, 1, 100e6)});
  for (const char* gone : {"web-0", "web-999"}) {
    EXPECT_THAT(core_->InstanceHistory(kWeb, gone, 0).status(),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr(gone)));
  }
  EXPECT_EQ(InstanceHistoryOf(kWeb, "web-1000").size(), 1u);
  EXPECT_EQ(InstanceHistoryOf(kWeb, "web-new").size(), 1u);
  // The buckets still count every instance that reported.
  EXPECT_EQ(HistoryOf(kWeb).buckets.front().instances, 60);
}

TEST_F(AutoscalerHistoryTest, UnknownWorkloadIsNotFound) {
  EXPECT_THAT(core_->History("default/nope", 0).status(),
              StatusIs(absl::StatusCode::kNotFound, "workload \"default/nope\" not found"));
  EXPECT_THAT(core_->InstanceHistory("default/nope", "web-0", 0).status(),
              StatusIs(absl::StatusCode::kNotFound, "workload \"default/nope\" not found"));
}

TEST_F(AutoscalerHistoryTest, UnknownInstanceIsNotFound) {
  Ingest({Sample(kWeb, "web-0", "", kT0, 1, 100e6)});
  EXPECT_THAT(core_->InstanceHistory(kWeb, "web-9", 0).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("instance \"web-9\""), HasSubstr("\"default/web\""))));
}

TEST_F(AutoscalerHistoryTest, NegativeMaxPointsIsInvalid) {
  Ingest({Sample(kWeb, "web-0", "", kT0, 1, 100e6)});
  EXPECT_THAT(core_->History(kWeb, -1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_points: -1")));
  EXPECT_THAT(core_->InstanceHistory(kWeb, "web-0", -1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_points: -1")));
}

TEST_F(AutoscalerHistoryTest, ReopenedCoreReplaysTheSameHistory) {
  IngestThreePods(10);
  const WorkloadHistory before = HistoryOf(kWeb);
  const std::vector<UsagePoint> pod_before = InstanceHistoryOf(kWeb, "web-1");

  Reopen();

  const WorkloadHistory after = HistoryOf(kWeb);
  EXPECT_EQ(after.bucket_seconds, before.bucket_seconds);
  ASSERT_EQ(after.buckets.size(), before.buckets.size());
  for (size_t i = 0; i < before.buckets.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("bucket ", i));
    ExpectSameBucket(after.buckets[i], before.buckets[i]);
  }
  const std::vector<UsagePoint> pod_after = InstanceHistoryOf(kWeb, "web-1");
  ASSERT_EQ(pod_after.size(), pod_before.size());
  ASSERT_EQ(pod_after.size(), 60u);
  for (size_t i = 0; i < pod_before.size(); ++i) {
    EXPECT_EQ(pod_after[i].time, pod_before[i].time) << "point " << i;
    EXPECT_DOUBLE_EQ(pod_after[i].cpu_cores, pod_before[i].cpu_cores) << "point " << i;
    EXPECT_DOUBLE_EQ(pod_after[i].memory_bytes, pod_before[i].memory_bytes) << "point " << i;
  }
}

// A serving workload's mean latency per minute (over the samples that reported one) and each
// pod's newest versions, newest report first; a pod silent for 5 minutes before the newest is
// no longer listed. Versions are not stored: after a restart the next report brings them.
TEST_F(AutoscalerHistoryTest, LatencyPerMinuteAndEachPodsNewestVersions) {
  PutWorkload(kWeb);
  auto sample = [](const char* pod, int64_t t, double latency, int64_t sparse) {
    v1::TelemetrySample s = Sample(kWeb, pod, "", t, 0.5, 1e8, 10);
    s.set_latency_seconds(latency);
    if (sparse >= 0) {
      (*s.mutable_versions())["sparse"] = sparse;
      (*s.mutable_versions())["dense"] = 3;
    }
    return s;
  };
  Ingest({sample("web-0", Minute(0), 0.002, 10), sample("web-1", Minute(0), 0.004, 9),
          sample("old", Minute(0), 0, -1)});
  Ingest({sample("web-0", Minute(1), 0, 11), sample("web-1", Minute(1), 0.006, -1)});
  Ingest({sample("web-0", Minute(9), 0.001, 12)});
  Ingest({sample("web-1", Minute(9) + 1, 0.001, 12)});
  WorkloadHistory h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 3u);
  EXPECT_DOUBLE_EQ(h.buckets[0].latency_seconds, (0.002 + 0.004) / 2);  // "old" reported none
  EXPECT_DOUBLE_EQ(h.buckets[1].latency_seconds, 0.006);
  ASSERT_EQ(h.instances.size(), 2u);  // "old" last reported 9 minutes before the newest
  EXPECT_EQ(h.instances[0].instance, "web-1");
  EXPECT_EQ(h.instances[0].time, Minute(9) + 1);
  using Versions = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(h.instances[0].versions, (Versions{{"dense", 3}, {"sparse", 12}}));
  EXPECT_EQ(h.instances[1].instance, "web-0");
  EXPECT_EQ(h.instances[1].versions, (Versions{{"dense", 3}, {"sparse", 12}}));
  EXPECT_EQ(h.instances[1].versions_time, Minute(9));

  // A bad version is refused, naming it; nothing of the sample is kept.
  v1::TelemetryBatch bad;
  *bad.add_samples() = sample("web-0", Minute(10), 0.001, 13);
  (*bad.mutable_samples(0)->mutable_versions())["sparse"] = -1;
  *bad.add_samples() = sample("web-0", Minute(10) + 1, 0.001, 13);
  (*bad.mutable_samples(1)->mutable_versions())[std::string(65, 'x')] = 1;
  v1::ReportTelemetryResponse resp;
  ASSERT_TRUE(core_->Ingest(bad, &resp).ok());
  EXPECT_EQ(resp.rejected(), 2);
  ASSERT_EQ(resp.errors_size(), 2);
  EXPECT_THAT(resp.errors(0), HasSubstr("versions[sparse]: -1 is negative"));
  EXPECT_THAT(resp.errors(1), HasSubstr("must be 1 to 64 bytes"));
  h = HistoryOf(kWeb);
  EXPECT_EQ(h.instances[1].versions, (Versions{{"dense", 3}, {"sparse", 12}}));

  Reopen();
  h = HistoryOf(kWeb);
  ASSERT_EQ(h.buckets.size(), 3u);
  EXPECT_DOUBLE_EQ(h.buckets[0].latency_seconds, (0.002 + 0.004) / 2);
  ASSERT_EQ(h.instances.size(), 2u);
  EXPECT_TRUE(h.instances[0].versions.empty());
}

}  // namespace
}  // namespace evoscale::service
