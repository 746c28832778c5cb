#include "trainer/collectives.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer {

absl::Status Collectives::AllGather(int64_t mine, std::vector<int64_t>* all) {
  // A sum of one-hot vectors: every transport has the sum, not every one a gather.
  all->assign(size_t(size()), 0);
  (*all)[size_t(rank())] = mine;
  return AllReduceSum(all->data(), all->size());
}

absl::Status Collectives::FirstFailure(const absl::Status& mine) {
  const int rank = this->rank(), size = this->size();
  if (size == 1) return mine;
  int64_t first = mine.ok() ? size : rank;
  absl::Status status = AllReduceMin(&first, 1);
  if (!status.ok()) return status;
  if (first == size) return absl::OkStatus();
  // The failing rank's code and message length, then its message.
  const int root = int(first);
  int64_t head[2] = {root == rank ? int64_t(mine.code()) : 0,
                     root == rank ? int64_t(mine.message().size()) : 0};
  status = Broadcast(head, sizeof(head), root);
  if (!status.ok()) return status;
  std::string message = root == rank ? std::string(mine.message()) : "";
  message.resize(size_t(std::max<int64_t>(head[1], 0)));
  if (!message.empty()) status = Broadcast(message.data(), message.size(), root);
  if (!status.ok()) return status;
  return absl::Status(static_cast<absl::StatusCode>(head[0]),
                      absl::StrCat("rank ", root, ": ", message));
}

absl::Status OneProcess::AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                                   void* recv, const std::vector<int64_t>& recv_counts,
                                   size_t elem_bytes) {
  if (send_counts.size() != 1 || recv_counts.size() != 1 || send_counts[0] != recv_counts[0]) {
    return absl::InternalError(absl::StrCat(
        "AllToAllV in a job of one: sends ", send_counts.empty() ? -1 : send_counts[0],
        " elements to itself but expects ", recv_counts.empty() ? -1 : recv_counts[0]));
  }
  if (send_counts[0] > 0) std::memcpy(recv, send, size_t(send_counts[0]) * elem_bytes);
  return absl::OkStatus();
}

absl::Status OneProcess::AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) {
  *recv = send;
  return absl::OkStatus();
}

absl::Status OneProcess::GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) {
  *all = mine;
  return absl::OkStatus();
}

}  // namespace evoscale::trainer
