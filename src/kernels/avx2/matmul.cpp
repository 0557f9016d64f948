// avx2/matmul.cpp — the AVX2 panel kernel (see kernel_table.h for the packed
// layout and the MatmulArgs contract).
//
// With 16 ymm registers a single row takes the whole 64-column panel (8
// accumulators, 8 independent FMA chains). A lone row (M = 1, decode) takes
// 2-4 full panels in turns of two k steps (row_streams): more weight streams
// in flight. M > 1 (tile): K in chunks of 128 k steps that stay in L1 while
// blocks of up to 6 rows take them, each block with 8-12 accumulators (6 rows
// x 16 columns, 3 x 32, ..., one weight load widened once for all rows of the
// block), partial sums parked in y between chunks. Every way, lane j of an
// accumulator is one output column that sees exactly one FMA per k in
// increasing k, starting from +0 — the same chain for every row grouping, so
// results are batch invariant (and bitwise equal to the AVX-512 kernel's).
#include <immintrin.h>

#include <algorithm>

#include "avx2/avx2.h"
#include "kernels/prefetch.h"
#include "simd/row_streams.h"

namespace tandem::kernels::avx2 {
namespace {

template <DType D>
constexpr int64_t element_size() {
  return D == DType::f32 ? 4 : 2;
}

// Prefetching for M = 1 (distances: kernels/prefetch.h): near_bytes ahead
// into L1 and stream_far_bytes ahead into L2 on a one-panel pass; the M > 1 path
// prefetches the next K chunk instead (next_panel, see tile).
struct Prefetch {
  int64_t near = 0;  // 0 = none
  const uint8_t* far = nullptr;
  int64_t far_step = 0;
};

// The 32 columns of one group at one k as four vectors in column order.
template <DType D>
inline void load_group(const uint8_t* p, __m256* v) {
  if constexpr (D == DType::f32) {
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8 * i);
  } else if constexpr (D == DType::bf16) {
    // Word i of the group holds column i (low half) and column 16+i (high half).
    const __m256i mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));       // words 0..7
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));  // words 8..15
    v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
    v[1] = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
    v[2] = _mm256_castsi256_ps(_mm256_and_si256(a, mask));
    v[3] = _mm256_castsi256_ps(_mm256_and_si256(b, mask));
  } else {
    for (int i = 0; i < 4; ++i)
      v[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
  }
}

inline void store_cols(float* y, __m256 v, int64_t cols) {
  if (cols >= 8) {
    _mm256_storeu_ps(y, v);
  } else if (cols > 0) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y, m, v);
  }
}

// R rows x G groups starting at w (offset to the first group and k_begin).
template <DType D, int R, int G>
void block(const float* x, int64_t ldx, const uint8_t* w, int64_t kn, float* y, int64_t ldy, int64_t cols,
           Prefetch pf) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  constexpr int64_t kGroup = 32 * element_size<D>();
  constexpr int V = 4 * G;
  __m256 acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (int64_t kk = 0; kk < kn; ++kk) {
    const uint8_t* wk = w + kk * kStep;
    if (pf.near != 0) {
      for (int64_t line = 0; line < kStep; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(wk + pf.near + line), _MM_HINT_T0);
      }
    }
    if (pf.far != nullptr) {
      const uint8_t* f = pf.far + kk * pf.far_step;
      for (int64_t line = 0; line < pf.far_step || line == 0; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(f + line), _MM_HINT_T1);
      }
    }
    __m256 wv[V];
    for (int g = 0; g < G; ++g) load_group<D>(wk + g * kGroup, wv + 4 * g);
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * ldx + kk);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(xb, wv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) store_cols(y + r * ldy + 8 * v, acc[r][v], cols - 8 * v);
  }
}

