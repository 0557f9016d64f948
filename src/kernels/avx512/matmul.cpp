// avx512/matmul.cpp — the AVX-512 panel kernel (see kernel_table.h for the
// packed layout and the MatmulArgs contract).
//
// A block is R rows x G 32-column groups of one panel. Per k step the block's
// weights are loaded and widened once (bf16: one 64-byte load, one shift and
// one mask per group) into 2G zmm, then FMA'd into R x 2G accumulators with
// x[r][k] broadcast. Lane j of accumulator (r, v) is one output column and
// sees exactly one FMA per k in increasing k, starting from +0 — the same
// chain for every blocking, so results are batch invariant.
//
// Blocking (32 zmm registers): M <= 4 rows take the full panel (G = 2, up to
// 16 accumulators, the weights widened once for all rows); blocks of 5..8
// rows take one group at a time (G = 1, up to 16 accumulators), which widens
// each weight once per 8 rows instead of once per 4 — widening shares ports 0
// and 5 with the FMAs, so this is what keeps M = 8 close to M = 4. Further
// passes over a panel hit L2 (a panel is at most k * 256 bytes). A lone row
// (M = 1, decode) takes 2-4 full panels at once (row_streams): more weight
// streams in flight and more independent chains, the same bits.
#include <immintrin.h>

#include <algorithm>

#include "avx512/avx512.h"
#include "avx512/panel_driver.h"

namespace tandem::kernels::avx512 {
namespace {

template <DType D>
constexpr int64_t element_size() {
  return D == DType::f32 ? 4 : 2;
}
// The 32 columns of one group at one k, as two vectors of 16 columns each.
template <DType D>
inline void load_group(const uint8_t* p, __m512& lo, __m512& hi) {
  if constexpr (D == DType::f32) {
    lo = _mm512_loadu_ps(p);
    hi = _mm512_loadu_ps(p + 64);
  } else if constexpr (D == DType::bf16) {
    const __m512i v = _mm512_loadu_si512(p);  // word i = column i | column 16+i << 16
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  } else {
    lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
  }
}

// R rows x G groups starting at w (offset to the block's first group and to
// k_begin); cols = valid output columns from the block's first column.
template <DType D, int R, int G>
void block(const float* x, int64_t ldx, const uint8_t* w, int64_t kn, float* y, int64_t ldy, int64_t cols,
           Prefetch pf) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  constexpr int64_t kGroup = 32 * element_size<D>();
  constexpr int V = 2 * G;
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
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
    __m512 wv[V];
    for (int g = 0; g < G; ++g) load_group<D>(wk + g * kGroup, wv[2 * g], wv[2 * g + 1]);
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * ldx + kk]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) store_cols(y + r * ldy + 16 * v, acc[r][v], cols - 16 * v);
  }
}

// One row x S (2..4) whole panels at once (M = 1, decode): the same
// per-column chain as block<D, 1, 2> — lane j of accumulator (s, v) sees one
// FMA per k in increasing k from +0 — so the bits are those of one panel at a
// time. What changes is the memory side: a lone row otherwise walks a single
// contiguous stream per thread, and one stream keeps too few cache-line fills
// in flight to reach the read bandwidth a core can draw with several (the
// ceiling `tandem bench` measures uses four streams per thread), and its 4
// accumulator chains leave the FMA latency exposed. Four panels give four
// streams and 16 independent chains (16 accumulators + 8 weight registers);
// a thread's last 2-3 full panels go as one group of 2 or 3.
// w points at the first panel's k_begin row; consecutive panels are
// panel_stride bytes apart; all S panels hold 64 valid columns.
static_assert(kMaxStreams == 4);  // row_streams<D, 2..4>

// near / far: kernels/prefetch.h distances (0 = none).
template <DType D, int S>
void row_streams(const float* x, const uint8_t* w, int64_t panel_stride, int64_t kn, float* y, int64_t near,
                 int64_t far) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  constexpr int64_t kGroup = 32 * element_size<D>();
  __m512 acc[S][4];
  for (int s = 0; s < S; ++s) {
    for (int v = 0; v < 4; ++v) acc[s][v] = _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < kn; ++kk) {
    const __m512 xb = _mm512_set1_ps(x[kk]);
    for (int s = 0; s < S; ++s) {
      const uint8_t* wk = w + s * panel_stride + kk * kStep;
      for (int64_t line = 0; line < kStep; line += 64) {
        if (near != 0) _mm_prefetch(reinterpret_cast<const char*>(wk + near + line), _MM_HINT_T0);
        if (far != 0) _mm_prefetch(reinterpret_cast<const char*>(wk + far + line), _MM_HINT_T1);
      }
      __m512 wv[4];
      load_group<D>(wk, wv[0], wv[1]);
      load_group<D>(wk + kGroup, wv[2], wv[3]);
      for (int v = 0; v < 4; ++v) acc[s][v] = _mm512_fmadd_ps(xb, wv[v], acc[s][v]);
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(y + s * kPanel + 16 * v, acc[s][v]);
  }
}

template <DType D>
void matmul_typed(const MatmulArgs& a) {
  // Full-panel blocks for 1..4 rows, single-group blocks for 5..8 rows.
  static constexpr PanelKernels<float> kKernels = {
      {nullptr, block<D, 1, 2>, block<D, 2, 2>, block<D, 3, 2>, block<D, 4, 2>},
      {block<D, 5, 1>, block<D, 6, 1>, block<D, 7, 1>, block<D, 8, 1>},
      {nullptr, nullptr, row_streams<D, 2>, row_streams<D, 3>, row_streams<D, 4>},
  };
  drive_panels(a, a.x, a.ldx, element_size<D>(), kKernels);
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

}  // namespace tandem::kernels::avx512
