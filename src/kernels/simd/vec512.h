// simd/vec512.h — a thin f32 vector wrapper over AVX-512 (16 lanes) for the
// shared kernel templates in simd/*_impl.h. Include only from translation
// units compiled with the AVX-512 flags (avx512/*.cpp). Everything has
// internal linkage, so the AVX2 build of the same templates cannot clash.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tandem::kernels {
namespace {

struct Vec512 {
  using F = __m512;
  static constexpr int kLanes = 16;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static __mmask16 mask(int64_t count) {
    return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1);
  }
  // Lanes past `count` read as `fill` and are never touched in memory.
  static F load_partial(const float* p, int64_t count, float fill = 0.0f) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), mask(count), p);
  }
  static void store_partial(float* p, F v, int64_t count) { _mm512_mask_storeu_ps(p, mask(count), v); }
  static F load_bf16_partial(const uint16_t* p, int64_t count) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask(count), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F load_f16_partial(const uint16_t* p, int64_t count) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(count), p));
  }

  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  // Exchanges lanes (2i, 2i+1).
  static F swap_pairs(F v) { return _mm512_permute_ps(v, 0xb1); }

  // Fixed shuffle trees: the same lanes are combined in the same order on
  // every call, so a sum depends only on the vector's contents.
  static float reduce_add(F v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }

  // e^x for f32 lanes, <= 2 ulp on [-87, 88] (Cephes polynomial after
  // reduction by ln 2); 0 (or the smallest subnormal) below -104, inf above
  // 88.72, NaN propagates.
  static F exp(F x) {
    const F xc = _mm512_max_ps(_mm512_min_ps(x, set1(88.7228394f)), set1(-104.0f));
    const F n = _mm512_roundscale_ps(mul(xc, set1(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm512_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    F p = set1(1.9875691500e-4f);
    p = fmadd(p, r, set1(1.3981999507e-3f));
    p = fmadd(p, r, set1(8.3334519073e-3f));
    p = fmadd(p, r, set1(4.1665795894e-2f));
    p = fmadd(p, r, set1(1.6666665459e-1f));
    p = fmadd(p, r, set1(5.0000001201e-1f));
    const F y = add(fmadd(p, mul(r, r), r), set1(1.0f));
    const F result = _mm512_scalef_ps(y, n);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), result, x);
  }
};

}  // namespace
}  // namespace tandem::kernels
