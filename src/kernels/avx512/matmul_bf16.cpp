// avx512/matmul_bf16.cpp — bf16 weights x bf16 activations with vdpbf16ps
// (AVX512_BF16; ADR 0082): the bf16 pairs chain of kernel_table.h, natively.
// Compiled with -mavx512bf16; matmul_bf16_pairs runs it only on a CPU that
// has the instruction, else the same kernels with two FMAs for each
// vdpbf16ps (matmul_bf16_pairs_emulated: the same bits).
//
// The weights are the ordinary bf16 panels (kernel_table.h: every 32-bit word
// of a k row holds columns i and 16 + i of a 32-column group). Two k rows give
// a group's pairs with two shifts and two word blends: lane i of `lo` holds
// (W[i][k], W[i][k+1]), lane i of `hi` (W[16+i][k], W[16+i][k+1]) — the operand
// vdpbf16ps dots with the broadcast (x[k], x[k+1]). One vdpbf16ps is the
// chain's two steps (odd k, then even k, each a DAZ / FTZ fma), so a row's
// 32 products cost one instruction, against two widenings and two FMAs on
// the f32 path. The blocking, passes and prefetching are the f32 kernel's
// (avx512/panel_driver.h).
#include <immintrin.h>

#include <cstring>

#include "avx512/avx512.h"
#include "avx512/panel_driver.h"
#include "core/cpu_features.h"

namespace tandem::kernels::avx512 {
namespace {

constexpr int64_t kRowBytes = kPanel * 2;  // one k row of a bf16 panel
constexpr int64_t kGroupBytes = 64;        // one 32-column group of a k row

// Group pairs from k rows k (at p) and k + 1 (at p + kRowBytes).
inline void load_pairs(const uint8_t* p, __m512i& lo, __m512i& hi) {
  const __m512i a = _mm512_loadu_si512(p), b = _mm512_loadu_si512(p + kRowBytes);
  constexpr __mmask32 kOdd = 0xaaaaaaaau;  // the upper word of every lane
  lo = _mm512_mask_blend_epi16(kOdd, a, _mm512_slli_epi32(b, 16));
  hi = _mm512_mask_blend_epi16(kOdd, _mm512_srli_epi32(a, 16), b);
}

// The last k of an odd count: (W[c][k], 0).
inline void load_last(const uint8_t* p, __m512i& lo, __m512i& hi) {
  const __m512i a = _mm512_loadu_si512(p);
  lo = _mm512_and_si512(a, _mm512_set1_epi32(0xffff));
  hi = _mm512_srli_epi32(a, 16);
}

// (x[k], x[k+1]) in every lane; `last`: (x[k], 0).
inline __m512i x_pair(const uint16_t* x, bool last) {
  uint32_t v;
  std::memcpy(&v, x, sizeof v);
  return _mm512_set1_epi32(static_cast<int>(last ? v & 0xffffu : v));
}

// One vdpbf16ps: acc += x.odd * w.odd, then += x.even * w.even. Without
// AVX512_BF16 the same two steps as FMAs of the widened halves (exact: a bf16
// widens to f32 exactly), under MXCSR DAZ | FTZ (matmul_bf16_pairs sets it):
// the same bits (checked against the instruction, ADR 0082).
template <bool Native>
inline __m512 dot(__m512 acc, __m512i w, __m512i x) {
  if constexpr (Native) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(w), reinterpret_cast<__m512bh&>(x));
  } else {
    const __m512i odd = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(x, odd)),
                          _mm512_castsi512_ps(_mm512_and_si512(w, odd)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
                           _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), acc);
  }
}

inline void prefetch_rows(const uint8_t* wk, const Prefetch& pf, int64_t q) {
  if (pf.near != 0) {
    for (int64_t line = 0; line < 2 * kRowBytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(wk + pf.near + line), _MM_HINT_T0);
  }
  if (pf.far != nullptr) {
    const uint8_t* f = pf.far + 2 * q * pf.far_step;
    for (int64_t line = 0; line < 2 * pf.far_step || line == 0; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(f + line), _MM_HINT_T1);
  }
}

