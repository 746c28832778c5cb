#include "service/store/store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/store/internal/backend.h"
#include "service/store/internal/postgres.h"

namespace evoscale::service {

static_assert(Store::kSchemaVersion == internal::kStoreSchemaVersion);

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& database,
                                                   Durability durability, bool accept_damaged_wal) {
  absl::StatusOr<std::unique_ptr<internal::StoreBackend>> backend =
      internal::IsPostgresUri(database)
          ? internal::OpenPostgresBackend(database, durability)
          : internal::OpenSqliteBackend(database, durability, accept_damaged_wal);
  if (!backend.ok()) return backend.status();
  std::unique_ptr<Store> store(new Store(*std::move(backend), durability));
  if (store->defers_sync()) store->committer_ = std::thread(&Store::CommitterLoop, store.get());
  return store;
}

bool Store::IsPostgres(absl::string_view database) { return internal::IsPostgresUri(database); }

Store::Store(std::unique_ptr<internal::StoreBackend> backend, Durability durability)
    : durability_(durability), backend_(std::move(backend)) {}

Store::~Store() {
  if (committer_.joinable()) {
    {
      absl::MutexLock lock(&queue_mu_);
      shutting_down_ = true;
    }
    committer_.join();  // commits what is queued first
  }
}

absl::StatusOr<int64_t> Store::NextStudyId() {
  absl::MutexLock lock(&mu_);
  return backend_->NextStudyId();
}

int Store::schema_version() {
  absl::MutexLock lock(&mu_);
  return backend_->schema_version();
}

absl::Status Store::Write(WriteBatch batch) {
  if (batch.empty()) return absl::OkStatus();
  absl::StatusOr<uint64_t> ticket = Enqueue(std::move(batch));
  if (!ticket.ok()) return ticket.status();
  return WaitDurable(*ticket);
}

absl::StatusOr<uint64_t> Store::Enqueue(WriteBatch batch) {
  absl::MutexLock lock(&queue_mu_);
  if (!stopped_.ok()) return stopped_;
  const uint64_t ticket = ++last_ticket_;
  queue_.push_back(Queued{ticket, std::move(batch)});
  return ticket;  // the committer's condition is re-evaluated when the lock is released
}

uint64_t Store::last_ticket() {
  absl::MutexLock lock(&queue_mu_);
  return last_ticket_;
}

int64_t Store::commits() {
  absl::MutexLock lock(&queue_mu_);
  return commits_;
}

absl::Status Store::Health() {
  {
    absl::MutexLock lock(&queue_mu_);
    if (!stopped_.ok()) return stopped_;
  }
  return backend_->Ping();
}

int64_t Store::checkpoint_failures() {
  // Without mu_: /metrics reads this, and must not wait behind a commit's fsync.
  return backend_->checkpoint_failures();
}

absl::Status Store::SettledStatus(uint64_t ticket) {
  // Once stopped, nothing is answered: the caller may have read state the database lacks.
  if (!stopped_.ok()) {
    batch_errors_.erase(ticket);
    return stopped_;
  }
  auto it = batch_errors_.find(ticket);
  if (it == batch_errors_.end()) return absl::OkStatus();
  absl::Status st = std::move(it->second);
  batch_errors_.erase(it);
  return st;
}

absl::Status Store::WaitDurable(uint64_t ticket) {
  absl::MutexLock lock(&queue_mu_);
  if (defers_sync()) {
    // The committer thread commits; wait for it (or for the stop).
    auto settled = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return ticket <= durable_ || !stopped_.ok();
    };
    queue_mu_.Await(absl::Condition(&settled));
    return SettledStatus(ticket);
  }
  for (;;) {
    if (ticket <= durable_ || !stopped_.ok()) return SettledStatus(ticket);
    if (!committing_) {
      // Leader: commit everything queued so far (it includes `ticket`, which is not settled
      // and not in flight). Nothing registers callbacks in this mode.
      std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>> due;
      CommitQueued(&due);
      continue;
    }
    auto done_or_free = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return !committing_ || ticket <= durable_;
    };
    queue_mu_.Await(absl::Condition(&done_or_free));
  }
}

