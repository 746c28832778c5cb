#include "trainer/cuda/nccl_comm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/nccl_api.h"

namespace evoscale::trainer::cuda {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

NcclComm::NcclComm(const NcclApi* api, int rank, int size, cudaStream_t stream,
                   double stall_timeout_s)
    : api_(api), rank_(rank), size_(size), stream_(stream), stall_timeout_s_(stall_timeout_s) {}

NcclComm::~NcclComm() {
  if (comm_ == nullptr) return;
  if (aborted_) return;  // ncclCommAbort freed it
  // Destroy waits for this rank's outstanding work, which a peer that stopped (or that failed
  // elsewhere and never posted its half) could leave unfinished: abort instead when the stream
  // has not drained within a few seconds.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  cudaError_t err;
  while ((err = cudaStreamQuery(stream_)) == cudaErrorNotReady && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (err == cudaSuccess) {
    (void)api_->comm_destroy(comm_);
  } else {
    (void)api_->comm_abort(comm_);
  }
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Create(int rank, int size, const ShareId& share,
                                                           cudaStream_t stream,
                                                           double stall_timeout_s) {
  absl::StatusOr<const NcclApi*> api = Nccl();
  if (!api.ok()) return api.status();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    const ncclResult_t r = (*api)->get_unique_id(&id);
    if (r != ncclSuccess) {
      return absl::UnavailableError(absl::StrCat("ncclGetUniqueId: ", NcclResultText(**api, r)));
    }
  }
  absl::Status shared = share(&id);
  if (!shared.ok()) return shared;
  std::unique_ptr<NcclComm> comm(new NcclComm(*api, rank, size, stream, stall_timeout_s));

  // ncclCommInitRank returns once every rank has joined: a peer that died after reading the id
  // would keep it waiting, so it runs on a thread of its own and the wait is bounded. On a
  // timeout the thread is left behind (the job is ending); what it writes is its own.
  struct Init {
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclSuccess;
  };
  auto init = std::make_shared<Init>();
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  int device = 0;
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::thread([init, api = *api, id, size, rank, device, done = std::move(done)]() mutable {
    // The CUDA device is per thread.
    if (cudaSetDevice(device) != cudaSuccess) {
      init->result = ncclUnhandledCudaError;
    } else {
      init->result = api->comm_init_rank(&init->comm, size, id, rank);
    }
    done.set_value();
  }).detach();
  if (finished.wait_for(std::chrono::duration<double>(stall_timeout_s)) !=
      std::future_status::ready) {
    return absl::UnavailableError(absl::StrCat("ncclCommInitRank (rank ", rank, " of ", size,
                                               "): not every rank joined within ", stall_timeout_s,
                                               " s (a rank that failed or was never started?)"));
  }
  if (init->result != ncclSuccess) {
    return absl::UnavailableError(absl::StrCat("ncclCommInitRank (rank ", rank, " of ", size,
                                               "): ", NcclResultText(**api, init->result)));
  }
  comm->comm_ = init->comm;
  return comm;
}

absl::Status NcclComm::Check(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return absl::OkStatus();
  if (!aborted_ && comm_ != nullptr) {
    (void)api_->comm_abort(comm_);
    aborted_ = true;
  }
  return absl::UnavailableError(
      absl::StrCat(what, " (rank ", rank_, " of ", size_, "): ", NcclResultText(*api_, result)));
}

absl::Status NcclComm::AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                                 void* recv, const std::vector<int64_t>& recv_counts,
                                 size_t elem_bytes) {
  if (aborted_) return absl::UnavailableError("NCCL communicator aborted after an earlier error");
  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  size_t send_off = 0, recv_off = 0, self_send = 0, self_recv = 0;
  for (int p = 0; p < rank_; ++p) {
    send_off += size_t(send_counts[p]) * elem_bytes;
    recv_off += size_t(recv_counts[p]) * elem_bytes;
  }
  self_send = send_off;
  self_recv = recv_off;
  // This rank's own share is a device copy; peers' go through one NCCL group, empty ones left
  // out on both sides (a count of 0 on one side is 0 on the other).
  const size_t own = size_t(send_counts[rank_]) * elem_bytes;
  if (own > 0) {
    EVOSCALE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(r + self_recv, s + self_send, own, cudaMemcpyDeviceToDevice, stream_));
  }
  absl::Status status = Check(api_->group_start(), "ncclGroupStart");
  if (!status.ok()) return status;
  // The group is always closed; the first failure inside it is reported after (an abort
  // inside an open group would leave the group on a freed communicator).
  ncclResult_t first = ncclSuccess;
  const char* failed = nullptr;
  send_off = recv_off = 0;
  for (int p = 0; p < size_; ++p) {
    const size_t out = size_t(send_counts[p]) * elem_bytes;
    const size_t in = size_t(recv_counts[p]) * elem_bytes;
    if (p != rank_ && out > 0 && first == ncclSuccess) {
      first = api_->send(s + send_off, out, ncclChar, p, comm_, stream_);
      if (first != ncclSuccess) failed = "ncclSend";
      bytes_sent_ += int64_t(out);
    }
    if (p != rank_ && in > 0 && first == ncclSuccess) {
      first = api_->recv(r + recv_off, in, ncclChar, p, comm_, stream_);
      if (first != ncclSuccess) failed = "ncclRecv";
    }
    send_off += out;
    recv_off += in;
  }
  const ncclResult_t ended = api_->group_end();
  if (first != ncclSuccess) return Check(first, failed);
  return Check(ended, "ncclGroupEnd");
}