// The U (2, 4 or 8) vectors of one tile unit at one k, in the order
// unit_col() numbers them: U = 2 is quarter q (0..3) of a panel — columns
// 32g + 8s + (0..7) and 32g + 16 + 8s + (0..7), g = q / 2, s = q % 2, for
// bf16 exactly the 16 columns one 32-byte load holds (low and high halves of
// its words); U = 4 is group q (0..1), 32 columns; U = 8 the whole panel.
template <DType D, int U>
inline void load_unit(const uint8_t* row, int q, __m256* v) {
  constexpr int64_t kGroup = 32 * element_size<D>();
  if constexpr (U == 8) {
    load_group<D>(row, v);
    load_group<D>(row + kGroup, v + 4);
  } else if constexpr (U == 4) {
    load_group<D>(row + q * kGroup, v);
  } else if constexpr (D == DType::bf16) {
    const int g = q / 2, s = q % 2;
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 64 * g + 32 * s));
    v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    v[1] = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  } else {
    const int64_t c = 32 * (q / 2) + 8 * (q % 2);
    if constexpr (D == DType::f32) {
      v[0] = _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
      v[1] = _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c + 16);
    } else {
      v[0] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
      v[1] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (c + 16))));
    }
  }
}

// First column (within the panel) of vector v of unit q.
template <int U>
constexpr int64_t unit_col(int q, int v) {
  if constexpr (U == 2) return 32 * (q / 2) + 8 * (q % 2) + 16 * v;
  return 32 * (U == 4 ? q : 0) + 8 * v;
}

// Lanes [0, cols) of 8 (cols may be <= 0 or >= 8); masked lanes are neither
// read nor written. Only for a partial panel: AMD's masked moves are slow.
inline __m256i lane_mask(int64_t cols) {
  const int c = static_cast<int>(std::clamp<int64_t>(cols, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m256 load_lanes(const float* y, int64_t cols) { return _mm256_maskload_ps(y, lane_mask(cols)); }
inline void store_lanes(float* y, __m256 v, int64_t cols) { _mm256_maskstore_ps(y, lane_mask(cols), v); }

// K steps per chunk on the M > 1 path: a bf16 chunk of one panel is 16 KiB,
// so it stays in L1 while every row block takes it.
constexpr int64_t kChunkRows = 128;
constexpr int kTileRows = 6;

// M > 1: R (1..6) rows x unit q of a panel over kc k steps, R * U <= 12
// accumulators (one weight load and widening per unit and k for all R rows).
// Starts from +0 (first K chunk) or from the partial sums a previous chunk
// stored in y (f32 stores and loads are exact), so every column is still one
// FMA per k in increasing k from +0: the chain of block<D, 1, 2>.
// w points at the panel's first k row of the chunk; y at the panel's first
// column; cols = valid columns of the panel. pf_rows k rows from pf (this
// tile's share of the next chunk) are prefetched into L1, spread over the k
// steps: every tile of the chunk takes a share, so a chunk arrives while the
// one before it computes (prefetches move no bits).
template <DType D, int R, int U, bool Resume>
void tile(const float* x, int64_t ldx, const uint8_t* w, int64_t kc, float* y, int64_t ldy, int64_t cols,
          int q, const uint8_t* pf, int64_t pf_rows) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  // Two accumulator arrays of at most 256 bytes each, and the small loops
  // unrolled by pragma: otherwise GCC 12 keeps the accumulators in memory and
  // stores all of them on every k step (the tile then runs at half speed).
  constexpr int H = U / 2;
  __m256 lo[R][H], hi[R][H];
  const bool full = cols >= kPanel;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < H; ++v) {
      const float* yl = y + r * ldy + unit_col<U>(q, v);
      const float* yh = y + r * ldy + unit_col<U>(q, H + v);
      if constexpr (Resume) {
        lo[r][v] = full ? _mm256_loadu_ps(yl) : load_lanes(yl, cols - unit_col<U>(q, v));
        hi[r][v] = full ? _mm256_loadu_ps(yh) : load_lanes(yh, cols - unit_col<U>(q, H + v));
      } else {
        lo[r][v] = hi[r][v] = _mm256_setzero_ps();
      }
    }
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    if (pf_rows > 0) {  // this tile's share of the next chunk, spread over its k steps
      const uint8_t* f = pf + (kk * pf_rows / kChunkRows) * kStep;
      for (int64_t line = 0; line < kStep; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(f + line), _MM_HINT_T0);
    }
    __m256 wv[U];
    load_unit<D, U>(w + kk * kStep, q, wv);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * ldx + kk);
#pragma GCC unroll 16
      for (int v = 0; v < H; ++v) lo[r][v] = _mm256_fmadd_ps(xb, wv[v], lo[r][v]);
#pragma GCC unroll 16
      for (int v = 0; v < H; ++v) hi[r][v] = _mm256_fmadd_ps(xb, wv[H + v], hi[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < H; ++v) {
      float* yl = y + r * ldy + unit_col<U>(q, v);
      float* yh = y + r * ldy + unit_col<U>(q, H + v);
      if (full) {
        _mm256_storeu_ps(yl, lo[r][v]);
        _mm256_storeu_ps(yh, hi[r][v]);
      } else {
        store_lanes(yl, lo[r][v], cols - unit_col<U>(q, v));
        store_lanes(yh, hi[r][v], cols - unit_col<U>(q, H + v));
      }
    }
  }
}

