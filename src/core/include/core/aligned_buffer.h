// AlignedBuffer<T>: an owning, 64-byte-aligned, zero-initialised array of
// trivially copyable T. Movable, not copyable. Use for weights repacked at
// load, activations and KV pools; allocate once, never on the decode hot path.
//
// Large buffers (>= kLargeBufferBytes) are their own anonymous mapping,
// prefaulted: the kernel hands out zeroed pages, so nothing is zeroed twice
// (aligned_alloc + memset zeroed every page in the kernel and again in
// memset). ADR 0064 has the load times, and why no huge pages.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace tandem {

inline constexpr size_t kBufferAlignment = 64;
// Under AddressSanitizer every buffer stays a heap block: a mapping has no
// redzones, and the sanitized tests are where an overrun must show. (GCC
// defines __SANITIZE_ADDRESS__; Clang, as in the fuzz build, only answers
// __has_feature.)
#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_ALIGNED_BUFFER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_ALIGNED_BUFFER_ASAN 1
#endif
#endif
#ifdef TANDEM_ALIGNED_BUFFER_ASAN
inline constexpr size_t kLargeBufferBytes = ~size_t{0};
#else
inline constexpr size_t kLargeBufferBytes = size_t{1} << 21;
#endif

namespace internal {
// `bytes` zeroed, committed bytes (page-aligned); nullptr on failure.
void* map_zeroed(size_t bytes);
void unmap(void* p, size_t bytes);
}  // namespace internal

template <typename T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { allocate(count); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { release(); }

  // Replaces the contents with `count` zeroed elements.
  void allocate(size_t count) {
    release();
    size_ = count;
    if (count == 0) return;
    const size_t bytes = byte_size(count);
    if (bytes >= kLargeBufferBytes) {
      data_ = static_cast<T*>(internal::map_zeroed(bytes));
      if (data_ == nullptr) throw std::bad_alloc();
      return;
    }
    data_ = static_cast<T*>(std::aligned_alloc(kBufferAlignment, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  static size_t byte_size(size_t count) {
    return (count * sizeof(T) + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  }
  void release() {
    if (data_ != nullptr) {
      const size_t bytes = byte_size(size_);
      if (bytes >= kLargeBufferBytes) {
        internal::unmap(data_, bytes);
      } else {
        std::free(data_);
      }
    }
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem
