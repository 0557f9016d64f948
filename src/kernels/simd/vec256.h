// simd/vec256.h — the same f32 vector wrapper as simd/vec512.h over AVX2 +
// FMA + F16C (8 lanes). Include only from avx2/*.cpp. Internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tandem::kernels {
namespace {

struct Vec256 {
  using F = __m256;
  static constexpr int kLanes = 8;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static __m256i mask(int64_t count) {
    const int c = count >= 8 ? 8 : static_cast<int>(count);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // Lanes past `count` read as `fill` and are never touched in memory.
  static F load_partial(const float* p, int64_t count, float fill = 0.0f) {
    const __m256i m = mask(count);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store_partial(float* p, F v, int64_t count) { _mm256_maskstore_ps(p, mask(count), v); }
  static __m128i load_u16_partial(const uint16_t* p, int64_t count) {
    if (count >= 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    alignas(16) uint16_t tmp[8] = {};
    for (int64_t i = 0; i < count; ++i) tmp[i] = p[i];
    return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  }
  static F load_bf16_partial(const uint16_t* p, int64_t count) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_u16_partial(p, count)), 16));
  }
  static F load_f16_partial(const uint16_t* p, int64_t count) {
    return _mm256_cvtph_ps(load_u16_partial(p, count));
  }

  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F swap_pairs(F v) { return _mm256_permute_ps(v, 0xb1); }

  static float reduce_add(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(F v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  // e^x, <= 2 ulp on [-87.3, 88.7] (Cephes polynomial); 0 below -87.33 (the
  // true value is under 1.2e-38), inf above 88.72, NaN propagates.
  static F exp(F x) {
    const F xc = _mm256_max_ps(_mm256_min_ps(x, set1(88.7228394f)), set1(-87.33f));
    const F n =
        _mm256_round_ps(mul(xc, set1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm256_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    F p = set1(1.9875691500e-4f);
    p = fmadd(p, r, set1(1.3981999507e-3f));
    p = fmadd(p, r, set1(8.3334519073e-3f));
    p = fmadd(p, r, set1(4.1665795894e-2f));
    p = fmadd(p, r, set1(1.6666665459e-1f));
    p = fmadd(p, r, set1(5.0000001201e-1f));
    const F y = add(fmadd(p, mul(r, r), r), set1(1.0f));
    // 2^n by building the exponent field; n in [-126, 128] (128 gives inf).
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    F result = mul(y, _mm256_castsi256_ps(e));
    result = _mm256_blendv_ps(result, zero(), _mm256_cmp_ps(x, set1(-87.33f), _CMP_LT_OQ));
    return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
};

}  // namespace
}  // namespace tandem::kernels
