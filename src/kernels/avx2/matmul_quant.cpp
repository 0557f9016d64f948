// avx2/matmul_quant.cpp — the AVX2 quantized matmul (layout: quant/layout.h;
// numerics: ADR 0013, defined by reference/matmul_quant.cpp). The AVX-512
// kernel's scheme on ymm: a 16-output group is two halves of 8 lanes; per
// quad the 4 x bytes are broadcast and one vpdpbusd (AVX-VNNI) or vpmaddubsw
// + vpmaddwd (exact for 4-6-bit codes; q8_0 through |q|, sign(q)·x) adds the
// products into each output's int32 lane (codes of <= 5 bits without VNNI:
// int16 pair sums over a half-block, widened once). The per-block f32 step is the
// reference's roundings, so the bits equal the reference's. 16 ymm
// registers: a lone row takes two groups at once (from two contiguous runs:
// two long streams), more rows go two at a time.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "avx2/avx2.h"
#include "core/cpu_features.h"
#include "kernels/prefetch.h"

namespace tandem::kernels::avx2 {
namespace {

using quant::ActBlock;
using quant::kGroup;
using quant::kQuadBytes;

// Software prefetch: PrefetchPolicy::quant_bytes (kernels/prefetch.h) down
// each group's stream into L1, and the rows' activation blocks kActAhead
// blocks ahead (both off with quant=0).
constexpr int64_t kActAhead = 8;

template <bool Vnni, DType D>
inline __m256i dot4(__m256i acc, __m256i codes, __m256i x) {
  if constexpr (Vnni) {
    return _mm256_dpbusd_avx_epi32(acc, codes, x);  // q8_0: sum((q + 128)·x), corrected in the step
  } else if constexpr (D == DType::q8_0) {
    const __m256i q = _mm256_xor_si256(codes, _mm256_set1_epi8(static_cast<char>(0x80)));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  } else {
    const __m256i p16 = _mm256_maddubs_epi16(codes, x);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
}

// Without VNNI, codes of at most 5 bits keep the four quads' vpmaddubsw
// pairs in int16 and widen once (vpmaddwd) per half instead of per quad:
// each int16 lane sums 8 products of a code <= 31 and |x| <= 127 (at most
// 31496, no saturation), so the int32 sums — and the bits — are the same,
// with a third fewer dot-product instructions. (q6_k's 63 and q8_0's 127
// would overflow.)
template <bool Vnni, DType D>
constexpr bool kSum16 =
    !Vnni && (D == DType::q4_0 || D == DType::q4_k || D == DType::q5_0 || D == DType::q5_k);

// 32 bits -> 32 bytes, 16 where the bit is set (q5_k's fifth bit).
inline __m256i bits_to_sixteens(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                           2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// Codes of quads jj (lo) and jj + 4 (hi) for outputs 8h..8h+7 of one tile.
template <DType D>
inline void quad_codes(const uint8_t* tile, int jj, int h, __m256i& lo, __m256i& hi) {
  auto load = [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  if constexpr (D == DType::q8_0) {
    lo = load(tile + jj * kQuadBytes + 32 * h);
    hi = load(tile + (jj + 4) * kQuadBytes + 32 * h);
  } else {
    const __m256i mask = _mm256_set1_epi8(15);
    const __m256i v = load(tile + jj * kQuadBytes + 32 * h);
    lo = _mm256_and_si256(v, mask);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
    if constexpr (D == DType::q5_k || D == DType::q5_0) {
      uint32_t blo, bhi;
      std::memcpy(&blo, tile + 256 + jj * 8 + 4 * h, 4);
      std::memcpy(&bhi, tile + 256 + (jj + 4) * 8 + 4 * h, 4);
      lo = _mm256_or_si256(lo, bits_to_sixteens(blo));
      hi = _mm256_or_si256(hi, bits_to_sixteens(bhi));
    } else if constexpr (D == DType::q6_k) {
      const __m256i m30 = _mm256_set1_epi8(0x30);
      const __m256i h0 = load(tile + 256 + 32 * h);
      const __m256i h1 = load(tile + 256 + kQuadBytes + 32 * h);
      __m256i s0, s1;
      switch (jj) {
        case 0:
          s0 = _mm256_slli_epi16(h0, 4), s1 = _mm256_slli_epi16(h1, 4);
          break;
        case 1:
          s0 = _mm256_slli_epi16(h0, 2), s1 = _mm256_slli_epi16(h1, 2);
          break;
        case 2:
          s0 = h0, s1 = h1;
          break;
        default:
          s0 = _mm256_srli_epi16(h0, 2), s1 = _mm256_srli_epi16(h1, 2);
          break;
      }
      lo = _mm256_or_si256(lo, _mm256_and_si256(s0, m30));
      hi = _mm256_or_si256(hi, _mm256_and_si256(s1, m30));
    }
  }
}

inline __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 u8x8_to_f32(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// The reference's f32 step for one 32-block, outputs 8h..8h+7.
template <bool Vnni, DType D>
inline __m256 block_step(const uint8_t* sb, int64_t sub, int h, __m256i lo, __m256i hi, const ActBlock& x,
                         __m256 acc) {
  const __m256 dx = _mm256_set1_ps(x.d);
  if constexpr (D == DType::q8_0 || D == DType::q4_0 || D == DType::q5_0) {
    __m256i dot = _mm256_add_epi32(lo, hi);
    const int32_t offset = D == DType::q4_0   ? 8 * x.sum
                           : D == DType::q5_0 ? 16 * x.sum
                                              : (Vnni ? 128 * x.sum : 0);
    dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(offset));
    const __m256 t = _mm256_mul_ps(load_f16x8(sb + 16 * h), dx);
    return _mm256_fmadd_ps(t, _mm256_cvtepi32_ps(dot), acc);
  } else if constexpr (D == DType::q4_k || D == DType::q5_k) {
    const __m256 a = _mm256_mul_ps(load_f16x8(sb + 16 * h), u8x8_to_f32(sb + 64 + sub * kGroup + 8 * h));
    const __m256 b =
        _mm256_mul_ps(load_f16x8(sb + 32 + 16 * h), u8x8_to_f32(sb + 192 + sub * kGroup + 8 * h));
    const __m256 p = _mm256_mul_ps(b, _mm256_set1_ps(static_cast<float>(x.sum)));
    const __m256 t = _mm256_fmsub_ps(a, _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi)), p);
    return _mm256_fmadd_ps(dx, t, acc);
  } else {
    auto sc = [&](int64_t row) {
      return _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 32 + row * kGroup + 8 * h)));
    };
    const __m256i ilo = _mm256_sub_epi32(lo, _mm256_set1_epi32(32 * x.sum_lo));
    const __m256i ihi = _mm256_sub_epi32(hi, _mm256_set1_epi32(32 * x.sum_hi));
    const __m256i j =
        _mm256_add_epi32(_mm256_mullo_epi32(sc(2 * sub), ilo), _mm256_mullo_epi32(sc(2 * sub + 1), ihi));
    const __m256 t = _mm256_mul_ps(load_f16x8(sb + 16 * h), dx);
    return _mm256_fmadd_ps(t, _mm256_cvtepi32_ps(j), acc);
  }
}

