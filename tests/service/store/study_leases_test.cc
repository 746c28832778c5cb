// Study leases among replicas on one real throwaway PostgreSQL (tests/support/postgres_server.h):
// ownership and epochs, takeover of a dead replica (a child process killed with SIGKILL) and of
// a hung one (its heartbeat expired), the fence refusing a former owner's write while the
// store goes on, lost leases reported, study ids unique across replicas. Skipped, saying why,
// where PostgreSQL is not installed.
#include "service/store/study_leases.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/store.h"
#include "tests/service/store/store_test_data.h"
#include "tests/support/postgres_server.h"

namespace evoscale::service {
namespace {

using ::evoscale::testing::PostgresServer;
using ::testing::HasSubstr;

class StudyLeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = PostgresServer::UnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::string> uri = server_->CreateDatabase("evoscale");
    ASSERT_TRUE(uri.ok()) << uri.status();
    uri_ = *uri;
    // The store's tables first, as evoscaled opens them.
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(uri_, Durability::kPowerLoss);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  std::unique_ptr<StudyLeases> Replica(const std::string& address,
                                       absl::Duration lease = absl::Seconds(60),
                                       bool heartbeat = true) {
    absl::StatusOr<std::unique_ptr<StudyLeases>> leases = StudyLeases::Open(
        uri_, LeaseOptions{.address = address, .lease = lease, .heartbeat = heartbeat});
    EXPECT_TRUE(leases.ok()) << leases.status();
    return leases.ok() ? *std::move(leases) : nullptr;
  }

  // Polls `b`'s Acquire until it owns `study` (or 20 s pass): a takeover that needs time to
  // become possible (a heartbeat to expire).
  static StudyLeases::Holder AcquireWhenFree(StudyLeases& b, int64_t study) {
    const absl::Time until = absl::Now() + absl::Seconds(20);
    for (;;) {
      absl::StatusOr<StudyLeases::Holder> h = b.Acquire(study);
      EXPECT_TRUE(h.ok()) << h.status();
      if (!h.ok() || h->ours() || absl::Now() > until) return h.ok() ? *h : StudyLeases::Holder{};
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  std::unique_ptr<PostgresServer> server_;
  std::string uri_;
  std::unique_ptr<Store> store_;
};

TEST_F(StudyLeasesTest, AReplicaOwnsWhatItAcquiresAndTheOthersAreToldWhere) {
  std::unique_ptr<StudyLeases> a = Replica("a.example:7000");
  std::unique_ptr<StudyLeases> b = Replica("b.example:7000");
  ASSERT_TRUE(a && b);
  ASSERT_NE(a->replica_id(), b->replica_id());
  absl::StatusOr<StudyLeases::Holder> first = a->Acquire(7);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->ours());
  EXPECT_EQ(first->epoch, 1);
  absl::StatusOr<StudyLeases::Holder> again = a->Acquire(7);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->epoch, 1) << "acquiring a lease already held keeps its epoch";
  absl::StatusOr<StudyLeases::Holder> other = b->Acquire(7);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->ours());
  EXPECT_EQ(other->replica, a->replica_id());
  EXPECT_EQ(other->address, "a.example:7000");
  // B owns a study of its own meanwhile.
  absl::StatusOr<StudyLeases::Holder> eight = b->Acquire(8);
  ASSERT_TRUE(eight.ok());
  EXPECT_TRUE(eight->ours());
}

TEST_F(StudyLeasesTest, ALeaseLetGoIsTakenAtOnceWithItsEpochOneUp) {
  std::unique_ptr<StudyLeases> a = Replica("a:1");
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  ASSERT_TRUE(a->Acquire(3).ok());
  ASSERT_TRUE(a->Acquire(4).ok());
  ASSERT_TRUE(a->Release(3).ok());
  absl::StatusOr<StudyLeases::Holder> three = b->Acquire(3);
  ASSERT_TRUE(three.ok());
  EXPECT_TRUE(three->ours());
  EXPECT_EQ(three->epoch, 2);
  a.reset();  // a clean shutdown lets go of every lease
  absl::StatusOr<StudyLeases::Holder> four = b->Acquire(4);
  ASSERT_TRUE(four.ok());
  EXPECT_TRUE(four->ours());
  EXPECT_EQ(four->epoch, 2);
}

