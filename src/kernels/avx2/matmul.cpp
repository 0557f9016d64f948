// avx2/matmul.cpp — the AVX2 panel kernel (see kernel_table.h for the packed
// layout and the MatmulArgs contract).
//
// With 16 ymm registers a single row takes the whole 64-column panel (8
// accumulators, 8 independent FMA chains); two rows take it in two 32-column
// halves (2 x 4 accumulators). Either way lane j of an accumulator is one
// output column that sees exactly one FMA per k in increasing k, starting
// from +0 — the same chain for every row grouping, so results are batch
// invariant (and bitwise equal to the AVX-512 kernel's).
#include <immintrin.h>

#include <algorithm>

#include "avx2/avx2.h"

namespace tandem::kernels::avx2 {
namespace {

template <DType D>
constexpr int64_t element_size() {
  return D == DType::f32 ? 4 : 2;
}

template <DType D>
inline __m256 load_weights(const uint8_t* p) {
  if constexpr (D == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (D == DType::bf16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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

// R rows x (8 * NV) columns starting at w (already offset to the first
// column and k_begin); cols = valid columns from there.
template <DType D, int R, int NV>
void panel_block(const float* x, int64_t ldx, const uint8_t* w, int64_t kn, float* y, int64_t ldy,
                 int64_t cols) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  constexpr int64_t kVec = 8 * element_size<D>();
  __m256 acc[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (int64_t kk = 0; kk < kn; ++kk) {
    const uint8_t* wk = w + kk * kStep;
    __m256 xb[R];
    for (int r = 0; r < R; ++r) xb[r] = _mm256_broadcast_ss(x + r * ldx + kk);
    for (int v = 0; v < NV; ++v) {
      const __m256 wv = load_weights<D>(wk + v * kVec);
      for (int r = 0; r < R; ++r) acc[r][v] = _mm256_fmadd_ps(xb[r], wv, acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < NV; ++v) store_cols(y + r * ldy + 8 * v, acc[r][v], cols - 8 * v);
  }
}

template <DType D>
void matmul_typed(const MatmulArgs& a) {
  const int64_t kn = a.k_end - a.k_begin;
  constexpr int64_t es = element_size<D>();
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
    const uint8_t* w = a.w + ((p * a.k + a.k_begin) * kPanel) * es;
    float* y = a.y + p * kPanel;
    int64_t r = 0;
    for (; r + 2 <= a.m; r += 2) {
      const float* x = a.x + r * a.ldx + a.k_begin;
      panel_block<D, 2, 4>(x, a.ldx, w, kn, y + r * a.ldy, a.ldy, cols);
      if (cols > 32) panel_block<D, 2, 4>(x, a.ldx, w + 32 * es, kn, y + r * a.ldy + 32, a.ldy, cols - 32);
    }
    if (r < a.m) panel_block<D, 1, 8>(a.x + r * a.ldx + a.k_begin, a.ldx, w, kn, y + r * a.ldy, a.ldy, cols);
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
  }
}

}  // namespace tandem::kernels::avx2
