// avx512/panel_driver.h — how the AVX-512 matmuls walk a call's panels: the
// row blocks, the passes over a panel, the prefetch targets of each pass, the
// lone row's panel groups (internal to tandem_kernels; included by
// avx512/matmul.cpp and avx512/matmul_bf16.cpp, each with its own block
// kernels; AVX-512 flags). Only the walk lives here: every output is still its kernel's one
// chain per column, so the walk never changes bits. Internal linkage.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernel_table.h"
#include "kernels/prefetch.h"
#include "simd/row_streams.h"

namespace tandem::kernels::avx512 {
namespace {

// Prefetching (distances: kernels/prefetch.h, per CPU vendor, ADR 0049). The
// L2 streamer stops at 4 KiB page boundaries and runs only a few lines ahead,
// so (1) the first pass over a panel prefetches its own stream near_bytes
// ahead into L1 ("near"); (2) "far" prefetches into L2: with a single pass
// (M <= 4) — or on the last panel of the range, which has no next panel —
// far_bytes down the stream (stream_far_bytes for a lone row, M = 1, as on
// its multi-stream path); with several passes (M > 4: two groups, or more
// row blocks), an equal share of the *next* panel of this thread's range
// during every pass (next_panel) — the later passes read the panel from L2
// and would otherwise leave DRAM idle. Measured on the Intel development VM
// (interleaved, best-of; near 4 KiB, far 64 KiB): next-panel far prefetch
// took M=8/M=1 from ~1.5 to ~1.3; the single-pass far prefetch took M=1 at
// 4864x896 from 0.84 to 0.97 of the read bandwidth and M=4/M=1 from ~1.17 to
// ~1.07. The AMD figures: docs/benchmarks.md, "AMD Zen".
struct Prefetch {
  int64_t near = 0;              // bytes ahead into L1, 0 = none
  const uint8_t* far = nullptr;  // far_bytes ahead in this panel, or next panel's share, or null
  int64_t far_step = 0;          // bytes of it per k step
};

// The first `cols` (up to 16) of v to y: a block's last, partial vector.
inline void store_cols(float* y, __m512 v, int64_t cols) {
  if (cols >= 16) {
    _mm512_storeu_ps(y, v);
  } else if (cols > 0) {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << cols) - 1), v);
  }
}

// One kernel family's entry points. X: the activations' element (float; or
// uint16_t, bf16 pairs). block(x, ldx, w, kn, y, ldy, cols, pf): R rows x G
// groups of one panel (full: R = 1..4 rows, G = 2; half: R = 5..8 rows, G = 1,
// one 32-column group); rows: one row x S = 2..4 whole panels.
template <class X>
struct PanelKernels {
  using Block = void (*)(const X*, int64_t, const uint8_t*, int64_t, float*, int64_t, int64_t, Prefetch);
  Block full[5];
  Block half[4];
  RowStreamsFnOf<X> rows[kMaxStreams + 1];
};

// Rows [0, a.m) x panels [a.panel_begin, a.panel_end) of a.w (es bytes a
// weight) from the activations x (row r at x + r * ldx, k = 0 at x).
template <class X>
void drive_panels(const MatmulArgs& a, const X* x_all, int64_t ldx, int64_t es, const PanelKernels<X>& kern) {
  const PrefetchPolicy& policy = prefetch_policy();
  const int64_t kn = a.k_end - a.k_begin;
  const int64_t panel_bytes = kn * kPanel * es;
  // Passes over one panel: 1 for M <= 4, else 2 per block of up to 8 rows
  // (plus 1 for a final block of <= 4 rows).
  const int64_t full8 = a.m / 8, tail = a.m % 8;
  const int64_t passes = full8 * 2 + (tail == 0 ? 0 : tail <= 4 ? 1 : 2);
  int64_t p = a.panel_begin;
  // A lone row: groups of 2-4 full panels (simd/row_streams.h), then the one-panel path.
  if (a.m == 1) p = row_stream_groups(a, x_all, es, kern.rows, policy);
  for (; p < a.panel_end; ++p) {
    const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
    const uint8_t* w = a.w + ((p * a.k + a.k_begin) * kPanel) * es;
    const uint8_t* next = p + 1 < a.panel_end ? w + a.k * kPanel * es : nullptr;  // multi-pass far target
    float* y = a.y + p * kPanel;
    int64_t pass = 0;
    auto prefetch = [&] {
      Prefetch pf;
      pf.near = pass == 0 ? policy.near_bytes : 0;
      if (passes == 1 || (next == nullptr && pass == 0)) {
        const int64_t far = a.m == 1 ? policy.stream_far_bytes : policy.far_bytes;  // a lone row: stream_far
        if (far != 0) {
          pf.far = w + far;  // a fixed distance down this panel's stream
          pf.far_step = kPanel * es;
        }
      } else if (next != nullptr && policy.next_panel) {
        pf.far = next + pass * panel_bytes / passes;
        pf.far_step = panel_bytes / passes / kn;
      }
      ++pass;
      return pf;
    };
    for (int64_t r = 0; r < a.m;) {
      const int64_t rows = std::min<int64_t>(8, a.m - r);
      const X* x = x_all + r * ldx + a.k_begin;
      float* yr = y + r * a.ldy;
      if (rows <= 4) {
        kern.full[rows](x, ldx, w, kn, yr, a.ldy, cols, prefetch());
      } else {
        kern.half[rows - 5](x, ldx, w, kn, yr, a.ldy, cols, prefetch());
        if (cols > 32) {
          kern.half[rows - 5](x, ldx, w + 32 * es, kn, yr + 32, a.ldy, cols - 32, prefetch());
        } else {
          ++pass;
        }
      }
      r += rows;
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::avx512
