// avx512/matmul_quant.cpp — the AVX-512 quantized matmul (layout:
// quant/layout.h; numerics: ADR 0013, defined by reference/matmul_quant.cpp).
//
// Lanes run across the 16 outputs of a group. Per 32-block and quad j the
// codes of all 16 outputs are one zmm of bytes; x's 4 bytes of quad j are
// broadcast and one vpdpbusd adds the 4 products into each output's int32
// lane. Quads 0..3 and 4..7 go to two accumulators (the two 16-element
// halves q6_k scales separately). Integer sums are exact in any order, and
// the per-block f32 step is the reference's roundings, so the bits equal
// the reference's for every blocking: a lone row (decode) takes four groups
// at once from four contiguous runs of the thread's groups (four long weight
// streams, eight independent dot chains), two rows two groups, more rows
// blocks of up to four rows on one group (the group's stream is re-read from
// L1/L2 per row block).
//
// Without VNNI (AVX-512 BW only) the same dot product is vpmaddubsw +
// vpmaddwd — exact for the 4-6-bit codes; q8_0 takes the |q|, sign(q)·x form
// so the 16-bit pair sums cannot saturate.
#include <immintrin.h>

#include <algorithm>

#include "avx512/avx512.h"
#include "core/cpu_features.h"
#include "kernels/prefetch.h"

namespace tandem::kernels::avx512 {
namespace {

using quant::ActBlock;
using quant::kGroup;
using quant::kQuadBytes;

// Software prefetch: PrefetchPolicy::quant_bytes (kernels/prefetch.h) down
// each group's stream into L1, and the rows' activation blocks kActAhead
// blocks ahead (both off with quant=0).
constexpr int64_t kActAhead = 8;

// The true dot product sum(code · x.q) of 4-element quads, accumulated.
template <bool Vnni, DType D>
inline __m512i dot4(__m512i acc, __m512i codes, __m512i x) {
  if constexpr (Vnni) {
    return _mm512_dpbusd_epi32(acc, codes, x);  // q8_0: sum((q + 128)·x), corrected in the step
  } else if constexpr (D == DType::q8_0) {
    const __m512i q = _mm512_xor_si512(codes, _mm512_set1_epi8(static_cast<char>(0x80)));
    const __mmask64 neg = _mm512_movepi8_mask(q);
    const __m512i sx = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
    const __m512i p16 = _mm512_maddubs_epi16(_mm512_abs_epi8(q), sx);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
  } else {
    const __m512i p16 = _mm512_maddubs_epi16(codes, x);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
  }
}

// Codes of quads jj (lo) and jj + 4 (hi) of one tile, for 16 outputs.
template <DType D>
inline void quad_codes(const uint8_t* tile, int jj, __m512i& lo, __m512i& hi) {
  if constexpr (D == DType::q8_0) {
    lo = _mm512_loadu_si512(tile + jj * kQuadBytes);
    hi = _mm512_loadu_si512(tile + (jj + 4) * kQuadBytes);
  } else {
    const __m512i mask = _mm512_set1_epi8(15);
    const __m512i v = _mm512_loadu_si512(tile + jj * kQuadBytes);
    lo = _mm512_and_si512(v, mask);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
    if constexpr (D == DType::q5_k || D == DType::q5_0) {
      const __m512i sixteen = _mm512_set1_epi8(16);
      uint64_t bits_lo, bits_hi;
      __builtin_memcpy(&bits_lo, tile + 256 + jj * 8, 8);
      __builtin_memcpy(&bits_hi, tile + 256 + (jj + 4) * 8, 8);
      const __mmask64 blo = _cvtu64_mask64(bits_lo), bhi = _cvtu64_mask64(bits_hi);
      lo = _mm512_mask_add_epi8(lo, blo, lo, sixteen);
      hi = _mm512_mask_add_epi8(hi, bhi, hi, sixteen);
    } else if constexpr (D == DType::q6_k) {
      const __m512i m30 = _mm512_set1_epi8(0x30);
      const __m512i h0 = _mm512_loadu_si512(tile + 256);
      const __m512i h1 = _mm512_loadu_si512(tile + 256 + kQuadBytes);
      // bits 2jj..2jj+1 -> bits 4..5 (16-bit shifts; the 0x30 mask drops what
      // crossed a byte boundary).
      __m512i s0, s1;
      switch (jj) {
        case 0:
          s0 = _mm512_slli_epi16(h0, 4), s1 = _mm512_slli_epi16(h1, 4);
          break;
        case 1:
          s0 = _mm512_slli_epi16(h0, 2), s1 = _mm512_slli_epi16(h1, 2);
          break;
        case 2:
          s0 = h0, s1 = h1;
          break;
        default:
          s0 = _mm512_srli_epi16(h0, 2), s1 = _mm512_srli_epi16(h1, 2);
          break;
      }
      lo = _mm512_or_si512(lo, _mm512_and_si512(s0, m30));
      hi = _mm512_or_si512(hi, _mm512_and_si512(s1, m30));
    }
  }
}

inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 u8x16_to_f32(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The reference's f32 step for one 32-block (sb: super-block header).
template <bool Vnni, DType D>
inline __m512 block_step(const uint8_t* sb, int64_t sub, __m512i lo, __m512i hi, const ActBlock& x,
                         __m512 acc) {
  const __m512 dx = _mm512_set1_ps(x.d);
  if constexpr (D == DType::q8_0 || D == DType::q4_0 || D == DType::q5_0) {
    __m512i dot = _mm512_add_epi32(lo, hi);
    const int32_t offset = D == DType::q4_0   ? 8 * x.sum
                           : D == DType::q5_0 ? 16 * x.sum
                                              : (Vnni ? 128 * x.sum : 0);
    dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(offset));
    const __m512 t = _mm512_mul_ps(load_f16x16(sb), dx);
    return _mm512_fmadd_ps(t, _mm512_cvtepi32_ps(dot), acc);
  } else if constexpr (D == DType::q4_k || D == DType::q5_k) {
    const __m512 a = _mm512_mul_ps(load_f16x16(sb), u8x16_to_f32(sb + 64 + sub * kGroup));
    const __m512 b = _mm512_mul_ps(load_f16x16(sb + 32), u8x16_to_f32(sb + 192 + sub * kGroup));
    const __m512 p = _mm512_mul_ps(b, _mm512_set1_ps(static_cast<float>(x.sum)));
    const __m512 t = _mm512_fmsub_ps(a, _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), p);
    return _mm512_fmadd_ps(dx, t, acc);
  } else {
    const __m512i sc_lo =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 32 + 2 * sub * kGroup)));
    const __m512i sc_hi = _mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 32 + (2 * sub + 1) * kGroup)));
    const __m512i ilo = _mm512_sub_epi32(lo, _mm512_set1_epi32(32 * x.sum_lo));
    const __m512i ihi = _mm512_sub_epi32(hi, _mm512_set1_epi32(32 * x.sum_hi));
    const __m512i j = _mm512_add_epi32(_mm512_mullo_epi32(sc_lo, ilo), _mm512_mullo_epi32(sc_hi, ihi));
    const __m512 t = _mm512_mul_ps(load_f16x16(sb), dx);
    return _mm512_fmadd_ps(t, _mm512_cvtepi32_ps(j), acc);
  }
}