absl::Status NcclComm::AllReduceSum(float* data, size_t n) {
  if (aborted_) return absl::UnavailableError("NCCL communicator aborted after an earlier error");
  if (n == 0) return absl::OkStatus();
  bytes_sent_ += int64_t(n * sizeof(float));
  return Check(api_->all_reduce(data, data, n, ncclFloat32, ncclSum, comm_, stream_),
               "ncclAllReduce");
}

absl::Status NcclComm::Synchronize() {
  const Clock::time_point start = Clock::now();
  auto wait = std::chrono::microseconds(20);
  while (true) {
    const cudaError_t err = cudaStreamQuery(stream_);
    if (err == cudaSuccess) return absl::OkStatus();
    if (err != cudaErrorNotReady) {
      return CudaError(err, "cudaStreamQuery (waiting for NCCL)", __FILE__, __LINE__);
    }
    if (!aborted_) {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t r = api_->comm_get_async_error(comm_, &async);
      if (r != ncclSuccess) return Check(r, "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress) {
        absl::Status status = Check(async, "a collective failed: a rank died or its network did");
        return status;
      }
    }
    if (std::chrono::duration<double>(Clock::now() - start).count() > stall_timeout_s_) {
      if (!aborted_) {
        (void)api_->comm_abort(comm_);
        aborted_ = true;
      }
      return absl::UnavailableError(
          absl::StrCat("rank ", rank_, " of ", size_, ": a collective made no progress for ",
                       stall_timeout_s_, " s (a rank stopped answering); the job ends"));
    }
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::microseconds(2000));
  }
}

absl::Status NcclComm::CopyToHost(void* host, const void* device, size_t bytes) {
  // Waits through the watchdog first: a copy to pageable memory would block on the collectives
  // before it, out of its sight.
  absl::Status status = Synchronize();
  if (!status.ok() || bytes == 0) return status;
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  EVOSCALE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status NcclComm::EnsureScratch(size_t bytes) {
  return DeviceBuffer<char>::Reserve(&scratch_, std::max<size_t>(bytes, 4096), stream_);
}

absl::Status NcclComm::Reduce(void* host, size_t n, size_t elem_bytes, ncclDataType_t type,
                              ncclRedOp_t op) {
  if (aborted_) return absl::UnavailableError("NCCL communicator aborted after an earlier error");
  const size_t bytes = n * elem_bytes;
  absl::Status status = EnsureScratch(bytes);
  if (!status.ok()) return status;
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(scratch_.data(), host, bytes, cudaMemcpyHostToDevice, stream_));
  status = Check(api_->all_reduce(scratch_.data(), scratch_.data(), n, type, op, comm_, stream_),
                 "ncclAllReduce");
  if (!status.ok()) return status;
  bytes_sent_ += int64_t(bytes);
  return CopyToHost(host, scratch_.data(), bytes);
}