TEST_F(StudyLeasesTest, ADeadReplicasStudiesAreTakenOverAtOnceNotAfterItsHeartbeat) {
  // The owner is a child process killed with SIGKILL while its heartbeat (60 s) still holds:
  // only its ended session (the advisory lock freed) can let B in.
  // The fixture's store goes first: the child of a fork has only the forking thread, so a lock
  // the store's committer thread held at that moment (absl's allocator for thread identities)
  // would never be let go there, and the child would hang on its first Mutex.
  store_.reset();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    absl::StatusOr<std::unique_ptr<StudyLeases>> leases =
        StudyLeases::Open(uri_, LeaseOptions{.address = "doomed:1", .lease = absl::Seconds(60)});
    char ok = leases.ok() && (*leases)->Acquire(11).ok() && (*leases)->Acquire(12).ok() ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    for (;;) pause();
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, 1) << "the child could not take its leases";
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  absl::StatusOr<StudyLeases::Holder> held = b->Acquire(11);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->ours()) << "the live child owns study 11";
  EXPECT_EQ(held->address, "doomed:1");
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // PostgreSQL ends the session when its socket closes, a moment after the kill: poll.
  StudyLeases::Holder eleven = AcquireWhenFree(*b, 11);
  EXPECT_TRUE(eleven.ours());
  EXPECT_EQ(eleven.epoch, 2);
  absl::StatusOr<StudyLeases::Holder> twelve = b->Acquire(12);
  ASSERT_TRUE(twelve.ok());
  EXPECT_TRUE(twelve->ours()) << "every study of the dead replica is free, not only the first";
  EXPECT_EQ(twelve->epoch, 2);
}

TEST_F(StudyLeasesTest, AHungReplicasStudiesAreTakenOverOnceItsHeartbeatExpires) {
  // A sends no heartbeat after registering (as a process stopped with SIGSTOP) and stays
  // connected, so its advisory lock holds: only the expired heartbeat lets B in.
  std::unique_ptr<StudyLeases> a = Replica("a:1", absl::Milliseconds(600), /*heartbeat=*/false);
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  ASSERT_TRUE(a->Acquire(5).ok());
  absl::StatusOr<StudyLeases::Holder> held = b->Acquire(5);
  ASSERT_TRUE(held.ok());
  ASSERT_FALSE(held->ours()) << "A's heartbeat is fresh";
  StudyLeases::Holder taken = AcquireWhenFree(*b, 5);
  EXPECT_TRUE(taken.ours());
  EXPECT_EQ(taken.epoch, 2);
  // A, when it runs again, is told where the study went.
  absl::StatusOr<StudyLeases::Holder> back = a->Acquire(5);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->ours());
  EXPECT_EQ(back->address, "b:1");
}

