#include "service/store/study_leases.h"

#include <libpq-fe.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/store/internal/postgres.h"

namespace evoscale::service {
namespace {

using internal::PgBytes;
using internal::PgConnection;
using internal::PgInt64;
using internal::PgResult;
using internal::PgRows;

absl::Status PrepareStatements(PgConnection& conn) {
  const struct {
    const char* name;
    const char* sql;
  } statements[] = {
      {"lease_lock", "SELECT pg_advisory_lock(1702260595, ($1::int8 % 2147483647)::int4)"},
      {"lease_heartbeat",
       "INSERT INTO replicas(id, address, expires_at) "
       "VALUES($1, $2, clock_timestamp() + $3::int8 * interval '1 millisecond') "
       "ON CONFLICT(id) DO UPDATE SET expires_at = EXCLUDED.expires_at"},
      {"lease_held", "SELECT study_id, epoch FROM study_leases WHERE owner = $1"},
      {"lease_acquire", "SELECT epoch, holder, address FROM evoscale_acquire($1, $2)"},
      {"lease_release", "UPDATE study_leases SET owner = NULL WHERE study_id = $1 AND owner = $2"},
      {"lease_address", "UPDATE replicas SET address = $2 WHERE id = $1"},
      {"lease_name_lock", "SELECT pg_advisory_lock(1702260596, hashtext($1))"},
      {"lease_name_unlock", "SELECT pg_advisory_unlock(1702260596, hashtext($1))"},
      {"lease_allocate",
       "UPDATE counters SET value = value + 1 WHERE name = 'next_study_id' RETURNING value - 1"},
  };
  for (const auto& [name, sql] : statements) {
    if (absl::Status st = conn.Prepare(name, sql, absl::StrCat("prepare ", name)); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StudyLeases>> StudyLeases::Open(const std::string& uri,
                                                               LeaseOptions options) {
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Connect(uri);
  if (!conn.ok()) return conn.status();
  if (absl::Status st = internal::MigrateLeaseSchema(**conn); !st.ok()) return st;
  // Replicas gone for a day leave their rows: their leases are free either way.
  if (absl::Status st = (*conn)->Exec(
          "DELETE FROM replicas WHERE expires_at < clock_timestamp() - interval '1 day'",
          "forget replicas gone for a day");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = (*conn)->Prepare(
          "lease_register",
          "INSERT INTO replicas(address, expires_at) "
          "VALUES($1, clock_timestamp() + $2::int8 * interval '1 millisecond') RETURNING id",
          "prepare lease_register");
      !st.ok()) {
    return st;
  }
  const std::string params[] = {options.address,
                                absl::StrCat(absl::ToInt64Milliseconds(options.lease))};
  absl::StatusOr<PgResult> id =
      (*conn)->Run("lease_register", params, {}, "register the replica", true);
  if (!id.ok()) return id.status();
  const int64_t replica_id = PgInt64(id->get(), 0, 0);
  if (absl::Status st = PrepareStatements(**conn); !st.ok()) return st;
  const std::string key[] = {absl::StrCat(replica_id)};
  if (absl::StatusOr<PgResult> r = (*conn)->Run("lease_lock", key, {}, "lock the replica");
      !r.ok()) {
    return r.status();
  }
  std::unique_ptr<StudyLeases> leases(
      new StudyLeases(*std::move(conn), std::move(options), replica_id));
  if (leases->options_.heartbeat) {
    leases->heartbeat_ = std::thread(&StudyLeases::HeartbeatLoop, leases.get());
  }
  return leases;
}

StudyLeases::StudyLeases(std::unique_ptr<PgConnection> conn, LeaseOptions options,
                         int64_t replica_id)
    : options_(std::move(options)),
      replica_id_(replica_id),
      conn_(std::move(conn)),
      address_(options_.address) {}

StudyLeases::~StudyLeases() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
  absl::MutexLock lock(&mu_);
  if (conn_->broken()) return;  // the server let go of the advisory lock already
  const std::string sql =
      absl::StrCat("UPDATE study_leases SET owner = NULL WHERE owner = ", replica_id_,
                   "; DELETE FROM replicas WHERE id = ", replica_id_);
  conn_->Exec(sql.c_str(), "let go of the leases").IgnoreError();
}

absl::Status StudyLeases::EnsureConnected() {
  if (!conn_->broken()) return absl::OkStatus();
  if (absl::Status st = conn_->Reset(); !st.ok()) return st;
  if (absl::Status st = PrepareStatements(*conn_); !st.ok()) return st;
  // While the connection was down the advisory lock was free, so others may have taken some
  // studies over: the fence refuses this replica's writes to those, and the next heartbeat
  // reports them lost.
  const std::string key[] = {absl::StrCat(replica_id_)};
  return conn_->Run("lease_lock", key, {}, "lock the replica").status();
}

absl::StatusOr<StudyLeases::Holder> StudyLeases::Acquire(int64_t study_id) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return st;
  const std::string params[] = {absl::StrCat(study_id), absl::StrCat(replica_id_)};
  absl::StatusOr<PgResult> r =
      conn_->Run("lease_acquire", params, {}, "acquire the study's lease", true);
  if (!r.ok()) return r.status();
  Holder h;
  h.epoch = PgInt64(r->get(), 0, 0);
  h.replica = PgInt64(r->get(), 0, 1);
  if (!PQgetisnull(r->get(), 0, 2)) h.address = PgBytes(r->get(), 0, 2);
  if (h.ours()) {
    h.replica = replica_id_;
    h.address = address_;
    held_[study_id] = h.epoch;
  }
  return h;
}

absl::Status StudyLeases::Release(int64_t study_id) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return st;
  const std::string params[] = {absl::StrCat(study_id), absl::StrCat(replica_id_)};
  absl::StatusOr<PgResult> r = conn_->Run("lease_release", params, {}, "release the lease");
  if (!r.ok()) return r.status();
  held_.erase(study_id);
  return absl::OkStatus();
}

absl::Status StudyLeases::SetAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return st;
  const std::string params[] = {absl::StrCat(replica_id_), address};
  absl::StatusOr<PgResult> r = conn_->Run("lease_address", params, {}, "set the address");
  if (!r.ok()) return r.status();
  address_ = address;
  return absl::OkStatus();
}

absl::Status StudyLeases::LockName(const std::string& display_name) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return st;
  const std::string params[] = {display_name};
  return conn_->Run("lease_name_lock", params, {}, "lock the study name").status();
}

