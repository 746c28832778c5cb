// StudyCore's calls that read the store rather than the cache when several replicas share one
// PostgreSQL database (StudyCore::CreateWithLeases): a replica caches only the studies it
// holds the lease of, so what spans studies is read where every replica writes.
#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "service/study/internal/names.h"
#include "service/study/internal/request_checks.h"
#include "service/study/internal/study_state.h"
#include "service/study/study_core.h"

namespace evoscale::service {

using internal::StudyState;

StudyCore::Applied<absl::StatusOr<v1::Study>> StudyCore::CreateStudyAcrossReplicas(
    const v1::Study& in, search::ProblemStatement problem) {
  const std::string& name = in.display_name();
  // Get-or-create by display name: creators of one name on every replica take its lock in
  // turn, and each writes its study durably before letting go, so the next one finds it.
  if (!name.empty()) {
    if (absl::Status st = leases_->LockName(name); !st.ok()) return st;
  }
  absl::Cleanup unlock = [&] {
    if (!name.empty()) leases_->UnlockName(name);
  };
  if (!name.empty()) {
    absl::StatusOr<std::vector<StoredStudy>> same =
        store_->LoadStudies(StudyQuery{.display_name = name, .limit = 1, .with_trials = false});
    if (!same.ok()) return same.status();
    if (!same->empty()) {
      const StoredStudy& other = same->front();
      if (!google::protobuf::util::MessageDifferencer::Equals(other.study.spec(), in.spec())) {
        return internal::DisplayNameTaken(other.study, in.spec());
      }
      // The existing study as its owner answers it: here, or forwarded there.
      absl::StatusOr<std::shared_ptr<StudyState>> found = CachedOrAdopted(other.id);
      if (!found.ok()) return found.status();
      absl::MutexLock lock(&(*found)->mu);
      if ((*found)->lost) return StudyElsewhereError(other.id, "");
      return (*found)->StudyWithCounts();
    }
  }
  absl::StatusOr<int64_t> id = leases_->AllocateStudyId();
  if (!id.ok()) return id.status();
  absl::StatusOr<StudyLeases::Holder> holder = leases_->Acquire(*id);
  if (!holder.ok()) return holder.status();
  if (!holder->ours()) {  // no other replica knows the id yet
    return absl::InternalError(absl::StrCat("new study ", *id, ": its lease is held elsewhere"));
  }
  absl::StatusOr<std::shared_ptr<StudyState>> state = NewStudy(*id, in, std::move(problem));
  if (!state.ok()) return state.status();
  (*state)->epoch = holder->epoch;
  absl::MutexLock study_lock(&(*state)->mu);
  WriteBatch batch;
  batch.PutStudy(*id, (*state)->study);
  batch.Fence(*id, holder->epoch);
  // Durable before the name's lock is let go (so this call waits for its own commit).
  if (absl::Status st = store_->Write(std::move(batch)); !st.ok()) return st;
  {
    absl::MutexLock lock(&mu_);
    studies_.emplace(*id, *state);
  }
  return (*state)->StudyWithCounts();
}

StudyCore::Applied<absl::StatusOr<v1::ListStudiesResponse>> StudyCore::ListStoredStudies(
    const v1::ListStudiesRequest& req, int page_size, int64_t start) {
  absl::StatusOr<std::vector<StoredStudy>> stored = store_->LoadStudies(
      StudyQuery{.after_id = start, .display_name = req.display_name(), .limit = page_size + 1});
  if (!stored.ok()) return stored.status();
  const bool more = static_cast<int>(stored->size()) > page_size;
  if (more) stored->resize(static_cast<size_t>(page_size));
  v1::ListStudiesResponse resp;
  for (StoredStudy& s : *stored) {
    std::shared_ptr<StudyState> cached;
    {
      absl::MutexLock lock(&mu_);
      auto it = studies_.find(s.id);
      if (it != studies_.end()) cached = it->second;
    }
    if (cached != nullptr) {  // held here: the cache is what the store will hold
      absl::MutexLock lock(&cached->mu);
      if (cached->deleted) continue;
      if (!cached->lost) {
        *resp.add_studies() = cached->StudyWithCounts();
        continue;
      }
    }
    // Held elsewhere, or by no one: as the store holds it now.
    absl::StatusOr<std::shared_ptr<StudyState>> read = StudyState::Replay(std::move(s));
    if (!read.ok()) return read.status();
    absl::MutexLock lock(&(*read)->mu);
    *resp.add_studies() = (*read)->StudyWithCounts();
  }
  if (more && !stored->empty()) resp.set_next_page_token(absl::StrCat(stored->back().id));
  return resp;
}

absl::StatusOr<std::shared_ptr<StudyState>> StudyCore::ReplayStored(int64_t id) {
  absl::StatusOr<StoredStudy> stored = store_->LoadStudy(id);
  if (absl::IsNotFound(stored.status())) return internal::NotFoundStudy(id);
  if (!stored.ok()) return stored.status();
  return StudyState::Replay(*std::move(stored));
}

StudyCore::Applied<absl::StatusOr<std::string>> StudyCore::ReadStoredStudy(
    const ReadStudyRequest& req) {
  // Versions of stored reads count down from the top, apart from the cache's, which count up.
  static std::atomic<uint64_t> stored_reads{~uint64_t{0}};
  absl::StatusOr<int64_t> id = internal::ParseStudyName(req.name, "name");
  if (!id.ok()) return id.status();
  absl::StatusOr<std::shared_ptr<StudyState>> read = ReplayStored(*id);
  if (!read.ok()) return read.status();
  absl::MutexLock lock(&(*read)->mu);
  return req.fn((*read)->StudyWithCounts(), (*read)->trials, stored_reads--);
}

}  // namespace evoscale::service
