// RAII device memory, allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync).
#ifndef EVOSCALE_TRAINER_CUDA_DEVICE_BUFFER_H_
#define EVOSCALE_TRAINER_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "trainer/cuda/cuda_status.h"

namespace evoscale::trainer::cuda {

// Owns `size` elements of T in device memory, freed on `stream` (the stream it was allocated
// on, which must outlive the buffer). Movable, not copyable; not thread-safe.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Create(size_t size, cudaStream_t stream) {
    DeviceBuffer buffer;
    buffer.stream_ = stream;
    if (size > 0) {
      void* p = nullptr;
      EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&p, size * sizeof(T), stream));
      buffer.data_ = static_cast<T*>(p);
      buffer.size_ = size;
    }
    return buffer;
  }
  // The same, every byte set to `byte`.
  static absl::StatusOr<DeviceBuffer> Filled(size_t size, int byte, cudaStream_t stream) {
    absl::StatusOr<DeviceBuffer> buffer = Create(size, stream);
    if (buffer.ok() && size > 0) {
      EVOSCALE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer->data(), byte, size * sizeof(T), stream));
    }
    return buffer;
  }
  // Grows *buffer to hold at least `size` elements (a new, uninitialised allocation on
  // `stream`; the old contents are not kept); a larger one stays as it is.
  static absl::Status Reserve(DeviceBuffer* buffer, size_t size, cudaStream_t stream) {
    if (buffer->size() >= size) return absl::OkStatus();
    absl::StatusOr<DeviceBuffer> grown = Create(size, stream);
    if (!grown.ok()) return grown.status();
    *buffer = *std::move(grown);
    return absl::OkStatus();
  }
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        stream_(other.stream_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() const { return data_; }  // device
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Release() {
    // Nothing to report to: a failed free at teardown leaves the context in error, which the
    // next checked call reports.
    if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;  // device, (size_)
  size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_DEVICE_BUFFER_H_
