#include "tests/trainer/thread_ranks.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer::testing {

// One rank's collectives: post what it brings, meet the others, read theirs, meet again (so
// that no rank changes or frees what it posted while a peer still reads it).
class ThreadRanks::Rank final : public Collectives {
 public:
  Rank(ThreadRanks* group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size_; }
  PayloadMemory payload_memory() const override { return PayloadMemory::kHost; }
  int64_t bytes_sent() const override { return bytes_sent_; }

  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                         const std::vector<int64_t>& recv_counts, size_t elem_bytes) override {
    absl::Status status;
    Meet({send, &send_counts}, [&](const std::vector<Post>& posts) {
      char* out = static_cast<char*>(recv);
      for (int p = 0; p < size(); ++p) {
        const auto& counts = *static_cast<const std::vector<int64_t>*>(posts[p].extra);
        int64_t offset = 0;  // my share in p's send
        for (int q = 0; q < rank_; ++q) offset += counts[q];
        if (counts[rank_] != recv_counts[p]) {
          status = absl::InternalError(absl::StrCat("rank ", p, " sends ", counts[rank_],
                                                    " elements to rank ", rank_, ", which expects ",
                                                    recv_counts[p]));
          return;
        }
        const size_t bytes = size_t(counts[rank_]) * elem_bytes;
        if (bytes > 0) {
          std::memcpy(out, static_cast<const char*>(posts[p].data) + size_t(offset) * elem_bytes,
                      bytes);
        }
        out += bytes;
      }
    });
    for (int p = 0; p < size(); ++p) {
      if (p != rank_) bytes_sent_ += send_counts[p] * int64_t(elem_bytes);
    }
    return status;
  }

  absl::Status AllReduceSum(float* data, size_t n) override {
    return Reduce(
        data, n, [](float a, float b) { return a + b; }, true);
  }
  absl::Status AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) override {
    std::vector<int64_t> got(static_cast<size_t>(size()));
    Meet({send.data(), nullptr}, [&](const std::vector<Post>& posts) {
      for (int p = 0; p < size(); ++p) got[p] = static_cast<const int64_t*>(posts[p].data)[rank_];
    });
    *recv = std::move(got);
    bytes_sent_ += int64_t(sizeof(int64_t)) * (size() - 1);
    return absl::OkStatus();
  }
  absl::Status AllReduceSum(int64_t* v, size_t n) override {
    return Reduce(
        v, n, [](int64_t a, int64_t b) { return a + b; }, true);
  }
  absl::Status AllReduceMin(int64_t* v, size_t n) override {
    return Reduce(
        v, n, [](int64_t a, int64_t b) { return std::min(a, b); }, false);
  }
  absl::Status AllReduceMax(int64_t* v, size_t n) override {
    return Reduce(
        v, n, [](int64_t a, int64_t b) { return std::max(a, b); }, false);
  }
  absl::Status AllReduceMax(double* v, size_t n) override {
    return Reduce(
        v, n, [](double a, double b) { return std::max(a, b); }, false);
  }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    Meet({data, nullptr}, [&](const std::vector<Post>& posts) {
      if (rank_ != root && bytes > 0) std::memcpy(data, posts[root].data, bytes);
    });
    if (rank_ == root) bytes_sent_ += int64_t(bytes) * (size() - 1);
    return absl::OkStatus();
  }
  absl::Status GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) override {
    Meet({&mine, nullptr}, [&](const std::vector<Post>& posts) {
      if (rank_ != 0) return;
      all->clear();
      for (const Post& post : posts) {
        const auto& theirs = *static_cast<const std::vector<float>*>(post.data);
        all->insert(all->end(), theirs.begin(), theirs.end());
      }
    });
    if (rank_ != 0) bytes_sent_ += int64_t(mine.size() * sizeof(float));
    return absl::OkStatus();
  }

 private:
  template <typename Read>
  void Meet(Post mine, Read read) {
    group_->posts_[rank_] = mine;
    group_->meet_.arrive_and_wait();
    read(group_->posts_);
    group_->meet_.arrive_and_wait();
  }

  // In place: the result is computed from every rank's values, and written after the second
  // meeting, once no peer reads them any more.
  template <typename T, typename Op>
  absl::Status Reduce(T* v, size_t n, Op op, bool counted) {
    std::vector<T> result(n);
    Meet({v, nullptr}, [&](const std::vector<Post>& posts) {
      // In rank order on every rank, so that each gets the same sum of floats.
      const T* first = static_cast<const T*>(posts[0].data);
      std::copy(first, first + n, result.begin());
      for (int p = 1; p < size(); ++p) {
        const T* theirs = static_cast<const T*>(posts[p].data);
        for (size_t i = 0; i < n; ++i) result[i] = op(result[i], theirs[i]);
      }
    });
    std::copy(result.begin(), result.end(), v);
    if (counted) bytes_sent_ += int64_t(n * sizeof(T));
    return absl::OkStatus();
  }

  ThreadRanks* const group_;
  const int rank_;
  int64_t bytes_sent_ = 0;
};

ThreadRanks::ThreadRanks(int size) : size_(size), meet_(size), posts_(size_t(size)) {
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

ThreadRanks::~ThreadRanks() = default;

void ThreadRanks::Run(const std::function<void(Collectives&)>& body) {
  std::vector<std::thread> threads;
  for (int r = 1; r < size_; ++r) threads.emplace_back([&, r] { body(*ranks_[r]); });
  body(*ranks_[0]);
  for (std::thread& t : threads) t.join();
}

}  // namespace evoscale::trainer::testing
