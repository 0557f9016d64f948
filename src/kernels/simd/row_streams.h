// simd/row_streams.h — the M = 1 (decode) panel grouping both SIMD matmul
// kernels share (avx2/matmul.cpp, avx512/matmul.cpp). ISA-free: each kernel
// passes its own row_streams<D, S> instantiations, compiled with its flags.
// Internal linkage.
//
// Only the grouping lives here: which full panels go together to one
// row_streams call. Every output still comes from the kernel's one FMA chain
// per column, so the grouping never changes bits.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernel_table.h"
#include "kernels/prefetch.h"

namespace tandem::kernels {
namespace {

// Most panels one row_streams call takes (weight streams in flight).
inline constexpr int kMaxStreams = kMaxRowStreams;

// row_streams<D, S>: one row x S whole panels (w at the first panel's k_begin
// row, panels panel_stride bytes apart, kn k steps, y at the first panel's
// first column), near / far the prefetch distances (0 = none).
// X: the activations' element (float, or uint16_t bf16 for the bf16 pairs
// chain of avx512/matmul_bf16.cpp).
template <class X>
using RowStreamsFnOf = void (*)(const X* x, const uint8_t* w, int64_t panel_stride, int64_t kn, float* y,
                                int64_t near, int64_t far);
using RowStreamsFn = RowStreamsFnOf<float>;

// A lone row (a.m == 1, its activations x at k = 0) over a.panel_begin..: groups of S = policy.streams
// (at most kMaxStreams) full panels, then one group of the 2..S-1 full panels
// left, each group of G panels through by_size[G]. Returns the first panel not taken: a last
// single full panel and a partial panel are the caller's one-panel path, as
// is every panel when policy.streams is 1 (one contiguous stream per thread:
// a thread's panels lie back to back when it owns all of K).
template <class X>
int64_t row_stream_groups(const MatmulArgs& a, const X* x, int64_t element_size,
                          const RowStreamsFnOf<X> (&by_size)[kMaxStreams + 1], const PrefetchPolicy& policy) {
  const int64_t kn = a.k_end - a.k_begin;
  const int64_t full_end = std::min(a.panel_end, a.n / kPanel);
  const int64_t stride = a.k * kPanel * element_size;
  const int64_t most = std::clamp<int64_t>(policy.streams, 1, kMaxStreams);
  int64_t p = a.panel_begin;
  while (most >= 2 && full_end - p >= 2) {
    const int64_t group = std::min<int64_t>(most, full_end - p);
    by_size[group](x + a.k_begin, a.w + (p * a.k + a.k_begin) * kPanel * element_size, stride, kn,
                   a.y + p * kPanel, policy.near_bytes, policy.stream_far_bytes);
    p += group;
  }
  return p;
}

}  // namespace
}  // namespace tandem::kernels
