// pinned.cpp — page-locked host memory (kernels/cuda_pinned.h).
#include <string>
#include <utility>

#include "cuda/cuda_check.h"
#include "kernels/cuda_pinned.h"

namespace tandem::kernels::gpu {

Expected<PinnedBuffer> PinnedBuffer::allocate(size_t bytes, bool mapped) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  void* data = nullptr;
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaHostAlloc(&data, bytes, mapped ? cudaHostAllocMapped : cudaHostAllocDefault),
                  "cudaHostAlloc(" + std::to_string(bytes) + " bytes)"));
  buffer.data_ = data;
  buffer.bytes_ = bytes;
  if (!mapped) return buffer;
  void* device = nullptr;
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaHostGetDevicePointer(&device, data, 0), "cudaHostGetDevicePointer (pinned buffer)"));
  buffer.device_data_ = device;
  return buffer;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      device_data_(std::exchange(other.device_data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    device_data_ = std::exchange(other.device_data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

}  // namespace tandem::kernels::gpu
