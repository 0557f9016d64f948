// avx512/matmul.cpp — the AVX-512 panel kernel (see kernel_table.h for the
// packed layout and the MatmulArgs contract).
//
// One pass over a 64-column panel computes up to kRows rows: per k step the
// 64 weights are loaded and widened once into 4 zmm (16 columns each) and
// FMA'd into kRows x 4 accumulators with x[r][k] broadcast. Lane j of
// accumulator (r, v) is output column 16v + j of row r and sees exactly one
// FMA per k in increasing k, starting from +0 — the same chain whether the
// row is alone or one of kRows, so results are batch invariant. More than
// kRows rows re-stream the panel from L2 (it is at most k * 256 bytes).
#include <immintrin.h>

#include <algorithm>

#include "avx512/avx512.h"

namespace tandem::kernels::avx512 {
namespace {

constexpr int kRows = 4;

template <DType D>
inline __m512 load_weights(const void* p) {
  if constexpr (D == DType::f32) {
    return _mm512_loadu_ps(p);
  } else if constexpr (D == DType::bf16) {
    const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  }
}

template <DType D>
constexpr int64_t element_size() {
  return D == DType::f32 ? 4 : 2;
}

// rows x 64 columns of one panel over k in [0, kn); w points at the panel's k_begin row.
template <DType D, int R>
void panel_block(const float* x, int64_t ldx, const uint8_t* w, int64_t kn, float* y, int64_t ldy,
                 int64_t cols) {
  constexpr int64_t kStep = kPanel * element_size<D>();
  constexpr int64_t kVec = 16 * element_size<D>();
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < kn; ++kk) {
    const uint8_t* wk = w + kk * kStep;
    const __m512 w0 = load_weights<D>(wk), w1 = load_weights<D>(wk + kVec);
    const __m512 w2 = load_weights<D>(wk + 2 * kVec), w3 = load_weights<D>(wk + 3 * kVec);
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * ldx + kk]);
      acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(xb, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(xb, w3, acc[r][3]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* yr = y + r * ldy;
    if (cols == kPanel) {
      for (int v = 0; v < 4; ++v) _mm512_storeu_ps(yr + 16 * v, acc[r][v]);
    } else {
      for (int v = 0; v < 4; ++v) {
        const int64_t c = std::clamp<int64_t>(cols - 16 * v, 0, 16);
        _mm512_mask_storeu_ps(yr + 16 * v, static_cast<__mmask16>((1u << c) - 1), acc[r][v]);
      }
    }
  }
}

template <DType D>
void matmul_typed(const MatmulArgs& a) {
  const int64_t kn = a.k_end - a.k_begin;
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
    const uint8_t* w = a.w + ((p * a.k + a.k_begin) * kPanel) * element_size<D>();
    float* y = a.y + p * kPanel;
    for (int64_t r = 0; r < a.m; r += kRows) {
      const float* x = a.x + r * a.ldx + a.k_begin;
      float* yr = y + r * a.ldy;
      switch (std::min<int64_t>(kRows, a.m - r)) {
        case 4:
          panel_block<D, 4>(x, a.ldx, w, kn, yr, a.ldy, cols);
          break;
        case 3:
          panel_block<D, 3>(x, a.ldx, w, kn, yr, a.ldy, cols);
          break;
        case 2:
          panel_block<D, 2>(x, a.ldx, w, kn, yr, a.ldy, cols);
          break;
        default:
          panel_block<D, 1>(x, a.ldx, w, kn, yr, a.ldy, cols);
          break;
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
  }
}

}  // namespace tandem::kernels::avx512