// All units of one panel for R rows: the unit width that keeps 8-12
// accumulators (R = 1: the whole panel; 2-3: two 32-column groups; 4-6: four
// quarters). Units entirely past n are skipped.
template <DType D, int R>
void rows_panel(const float* x, int64_t ldx, const uint8_t* w, int64_t kc, float* y, int64_t ldy,
                int64_t cols, bool resume, const uint8_t* pf, int64_t pf_rows) {
  constexpr int U = R == 1 ? 8 : R <= 3 ? 4 : 2;
  constexpr int kUnits = 8 / U;
  constexpr int64_t kStep = kPanel * element_size<D>();
  for (int q = 0; q < kUnits; ++q) {
    if (unit_col<U>(q, 0) >= cols) continue;
    const int64_t f0 = q * pf_rows / kUnits, f1 = (q + 1) * pf_rows / kUnits;
    if (resume) {
      tile<D, R, U, true>(x, ldx, w, kc, y, ldy, cols, q, pf + f0 * kStep, f1 - f0);
    } else {
      tile<D, R, U, false>(x, ldx, w, kc, y, ldy, cols, q, pf + f0 * kStep, f1 - f0);
    }
  }
}

// One row x S (2..4) whole panels (M = 1, decode): the per-column chain of
// block<D, 1, 2> — lane j of accumulator v sees one FMA per k in increasing
// k from +0 — so the bits are those of one panel at a time. A lone row
// otherwise walks one contiguous stream per thread, and one stream keeps too
// few cache-line fills in flight to reach what a core can draw with several
// (the four-stream reader behind `tandem bench`'s ceiling). 16 ymm registers
// hold one panel's 8 accumulators, not S panels', so the panels take turns
// kChunkK k steps at a time, their accumulators parked in L1 in between
// (f32 stores and loads: exact) — S streams in flight at chunk granularity.
// w points at the first panel's k_begin row; panels are panel_stride bytes
// apart; all S panels hold 64 valid columns.
static_assert(kMaxStreams == 4);  // row_streams<D, 2..4>
constexpr int64_t kChunkK = 2;

template <DType D, int S>
void row_streams(const float* x, const uint8_t* w, int64_t panel_stride, int64_t kn, float* y, int64_t near,
                 int64_t far) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  constexpr int64_t kGroup = 32 * element_size<D>();
  alignas(32) float park[S][kPanel] = {};  // +0, as _mm256_setzero_ps
  for (int64_t k0 = 0; k0 < kn; k0 += kChunkK) {
    const int64_t k1 = std::min(kn, k0 + kChunkK);
    for (int s = 0; s < S; ++s) {
      __m256 acc[8];
      for (int v = 0; v < 8; ++v) acc[v] = _mm256_load_ps(park[s] + 8 * v);
      const uint8_t* ws = w + s * panel_stride;
      for (int64_t kk = k0; kk < k1; ++kk) {
        const uint8_t* wk = ws + kk * kStep;
        for (int64_t line = 0; line < kStep; line += 64) {
          if (near != 0) _mm_prefetch(reinterpret_cast<const char*>(wk + near + line), _MM_HINT_T0);
          if (far != 0) _mm_prefetch(reinterpret_cast<const char*>(wk + far + line), _MM_HINT_T1);
        }
        __m256 wv[8];
        load_group<D>(wk, wv);
        load_group<D>(wk + kGroup, wv + 4);
        const __m256 xb = _mm256_broadcast_ss(x + kk);
        for (int v = 0; v < 8; ++v) acc[v] = _mm256_fmadd_ps(xb, wv[v], acc[v]);
      }
      for (int v = 0; v < 8; ++v) _mm256_store_ps(park[s] + 8 * v, acc[v]);
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int v = 0; v < 8; ++v) _mm256_storeu_ps(y + s * kPanel + 8 * v, _mm256_load_ps(park[s] + 8 * v));
  }
}

