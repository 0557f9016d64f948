// quant/activations.cpp — f32 activation rows -> ActBlocks (the q8_0 rule
// with an f32 scale): the reference rule. avx2/quantize_act.cpp gives the
// same bytes with AVX2 (ADR 0062: at B = 1 this serial step sat between the
// threaded matmuls); the test QuantActivations.* compares them byte for byte.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "quant/layout.h"

namespace tandem::kernels::quant {

void quantize_activations(const float* x, int64_t k, ActBlock* out) {
  TANDEM_CHECK(k % 32 == 0);
  for (int64_t b = 0; b < k / 32; ++b, x += 32, ++out) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d == 0.0f ? 0.0f : 1.0f / d;
    int32_t lo = 0, hi = 0;
    for (int i = 0; i < 32; ++i) {
      float v = std::round(x[i] * id);
      // NaN/inf inputs: keep the codes in range (the result is meaningless
      // either way; it must not be undefined behaviour).
      v = v == v ? std::clamp(v, -127.0f, 127.0f) : 0.0f;
      out->q[i] = static_cast<int8_t>(v);
      (i < 16 ? lo : hi) += out->q[i];
    }
    out->d = d;
    out->sum_lo = lo;
    out->sum_hi = hi;
    out->sum = lo + hi;
  }
}

}  // namespace tandem::kernels::quant
