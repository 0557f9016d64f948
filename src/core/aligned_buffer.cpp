// aligned_buffer.cpp — the anonymous mappings behind large AlignedBuffers.
#include "core/aligned_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace tandem::internal {
namespace {

size_t page_bytes(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* map_zeroed(size_t bytes) {
  const size_t len = page_bytes(bytes);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_POPULATE_WRITE
  // The prefault keeps the contract the memset gave: the memory is committed
  // when allocate() returns, so a KV pool too large for the machine fails at
  // start (here a bad_alloc, as from aligned_alloc), not mid-request. A kernel
  // without MADV_POPULATE_WRITE (< 5.14) faults the pages in on first touch.
  if (madvise(p, len, MADV_POPULATE_WRITE) != 0 && errno == ENOMEM) {
    munmap(p, len);
    return nullptr;
  }
#endif
  return p;
}

void unmap(void* p, size_t bytes) { munmap(p, page_bytes(bytes)); }

}  // namespace tandem::internal
