// load_split.h — load-time work (packing a large matrix) split over a few
// threads (internal to tandem_kernels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tandem::kernels {

// Calls fn(begin, end) on contiguous ranges covering [0, count): one call on
// the calling thread when `bytes` (what the work writes) is below 16 MiB,
// else one range per hardware thread (at most 8), the calling thread taking
// the first. Each index must be written by its range alone, so the bytes do
// not depend on the split.
void split_for_load(int64_t count, size_t bytes, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tandem::kernels