inline void store_cols(float* y, __m256 v, int64_t cols) {
  if (cols >= 8) {
    _mm256_storeu_ps(y, v);
  } else if (cols > 0) {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(y, tmp, static_cast<size_t>(cols) * sizeof(float));
  }
}

// R rows x G consecutive groups.
template <bool Vnni, DType D, int R, int G>
void tile_block(const quant::QuantMatmulArgs& a, const quant::Layout& L, const int64_t* gs,
                const ActBlock* const* xr, float* const* yr) {
  const int64_t subs = L.sb_elems / 32;
  const int64_t gbytes = L.group_bytes(a.k);
  const int64_t ahead = prefetch_policy().quant_bytes;
  const uint8_t* group[G];
  for (int g = 0; g < G; ++g) group[g] = a.w + gs[g] * gbytes;
  __m256 acc[R][G][2];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) acc[r][g][0] = acc[r][g][1] = _mm256_setzero_ps();
  }
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t sub = b % subs;
    const int64_t sb_off = (b / subs) * L.sb_bytes();
    const int64_t tile_off = sb_off + L.header_bytes + sub * L.tile_bytes;
    // The activation blocks kActAhead ahead (avx512/matmul_quant.cpp: at a long k
    // they fall out of L1 behind each group's weight stream).
    if (ahead != 0 && b + kActAhead < a.block_end) {
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(xr[r] + b + kActAhead), _MM_HINT_T0);
    }
    for (int g = 0; g < G && ahead != 0; ++g) {
      const uint8_t* t = group[g] + tile_off;
      for (int64_t line = 0; line < L.tile_bytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(t + ahead + line), _MM_HINT_T0);
      }
    }
    for (int g = 0; g < G; ++g) {
      const uint8_t* tile = group[g] + tile_off;
      for (int h = 0; h < 2; ++h) {
        __m256i lo[R], hi[R];
        for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int jj = 0; jj < 4; ++jj) {
          __m256i clo, chi;
          quad_codes<D>(tile, jj, h, clo, chi);
          for (int r = 0; r < R; ++r) {
            int32_t wlo, whi;
            std::memcpy(&wlo, xr[r][b].q + 4 * jj, 4);
            std::memcpy(&whi, xr[r][b].q + 16 + 4 * jj, 4);
            if constexpr (kSum16<Vnni, D>) {  // int16 partial sums, widened once below
              lo[r] = _mm256_add_epi16(lo[r], _mm256_maddubs_epi16(clo, _mm256_set1_epi32(wlo)));
              hi[r] = _mm256_add_epi16(hi[r], _mm256_maddubs_epi16(chi, _mm256_set1_epi32(whi)));
            } else {
              lo[r] = dot4<Vnni, D>(lo[r], clo, _mm256_set1_epi32(wlo));
              hi[r] = dot4<Vnni, D>(hi[r], chi, _mm256_set1_epi32(whi));
            }
          }
        }
        if constexpr (kSum16<Vnni, D>) {
          const __m256i ones = _mm256_set1_epi16(1);
          for (int r = 0; r < R; ++r) {
            lo[r] = _mm256_madd_epi16(lo[r], ones);
            hi[r] = _mm256_madd_epi16(hi[r], ones);
          }
        }
        const uint8_t* sb = group[g] + sb_off;
        for (int r = 0; r < R; ++r)
          acc[r][g][h] = block_step<Vnni, D>(sb, sub, h, lo[r], hi[r], xr[r][b], acc[r][g][h]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) {
      const int64_t col = gs[g] * kGroup;
      store_cols(yr[r] + col, acc[r][g][0], a.n - col);
      store_cols(yr[r] + col + 8, acc[r][g][1], a.n - col - 8);
    }
  }
}

