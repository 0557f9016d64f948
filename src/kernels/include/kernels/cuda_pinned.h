// kernels/cuda_pinned.h — page-locked host memory for device transfers
// (compiled only when TANDEM_HAVE_CUDA). ADR 0047 / 0048.
//
// A copy between a device buffer and pinned host memory runs as one DMA at
// the link's speed and, host to device, returns once queued; from pageable
// memory the driver first copies through its own small pinned bounce buffer
// and the call waits. PinnedBuffer owns one cudaHostAlloc allocation (freed
// with cudaFreeHost); the caller keeps it alive, and unchanged, until the
// copies that read or write it have completed on their stream. device_data()
// (a mapped buffer's; else null) is the address a kernel writes it through
// (the same pointer where the device has unified addressing): a kernel's
// stores there are visible to the host once the stream is synchronised after
// it. Errors (out of pinned memory, no device) are Status values naming the
// call. Thread-compatible.
#pragma once

#include <cstddef>

#include "core/status.h"

namespace tandem::kernels::gpu {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // mapped: also mapped into the device's address space (device_data()).
  static Expected<PinnedBuffer> allocate(size_t bytes, bool mapped = false);
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  void* device_data() const { return device_data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  void* device_data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tandem::kernels::gpu