inline void store_cols(float* y, __m512 v, int64_t cols) {
  if (cols >= 16) {
    _mm512_storeu_ps(y, v);
  } else if (cols > 0) {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << cols) - 1), v);
  }
}

// R rows x G consecutive groups over blocks [b0, b1).
template <bool Vnni, DType D, int R, int G>
void tile_block(const quant::QuantMatmulArgs& a, const quant::Layout& L, const int64_t* gs,
                const ActBlock* const* xr, float* const* yr) {
  const int64_t subs = L.sb_elems / 32;
  const int64_t gbytes = L.group_bytes(a.k);
  const int64_t ahead = prefetch_policy().quant_bytes;
  const uint8_t* group[G];
  for (int g = 0; g < G; ++g) group[g] = a.w + gs[g] * gbytes;
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  for (int64_t b = a.block_begin; b < a.block_end; ++b) {
    const int64_t sub = b % subs;
    const int64_t sb_off = (b / subs) * L.sb_bytes();
    const int64_t tile_off = sb_off + L.header_bytes + sub * L.tile_bytes;
    __m512i lo[R][G], hi[R][G];
    for (int r = 0; r < R; ++r) {
      for (int g = 0; g < G; ++g) lo[r][g] = hi[r][g] = _mm512_setzero_si512();
    }
    // The activation blocks kActAhead ahead: at a long k (a down projection's 8,192:
    // 12 KB a row) they fall out of L1 behind each group's weight stream.
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
#pragma GCC unroll 4
    for (int jj = 0; jj < 4; ++jj) {
      __m512i xlo[R], xhi[R];
      for (int r = 0; r < R; ++r) {
        int32_t wlo, whi;
        __builtin_memcpy(&wlo, xr[r][b].q + 4 * jj, 4);
        __builtin_memcpy(&whi, xr[r][b].q + 16 + 4 * jj, 4);
        xlo[r] = _mm512_set1_epi32(wlo);
        xhi[r] = _mm512_set1_epi32(whi);
      }
      for (int g = 0; g < G; ++g) {
        __m512i clo, chi;
        quad_codes<D>(group[g] + tile_off, jj, clo, chi);
        for (int r = 0; r < R; ++r) {
          lo[r][g] = dot4<Vnni, D>(lo[r][g], clo, xlo[r]);
          hi[r][g] = dot4<Vnni, D>(hi[r][g], chi, xhi[r]);
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      const uint8_t* sb = group[g] + sb_off;
      for (int r = 0; r < R; ++r)
        acc[r][g] = block_step<Vnni, D>(sb, sub, lo[r][g], hi[r][g], xr[r][b], acc[r][g]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) store_cols(yr[r] + gs[g] * kGroup, acc[r][g], a.n - gs[g] * kGroup);
  }
}

// A lone row (decode): the thread's groups are cut into up to
// PrefetchPolicy::streams (at most kMaxRowStreams) contiguous runs walked side by
// side — that many long weight streams in flight instead of one (consecutive
// groups are only k/32 tiles long, and lie back to back: one run is one
// contiguous stream), the same bits (each output's chain is its own).
constexpr int kStreams = kMaxRowStreams;

template <bool Vnni, DType D>
void lone_row(const quant::QuantMatmulArgs& a, const quant::Layout& L, const ActBlock* const* xr,
              float* const* yr) {
  const int64_t len = a.group_end - a.group_begin;
  if (len <= 0) return;
  const int64_t streams = std::min<int64_t>(std::clamp(a.streams, 1, kStreams), len);
  int64_t start[kStreams], size[kStreams];
  for (int64_t s = 0; s < streams; ++s) {
    start[s] = a.group_begin + s * len / streams;
    size[s] = a.group_begin + (s + 1) * len / streams - start[s];
  }
  for (int64_t i = 0; i < size[0]; ++i) {  // run 0 is the shortest
    int64_t gs[kStreams];
    int count = 0;
    for (int64_t s = 0; s < streams; ++s) {
      if (i < size[s]) gs[count++] = start[s] + i;
    }
    switch (count) {
      case 4:
        tile_block<Vnni, D, 1, 4>(a, L, gs, xr, yr);
        break;
      case 3:
        tile_block<Vnni, D, 1, 3>(a, L, gs, xr, yr);
        break;
      case 2:
        tile_block<Vnni, D, 1, 2>(a, L, gs, xr, yr);
        break;
      default:
        tile_block<Vnni, D, 1, 1>(a, L, gs, xr, yr);
        break;
    }
  }
  // Runs longer than run 0 by one group: their last groups.
  int64_t gs[kStreams];
  int count = 0;
  for (int64_t s = 0; s < streams; ++s) {
    if (size[s] > size[0]) gs[count++] = start[s] + size[s] - 1;
  }
  if (count == 3) tile_block<Vnni, D, 1, 3>(a, L, gs, xr, yr);
  if (count == 2) tile_block<Vnni, D, 1, 2>(a, L, gs, xr, yr);
  if (count == 1) tile_block<Vnni, D, 1, 1>(a, L, gs, xr, yr);
}

template <bool Vnni, DType D>
void matmul_typed(const quant::QuantMatmulArgs& a) {
  const quant::Layout L = quant::layout_of(D);
  const int64_t xblocks = a.k / 32;
  const ActBlock* xr[4];
  float* yr[4];
  for (int r = 0; r < std::min<int64_t>(a.m, 2); ++r) {
    xr[r] = a.x + r * xblocks;
    yr[r] = a.y + r * a.ldy;
  }
  if (a.m == 1) return lone_row<Vnni, D>(a, L, xr, yr);
  if (a.m == 2) {
    for (int64_t g = a.group_begin; g < a.group_end;) {
      const int64_t gs[2] = {g, g + 1};
      if (a.group_end - g >= 2) {
        tile_block<Vnni, D, 2, 2>(a, L, gs, xr, yr), g += 2;
      } else {
        tile_block<Vnni, D, 2, 1>(a, L, gs, xr, yr), g += 1;
      }
    }
    return;
  }
  for (int64_t g = a.group_begin; g < a.group_end; ++g) {
    for (int64_t r0 = 0; r0 < a.m; r0 += 4) {
      const int rows = static_cast<int>(std::min<int64_t>(4, a.m - r0));
      for (int r = 0; r < rows; ++r) {
        xr[r] = a.x + (r0 + r) * xblocks;
        yr[r] = a.y + (r0 + r) * a.ldy;
      }
      switch (rows) {
        case 4:
          tile_block<Vnni, D, 4, 1>(a, L, &g, xr, yr);
          break;
        case 3:
          tile_block<Vnni, D, 3, 1>(a, L, &g, xr, yr);
          break;
        case 2:
          tile_block<Vnni, D, 2, 1>(a, L, &g, xr, yr);
          break;
        default:
          tile_block<Vnni, D, 1, 1>(a, L, &g, xr, yr);
          break;
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
  static const bool vnni = cpu_features().avx512vnni;
  if (vnni) {
    dispatch<true>(a);
  } else {
    dispatch<false>(a);
  }
}

}  // namespace tandem::kernels::avx512