// R rows x G groups (avx512/matmul.cpp's block, a k pair per step).
template <bool Native, int R, int G>
void block(const uint16_t* x, int64_t ldx, const uint8_t* w, int64_t kn, float* y, int64_t ldy, int64_t cols,
           Prefetch pf) {
  constexpr int V = 2 * G;
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const int64_t pairs = (kn + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const uint8_t* wk = w + 2 * q * kRowBytes;
    const bool last = 2 * q + 1 == kn;
    prefetch_rows(wk, pf, q);
    __m512i wv[V];
    for (int g = 0; g < G; ++g) {
      if (last) {
        load_last(wk + g * kGroupBytes, wv[2 * g], wv[2 * g + 1]);
      } else {
        load_pairs(wk + g * kGroupBytes, wv[2 * g], wv[2 * g + 1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512i xp = x_pair(x + r * ldx + 2 * q, last);
      for (int v = 0; v < V; ++v) acc[r][v] = dot<Native>(acc[r][v], wv[v], xp);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) store_cols(y + r * ldy + 16 * v, acc[r][v], cols - 16 * v);
  }
}

// One row x S whole panels (avx512/matmul.cpp's row_streams, a k pair per step).
template <bool Native, int S>
void row_streams(const uint16_t* x, const uint8_t* w, int64_t panel_stride, int64_t kn, float* y,
                 int64_t near, int64_t far) {
  __m512 acc[S][4];
  for (int s = 0; s < S; ++s) {
    for (int v = 0; v < 4; ++v) acc[s][v] = _mm512_setzero_ps();
  }
  const int64_t pairs = (kn + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const bool last = 2 * q + 1 == kn;
    const __m512i xp = x_pair(x + 2 * q, last);
    for (int s = 0; s < S; ++s) {
      const uint8_t* wk = w + s * panel_stride + 2 * q * kRowBytes;
      for (int64_t line = 0; line < 2 * kRowBytes; line += 64) {
        if (near != 0) _mm_prefetch(reinterpret_cast<const char*>(wk + near + line), _MM_HINT_T0);
        if (far != 0) _mm_prefetch(reinterpret_cast<const char*>(wk + far + line), _MM_HINT_T1);
      }
      __m512i wv[4];
      if (last) {
        load_last(wk, wv[0], wv[1]);
        load_last(wk + kGroupBytes, wv[2], wv[3]);
      } else {
        load_pairs(wk, wv[0], wv[1]);
        load_pairs(wk + kGroupBytes, wv[2], wv[3]);
      }
      for (int v = 0; v < 4; ++v) acc[s][v] = dot<Native>(acc[s][v], wv[v], xp);
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(y + s * kPanel + 16 * v, acc[s][v]);
  }
}

template <bool Native>
void matmul_pairs(const MatmulArgs& a) {
  static constexpr PanelKernels<uint16_t> kKernels = {
      {nullptr, block<Native, 1, 2>, block<Native, 2, 2>, block<Native, 3, 2>, block<Native, 4, 2>},
      {block<Native, 5, 1>, block<Native, 6, 1>, block<Native, 7, 1>, block<Native, 8, 1>},
      {nullptr, nullptr, row_streams<Native, 2>, row_streams<Native, 3>, row_streams<Native, 4>},
  };
  drive_panels(a, a.xb, a.ldxb, 2, kKernels);
}

}  // namespace

void matmul_bf16_pairs(const MatmulArgs& a) {
  static const bool native = cpu_features().avx512bf16;
  if (native) {
    matmul_pairs<true>(a);
  } else {
    matmul_bf16_pairs_emulated(a);
  }
}

void matmul_bf16_pairs_emulated(const MatmulArgs& a) {
  constexpr unsigned kDazFtz = 0x8040u;  // MXCSR: flush-to-zero (bit 15), denormals-are-zero (bit 6)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | kDazFtz);
  matmul_pairs<false>(a);
  _mm_setcsr(csr);
}

}  // namespace tandem::kernels::avx512
