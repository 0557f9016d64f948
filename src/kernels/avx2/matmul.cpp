// avx2/matmul.cpp — the AVX2 panel kernel (see kernel_table.h for the packed
// layout and the MatmulArgs contract).
//
// With 16 ymm registers a single row takes the whole 64-column panel (8
// accumulators, 8 independent FMA chains); blocks of 2-4 rows take it in four
// 16-column quarters (up to 4 x 2 accumulators, one 32-byte bf16 load widened
// once for all rows of the block). Either way lane j of an
// accumulator is one output column that sees exactly one FMA per k in
// increasing k, starting from +0 — the same chain for every row grouping, so
// results are batch invariant (and bitwise equal to the AVX-512 kernel's).
// A lone row (M = 1, decode) takes 2-4 full panels in turns of two k steps
// (row_streams): more weight streams in flight, the same bits.
#include <immintrin.h>

#include <algorithm>

#include "avx2/avx2.h"
#include "kernels/prefetch.h"

namespace tandem::kernels::avx2 {
namespace {

template <DType D>
constexpr int64_t element_size() {
  return D == DType::f32 ? 4 : 2;
}

// Prefetching as in avx512/matmul.cpp (distances: kernels/prefetch.h): the
// first pass over a panel prefetches near_bytes ahead into L1; a single pass
// also far_bytes ahead into L2, several passes an equal share of the next
// panel into L2 each.
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

// Quarter q (0..3) of a panel at one k: columns 32g + 8s + (0..7) and
// 32g + 16 + 8s + (0..7), g = q / 2, s = q % 2 — for bf16 exactly the 16
// columns one 32-byte load holds (low and high halves of its words).
template <DType D>
inline void load_quarter(const uint8_t* row, int q, __m256& lo, __m256& hi) {
  const int g = q / 2, s = q % 2;
  if constexpr (D == DType::bf16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 64 * g + 32 * s));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  } else {
    const int64_t c = 32 * g + 8 * s;
    if constexpr (D == DType::f32) {
      lo = _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
      hi = _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c + 16);
    } else {
      lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
      hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (c + 16))));
    }
  }
}

// R (2..4) rows x one quarter of a panel: 2R accumulators, one widening per
// 16 columns for all R rows. w points at the panel's k_begin row; y at the
// panel's first column; cols = valid columns of the panel.
template <DType D, int R>
void quarter_block(const float* x, int64_t ldx, const uint8_t* w, int64_t kn, float* y, int64_t ldy,
                   int64_t cols, int q, Prefetch pf) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
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
    __m256 lo, hi;
    load_quarter<D>(wk, q, lo, hi);
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * ldx + kk);
      acc[r][0] = _mm256_fmadd_ps(xb, lo, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(xb, hi, acc[r][1]);
    }
  }
  const int64_t c = 32 * (q / 2) + 8 * (q % 2);
  for (int r = 0; r < R; ++r) {
    store_cols(y + r * ldy + c, acc[r][0], cols - c);
    store_cols(y + r * ldy + c + 16, acc[r][1], cols - c - 16);
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
constexpr int kStreams = 4;
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
  const int64_t panel_bytes = kn * kPanel * es;
  // Row blocks of up to 4 take the panel in four quarter passes; a lone row
  // takes it in one full-panel pass.
  const int64_t blocks4 = a.m / 4, tail = a.m % 4;
  const int64_t passes = blocks4 * 4 + (tail == 0 ? 0 : tail == 1 ? 1 : 4);
  int64_t p = a.panel_begin;
  if (a.m == 1) {
    // Groups of kStreams full panels, then one group of the 2-3 full panels
    // left; a last single full panel and a partial panel take block<D, 1, 2>.
    static constexpr void (*kRow[])(const float*, const uint8_t*, int64_t, int64_t, float*, int64_t,
                                    int64_t) = {nullptr, nullptr, row_streams<D, 2>, row_streams<D, 3>,
                                                row_streams<D, 4>};
    const int64_t full_end = std::min(a.panel_end, a.n / kPanel);
    const int64_t stride = a.k * kPanel * es;
    while (full_end - p >= 2) {
      const int64_t group = std::min<int64_t>(kStreams, full_end - p);
      kRow[group](a.x + a.k_begin, a.w + ((p * a.k + a.k_begin) * kPanel) * es, stride, kn, a.y + p * kPanel,
                  policy.near_bytes, policy.stream_far_bytes);
      p += group;
    }
  }
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
        if (policy.far_bytes != 0) {
          pf.far = w + policy.far_bytes;  // a fixed distance down this panel's stream
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
      const int64_t rows = std::min<int64_t>(4, a.m - r);
      const float* x = a.x + r * a.ldx + a.k_begin;
      float* yr = y + r * a.ldy;
      if (rows == 1) {
        block<D, 1, 2>(x, a.ldx, w, kn, yr, a.ldy, cols, prefetch());
      } else {
        for (int q = 0; q < 4; ++q) {
          const Prefetch pf = prefetch();
          if (32 * (q / 2) + 8 * (q % 2) >= cols) continue;  // quarter entirely past n
          switch (rows) {
            case 2:
              quarter_block<D, 2>(x, a.ldx, w, kn, yr, a.ldy, cols, q, pf);
              break;
            case 3:
              quarter_block<D, 3>(x, a.ldx, w, kn, yr, a.ldy, cols, q, pf);
              break;
            default:
              quarter_block<D, 4>(x, a.ldx, w, kn, yr, a.ldy, cols, q, pf);
              break;
          }
        }
      }
      r += rows;
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