TEST_F(StudyLeasesTest, TheFormerOwnersFencedWriteIsRefusedAndTheStoreGoesOn) {
  std::unique_ptr<StudyLeases> a = Replica("a:1", absl::Milliseconds(600), /*heartbeat=*/false);
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  absl::StatusOr<StudyLeases::Holder> mine = a->Acquire(1);
  ASSERT_TRUE(mine.ok() && mine->ours());
  WriteBatch create;
  create.Fence(1, mine->epoch);
  create.PutStudy(1, DemoStudy());
  ASSERT_TRUE(store_->Write(std::move(create)).ok());
  WriteBatch other;
  other.PutStudy(2, DemoStudy());
  ASSERT_TRUE(store_->Write(std::move(other)).ok());

  StudyLeases::Holder taken = AcquireWhenFree(*b, 1);
  ASSERT_TRUE(taken.ours());
  // A, resumed, still believes it owns study 1 at epoch 1.
  WriteBatch stale;
  stale.Fence(1, mine->epoch);
  stale.PutTrial(1, DemoTrial(1, v1::Trial::ACTIVE), 0);
  const absl::Status refused = store_->Write(std::move(stale));
  EXPECT_TRUE(IsLeaseLost(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("study 1 was taken over by another replica"));
  // The store was not stopped: the new owner's fenced write and an unfenced one commit.
  WriteBatch fresh;
  fresh.Fence(1, taken.epoch);
  fresh.PutTrial(1, DemoTrial(1, v1::Trial::SUCCEEDED), 1);
  EXPECT_TRUE(store_->Write(std::move(fresh)).ok());
  WriteBatch unfenced;
  unfenced.PutTrial(2, DemoTrial(1, v1::Trial::ACTIVE), 0);
  EXPECT_TRUE(store_->Write(std::move(unfenced)).ok());

  absl::StatusOr<std::vector<StoredStudy>> all = store_->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  ASSERT_EQ((*all)[0].trials.size(), 1u);
  EXPECT_EQ((*all)[0].trials[0].trial.state(), v1::Trial::SUCCEEDED)
      << "only the new owner's write is stored";
  EXPECT_EQ((*all)[1].trials.size(), 1u);
}

TEST_F(StudyLeasesTest, AFencedWriteInAGroupFailsAloneAndTheOthersCommit) {
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  WriteBatch create;
  create.PutStudy(1, DemoStudy());
  ASSERT_TRUE(store_->Write(std::move(create)).ok());
  absl::StatusOr<StudyLeases::Holder> h = b->Acquire(1);
  ASSERT_TRUE(h.ok() && h->ours());
  // Queued back to back (the committer takes what is queued, several to a transaction): one
  // with a wrong epoch.
  std::vector<uint64_t> tickets;
  for (int i = 1; i <= 4; ++i) {
    WriteBatch batch;
    batch.Fence(1, i == 3 ? h->epoch + 7 : h->epoch);
    batch.PutTrial(1, DemoTrial(i, v1::Trial::ACTIVE), 0);
    absl::StatusOr<uint64_t> t = store_->Enqueue(std::move(batch));
    ASSERT_TRUE(t.ok());
    tickets.push_back(*t);
  }
  for (size_t i = 0; i < tickets.size(); ++i) {
    const absl::Status st = store_->WaitDurable(tickets[i]);
    if (i == 2) {
      EXPECT_TRUE(IsLeaseLost(st)) << st;
    } else {
      EXPECT_TRUE(st.ok()) << i << ": " << st;
    }
  }
  absl::StatusOr<std::vector<StoredStudy>> all = store_->LoadAll();
  ASSERT_TRUE(all.ok());
  std::set<int64_t> ids;
  for (const StoredTrial& t : (*all)[0].trials) ids.insert(t.trial.id());
  EXPECT_EQ(ids, (std::set<int64_t>{1, 2, 4}));
}

TEST_F(StudyLeasesTest, AReplicaCutOffFromTheDatabaseHearsWhichLeasesItLost) {
  // A's session is ended behind its back (a network partition, as PostgreSQL sees it): its
  // advisory lock is freed, B takes one of its studies, and A's next heartbeat reconnects and
  // reports that one lost, not the other.
  std::unique_ptr<StudyLeases> a = Replica("a:1", absl::Milliseconds(300));
  absl::Mutex mu;
  std::vector<int64_t> lost;
  a->set_on_lost([&](int64_t study) {
    absl::MutexLock lock(&mu);
    lost.push_back(study);
  });
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  ASSERT_TRUE(a->Acquire(21).ok());
  ASSERT_TRUE(a->Acquire(22).ok());
  ASSERT_TRUE(server_
                  ->Exec("evoscale", absl::StrCat("SELECT pg_terminate_backend(pid) FROM pg_locks "
                                                  "WHERE locktype = 'advisory' AND classid = "
                                                  "1702260595 AND objid = ",
                                                  a->replica_id()))
                  .ok());
  StudyLeases::Holder taken = AcquireWhenFree(*b, 21);
  ASSERT_TRUE(taken.ours());
  auto reported = [&]() {
    absl::MutexLock lock(&mu);
    return !lost.empty();
  };
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (!reported() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(lost, std::vector<int64_t>{21});
  }
  absl::StatusOr<StudyLeases::Holder> kept = a->Acquire(22);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->ours());
  EXPECT_EQ(kept->epoch, 1) << "nobody took study 22, so A's epoch holds";
}

TEST_F(StudyLeasesTest, RacingReplicasGetOneOwnerAndDistinctStudyIds) {
  std::unique_ptr<StudyLeases> a = Replica("a:1");
  std::unique_ptr<StudyLeases> b = Replica("b:1");
  absl::StatusOr<int64_t> floor = store_->NextStudyId();
  ASSERT_TRUE(floor.ok());
  std::vector<int64_t> ids_a, ids_b;
  int owned_a = 0, owned_b = 0;
  auto run = [](StudyLeases* l, std::vector<int64_t>* ids, int* owned) {
    for (int i = 0; i < 50; ++i) {
      absl::StatusOr<int64_t> id = l->AllocateStudyId();
      ASSERT_TRUE(id.ok()) << id.status();
      ids->push_back(*id);
      absl::StatusOr<StudyLeases::Holder> h = l->Acquire(1000 + i);
      ASSERT_TRUE(h.ok()) << h.status();
      if (h->ours()) ++*owned;
    }
  };
  std::thread ta(run, a.get(), &ids_a, &owned_a);
  std::thread tb(run, b.get(), &ids_b, &owned_b);
  ta.join();
  tb.join();
  EXPECT_EQ(owned_a + owned_b, 50) << "each of the 50 studies has exactly one owner";
  std::set<int64_t> all(ids_a.begin(), ids_a.end());
  all.insert(ids_b.begin(), ids_b.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_GE(*all.begin(), *floor);
}

}  // namespace
}  // namespace evoscale::service