void StudyLeases::UnlockName(const std::string& display_name) {
  absl::MutexLock lock(&mu_);
  if (conn_->broken()) return;  // the server let go of it with the session
  const std::string params[] = {display_name};
  conn_->Run("lease_name_unlock", params, {}, "unlock the study name").IgnoreError();
}

absl::StatusOr<int64_t> StudyLeases::AllocateStudyId() {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = EnsureConnected(); !st.ok()) return st;
  absl::StatusOr<PgResult> r = conn_->Run("lease_allocate", {}, {}, "allocate a study id", true);
  if (!r.ok()) return r.status();
  if (PgRows(r->get()) != 1) return absl::InternalError("allocate a study id: no counter row");
  return PgInt64(r->get(), 0, 0);
}

void StudyLeases::set_on_lost(std::function<void(int64_t)> on_lost) {
  absl::MutexLock lock(&mu_);
  on_lost_ = std::move(on_lost);
}

int64_t StudyLeases::heartbeat_failures() {
  absl::MutexLock lock(&mu_);
  return heartbeat_failures_;
}

absl::Status StudyLeases::Heartbeat() {
  if (absl::Status st = EnsureConnected(); !st.ok()) return st;
  const std::string beat[] = {absl::StrCat(replica_id_), address_,
                              absl::StrCat(absl::ToInt64Milliseconds(options_.lease))};
  if (absl::StatusOr<PgResult> r = conn_->Run("lease_heartbeat", beat, {}, "heartbeat"); !r.ok()) {
    return r.status();
  }
  return absl::OkStatus();
}

void StudyLeases::HeartbeatLoop() {
  const absl::Duration every = options_.lease / 3;
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), every)) return;
    if (!Heartbeat().ok()) {
      ++heartbeat_failures_;
      continue;
    }
    // Which leases are still ours: the ones another replica took are lost.
    const std::string me[] = {absl::StrCat(replica_id_)};
    absl::StatusOr<PgResult> r = conn_->Run("lease_held", me, {}, "read the held leases", true);
    if (!r.ok()) {
      ++heartbeat_failures_;
      continue;
    }
    std::map<int64_t, int64_t> now;
    for (int i = 0; i < PgRows(r->get()); ++i) {
      now[PgInt64(r->get(), i, 0)] = PgInt64(r->get(), i, 1);
    }
    std::vector<int64_t> lost;
    for (const auto& [study, epoch] : held_) {
      auto it = now.find(study);
      if (it == now.end() || it->second != epoch) lost.push_back(study);
    }
    held_ = std::move(now);
    if (lost.empty() || !on_lost_) continue;
    std::function<void(int64_t)> on_lost = on_lost_;
    mu_.Unlock();
    for (int64_t study : lost) on_lost(study);
    mu_.Lock();
  }
}

}  // namespace evoscale::service
