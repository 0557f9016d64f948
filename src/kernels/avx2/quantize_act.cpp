// avx2/quantize_act.cpp — quant::quantize_activations with AVX2, byte for
// byte the scalar rule (ADR 0062): the same amax (max ignores NaN, as
// std::max(amax, |x|) does), the same d and 1/d computed in scalar, and
// round-half-away-from-zero built exactly as trunc(p) + (|p - trunc(p)| >= 0.5
// ? sign(p) : 0) (p - trunc(p) is exact), then the same clamp and NaN → 0.
// Also q4_0 weight blocks (quantize_q4_0), byte for byte quant/quantize.cpp's
// rule (ADR 0064).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "avx2/avx2.h"
#include "core/check.h"
#include "dtype_convert.h"

namespace tandem::kernels::avx2 {
namespace {

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// std::round(p), clamped to [-127, 127], NaN -> 0: as int32 lanes.
__m256i code(__m256 p) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(p, t));
  const __m256 away = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(p, sign), _mm256_set1_ps(1.0f));
  __m256 r = _mm256_add_ps(t, _mm256_and_ps(away, one));
  const __m256 ordered = _mm256_cmp_ps(r, r, _CMP_ORD_Q);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvttps_epi32(_mm256_and_ps(r, ordered));
}

}  // namespace

void quantize_activations(const float* x, int64_t k, quant::ActBlock* out) {
  TANDEM_CHECK(k % 32 == 0);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / 32; ++b, x += 32, ++out) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 8 * j);
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[j]), m);  // a NaN lane keeps m (the second operand)
    }
    const float amax = hmax(m);
    const float d = amax / 127.0f;
    const float id = d == 0.0f ? 0.0f : 1.0f / d;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = code(_mm256_mul_ps(v[j], vid));
    // packs work per 128-bit lane: [q0 lo, q1 lo, q2 lo, q3 lo | q0 hi, …]; the
    // permutation puts the eight 4-byte pieces back in element order.
    const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q), bytes);
    out->d = d;
    out->sum_lo = hsum(_mm256_add_epi32(q[0], q[1]));
    out->sum_hi = hsum(_mm256_add_epi32(q[2], q[3]));
    out->sum = out->sum_lo + out->sum_hi;
  }
}

void quantize_q4_0(const float* x, int64_t blocks, uint8_t* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < blocks; ++b, x += 32, out += 18) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 8 * j);
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[j]), m);  // a NaN lane keeps m
    }
    // The signed value of largest magnitude, the first one on ties (the scalar
    // rule's strict > over i); +0 when every |x| is 0 (or NaN).
    const float amax = hmax(m);
    float max = 0.0f;
    if (amax > 0.0f) {
      for (int i = 0; i < 32; ++i) {
        if (std::fabs(x[i]) == amax) {
          max = x[i];
          break;
        }
      }
    }
    const float d = max / -8.0f;
    const float id = d == 0.0f ? 0.0f : 1.0f / d;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(out, &h, 2);
    // trunc(x · id + 8.5) (a product, then a sum: no FMA), clamped to 0..15,
    // NaN -> 0: max_ps returns its second operand (0) for a NaN lane.
    const __m256 vid = _mm256_set1_ps(id), half = _mm256_set1_ps(8.5f);
    alignas(32) int32_t q[32];
    for (int j = 0; j < 4; ++j) {
      const __m256 t = _mm256_round_ps(_mm256_add_ps(_mm256_mul_ps(v[j], vid), half),
                                       _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 c = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(15.0f));
      _mm256_store_si256(reinterpret_cast<__m256i*>(q + 8 * j), _mm256_cvttps_epi32(c));
    }
    for (int i = 0; i < 16; ++i) out[2 + i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
  }
}

}  // namespace tandem::kernels::avx2