absl::Status NcclComm::AllReduceSum(int64_t* v, size_t n) {
  return Reduce(v, n, sizeof(int64_t), ncclInt64, ncclSum);
}
absl::Status NcclComm::AllReduceMin(int64_t* v, size_t n) {
  return Reduce(v, n, sizeof(int64_t), ncclInt64, ncclMin);
}
absl::Status NcclComm::AllReduceMax(int64_t* v, size_t n) {
  return Reduce(v, n, sizeof(int64_t), ncclInt64, ncclMax);
}
absl::Status NcclComm::AllReduceMax(double* v, size_t n) {
  return Reduce(v, n, sizeof(double), ncclFloat64, ncclMax);
}

absl::Status NcclComm::AllToAll(const std::vector<int64_t>& send, std::vector<int64_t>* recv) {
  const size_t bytes = size_t(size_) * sizeof(int64_t);
  absl::Status status = EnsureScratch(2 * bytes);
  if (!status.ok()) return status;
  int64_t* out = reinterpret_cast<int64_t*>(scratch_.data());
  int64_t* in = out + size_;
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out, send.data(), bytes, cudaMemcpyHostToDevice, stream_));
  const std::vector<int64_t> ones(size_, 1);
  status = AllToAllV(out, ones, in, ones, sizeof(int64_t));
  if (!status.ok()) return status;
  recv->resize(size_);
  return CopyToHost(recv->data(), in, bytes);
}

absl::Status NcclComm::GatherToRoot(const std::vector<float>& mine, std::vector<float>* all) {
  // Everyone learns every count (a sum of one-hot vectors), then the peers send to rank 0.
  std::vector<int64_t> counts(size_, 0);
  counts[rank_] = int64_t(mine.size());
  absl::Status status = AllReduceSum(counts.data(), counts.size());
  if (!status.ok()) return status;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const size_t bytes = size_t(rank_ == 0 ? total : int64_t(mine.size())) * sizeof(float);
  status = EnsureScratch(bytes);
  if (!status.ok()) return status;
  float* buffer = reinterpret_cast<float*>(scratch_.data());
  std::vector<int64_t> send(size_, 0), recv(size_, 0);
  if (rank_ == 0) {
    recv = counts;
    recv[0] = 0;
    if (!mine.empty()) {
      EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          buffer, mine.data(), mine.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
    // Rank 0's own values sit first in `buffer`; the peers' follow them, in rank order.
    status = AllToAllV(nullptr, send, buffer + mine.size(), recv, sizeof(float));
  } else {
    send[0] = int64_t(mine.size());
    if (!mine.empty()) {
      EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          buffer, mine.data(), mine.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
    status = AllToAllV(buffer, send, nullptr, recv, sizeof(float));
  }
  if (!status.ok()) return status;
  if (rank_ != 0) return Synchronize();
  all->resize(size_t(total));
  return CopyToHost(all->data(), buffer, size_t(total) * sizeof(float));
}

absl::Status NcclComm::Broadcast(void* host, size_t bytes, int root) {
  if (aborted_) return absl::UnavailableError("NCCL communicator aborted after an earlier error");
  absl::Status status = EnsureScratch(bytes);
  if (!status.ok()) return status;
  EVOSCALE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(scratch_.data(), host, bytes, cudaMemcpyHostToDevice, stream_));
  status = Check(
      api_->broadcast(scratch_.data(), scratch_.data(), bytes, ncclChar, root, comm_, stream_),
      "ncclBroadcast");
  if (!status.ok()) return status;
  if (rank_ == root) bytes_sent_ += int64_t(bytes) * (size_ - 1);
  return CopyToHost(host, scratch_.data(), bytes);
}

}  // namespace evoscale::trainer::cuda