void Store::OnDurable(uint64_t ticket, std::function<void(absl::Status)> done) {
  if (!defers_sync()) {
    done(WaitDurable(ticket));
    return;
  }
  absl::Status now;
  {
    absl::MutexLock lock(&queue_mu_);
    if (ticket > durable_ && stopped_.ok()) {
      callbacks_.emplace(ticket, std::move(done));
      return;
    }
    now = SettledStatus(ticket);
  }
  done(now);
}

void Store::CommitQueued(
    std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>>* due) {
  committing_ = true;
  std::vector<Queued> group;
  group.swap(queue_);
  queue_mu_.Unlock();
  std::vector<absl::Status> results;
  CommitGroup(group, &results);
  queue_mu_.Lock();
  committing_ = false;
  ++commits_;
  for (size_t i = 0; i < group.size(); ++i) {
    if (results[i].ok()) continue;
    // A fenced write of a study another replica has taken over fails alone: the service drops
    // its copy of that study (it is stale) and the rest of the store goes on.
    if (defers_sync() && stopped_.ok() && !IsLeaseLost(results[i])) {
      // The service already shows this write: stop rather than diverge from the database.
      stopped_ = absl::UnavailableError(absl::StrCat(
          "the database refused a write (", results[i].message(),
          "); evoscaled stopped writing so that it never answers from state the database "
          "lacks: restart it"));
    }
    batch_errors_[group[i].ticket] = results[i];
  }
  if (!group.empty()) durable_ = std::max(durable_, group.back().ticket);
  if (!stopped_.ok()) {
    // Nothing more will commit: settle every queued batch and every waiting callback.
    queue_.clear();
    durable_ = last_ticket_;
    for (auto& [ticket, cb] : callbacks_) due->emplace_back(std::move(cb), stopped_);
    callbacks_.clear();
    return;
  }
  for (auto it = callbacks_.begin(); it != callbacks_.end() && it->first <= durable_;) {
    due->emplace_back(std::move(it->second), SettledStatus(it->first));
    it = callbacks_.erase(it);
  }
}

void Store::CommitterLoop() {
  absl::MutexLock lock(&queue_mu_);
  for (;;) {
    auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return !queue_.empty() || shutting_down_;
    };
    queue_mu_.Await(absl::Condition(&work));
    if (queue_.empty()) return;  // shutting down, and everything queued is committed
    std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>> due;
    CommitQueued(&due);
    if (due.empty()) continue;
    queue_mu_.Unlock();
    for (auto& [cb, st] : due) cb(st);
    queue_mu_.Lock();
  }
}

void Store::CommitGroup(const std::vector<Queued>& group, std::vector<absl::Status>* results) {
  std::vector<const WriteBatch*> batches;
  batches.reserve(group.size());
  for (const Queued& q : group) batches.push_back(&q.batch);
  absl::MutexLock lock(&mu_);
  backend_->CommitGroup(batches, results);
}

absl::StatusOr<std::vector<StoredStudy>> Store::LoadAll() { return LoadStudies(StudyQuery{}); }

absl::StatusOr<std::vector<StoredStudy>> Store::LoadStudies(const StudyQuery& query) {
  absl::MutexLock lock(&mu_);
  return backend_->LoadStudies(query);
}

absl::StatusOr<StoredStudy> Store::LoadStudy(int64_t id) {
  absl::StatusOr<std::vector<StoredStudy>> found =
      LoadStudies(StudyQuery{.after_id = id - 1, .through_id = id});
  if (!found.ok()) return found.status();
  if (found->empty()) return absl::NotFoundError(absl::StrCat("study \"studies/", id, "\" not found"));
  return std::move(found->front());
}

}  // namespace evoscale::service