template <DType D>
void matmul_typed(const MatmulArgs& a) {
  constexpr int64_t es = element_size<D>();
  const PrefetchPolicy& policy = prefetch_policy();
  const int64_t kn = a.k_end - a.k_begin;
  int64_t p = a.panel_begin;
  if (a.m == 1) {
    // Groups of 2-4 full panels (simd/row_streams.h), then the one-panel path.
    static constexpr RowStreamsFn kRow[] = {nullptr, nullptr, row_streams<D, 2>, row_streams<D, 3>,
                                            row_streams<D, 4>};
    p = row_stream_groups(a, a.x, es, kRow, policy);
    // A last single full panel and a partial panel (every panel with one
    // stream): one pass each, stream_far ahead like the grouped streams.
    for (; p < a.panel_end; ++p) {
      const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
      const uint8_t* w = a.w + ((p * a.k + a.k_begin) * kPanel) * es;
      Prefetch pf;
      pf.near = policy.near_bytes;
      if (policy.stream_far_bytes != 0) {
        pf.far = w + policy.stream_far_bytes;  // a fixed distance down this panel's stream
        pf.far_step = kPanel * es;
      }
      block<D, 1, 2>(a.x + a.k_begin, a.ldx, w, kn, a.y + p * kPanel, a.ldy, cols, pf);
    }
    return;
  }
  // M > 1: per panel, K in chunks of kChunkRows; every block of up to
  // kTileRows rows takes the chunk (from L1) before the next chunk.
  static constexpr void (*kRows[])(const float*, int64_t, const uint8_t*, int64_t, float*, int64_t, int64_t,
                                   bool, const uint8_t*, int64_t) = {
      nullptr,          rows_panel<D, 1>, rows_panel<D, 2>, rows_panel<D, 3>,
      rows_panel<D, 4>, rows_panel<D, 5>, rows_panel<D, 6>};
  const int64_t blocks = (a.m + kTileRows - 1) / kTileRows;
  for (; p < a.panel_end; ++p) {
    const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
    const uint8_t* w = a.w + ((p * a.k + a.k_begin) * kPanel) * es;
    float* y = a.y + p * kPanel;
    for (int64_t k0 = 0; k0 < kn; k0 += kChunkRows) {
      const int64_t kc = std::min(kChunkRows, kn - k0);
      const uint8_t* wc = w + k0 * kPanel * es;
      for (int64_t r = 0; r < a.m; r += kTileRows) {
        const int64_t rows = std::min<int64_t>(kTileRows, a.m - r);
        // Row block b prefetches its share of the next chunk (the next
        // panel's first one after the last), so the whole chunk's work
        // covers the fetch.
        const int64_t b = r / kTileRows;
        const int64_t f0 = policy.next_panel ? b * kChunkRows / blocks : 0;
        const int64_t f1 = policy.next_panel ? (b + 1) * kChunkRows / blocks : 0;
        kRows[rows](a.x + r * a.ldx + a.k_begin + k0, a.ldx, wc, kc, y + r * a.ldy, a.ldy, cols, k0 > 0,
                    wc + (kc + f0) * kPanel * es, f1 - f0);
      }
    }
  }
}

}  // namespace

void matmul_panels(const MatmulArgs& a) {
  switch (a.dtype) {
    case DType::f32:
      return matmul_typed<DType::f32>(a);
    case DType::bf16:
      return matmul_typed<DType::bf16>(a);
    case DType::f16:
      return matmul_typed<DType::f16>(a);
    default:  // quantized weights take matmul_quant
      return;
  }
}

}  // namespace tandem::kernels::avx2