// A lone row (decode): the thread's groups as two contiguous runs walked
// side by side — two long weight streams in flight, the same bits.
template <bool Vnni, DType D>
void lone_row(const quant::QuantMatmulArgs& a, const quant::Layout& L, const ActBlock* const* xr,
              float* const* yr) {
  const int64_t len = a.group_end - a.group_begin;
  const int64_t half = len / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t gs[2] = {a.group_begin + i, a.group_begin + half + i};
    tile_block<Vnni, D, 1, 2>(a, L, gs, xr, yr);
  }
  if (len % 2 != 0) {
    const int64_t last = a.group_end - 1;
    tile_block<Vnni, D, 1, 1>(a, L, &last, xr, yr);
  }
}

template <bool Vnni, DType D>
void matmul_typed(const quant::QuantMatmulArgs& a) {
  const quant::Layout L = quant::layout_of(D);
  const int64_t xblocks = a.k / 32;
  const ActBlock* xr[2] = {a.x, nullptr};
  float* yr[2] = {a.y, nullptr};
  if (a.m == 1) return lone_row<Vnni, D>(a, L, xr, yr);
  for (int64_t g = a.group_begin; g < a.group_end; ++g) {
    for (int64_t r0 = 0; r0 < a.m; r0 += 2) {
      const int rows = static_cast<int>(std::min<int64_t>(2, a.m - r0));
      for (int r = 0; r < rows; ++r) {
        xr[r] = a.x + (r0 + r) * xblocks;
        yr[r] = a.y + (r0 + r) * a.ldy;
      }
      if (rows == 2) {
        tile_block<Vnni, D, 2, 1>(a, L, &g, xr, yr);
      } else {
        tile_block<Vnni, D, 1, 1>(a, L, &g, xr, yr);
      }
    }
  }
}

template <bool Vnni>
void dispatch(const quant::QuantMatmulArgs& a) {
  switch (a.dtype) {
    case DType::q8_0:
      return matmul_typed<Vnni, DType::q8_0>(a);
    case DType::q4_0:
      return matmul_typed<Vnni, DType::q4_0>(a);
    case DType::q5_0:
      return matmul_typed<Vnni, DType::q5_0>(a);
    case DType::q4_k:
      return matmul_typed<Vnni, DType::q4_k>(a);
    case DType::q5_k:
      return matmul_typed<Vnni, DType::q5_k>(a);
    case DType::q6_k:
      return matmul_typed<Vnni, DType::q6_k>(a);
    default:
      return;
  }
}

}  // namespace

void matmul_quant_no_vnni(const quant::QuantMatmulArgs& a) { dispatch<false>(a); }

void matmul_quant(const quant::QuantMatmulArgs& a) {
  static const bool vnni = cpu_features().avx_vnni;
  if (vnni) {
    dispatch<true>(a);
  } else {
    dispatch<false>(a);
  }
}

}  // namespace tandem::kernels::avx2
