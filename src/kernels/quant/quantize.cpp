// quant/quantize.cpp — f32 -> GGUF blocks (kernels::quantize).
//
// q8_0 and q4_0 follow gguf-py's Q8_0.quantize_blocks / Q4_0.quantize_blocks
// operation by operation in f32 (that is what makes them bit-identical; the
// golden test checks it). q4_k is tandem's own min/max fit (gguf-py has no
// K-quant quantizer to match): per 32-element sub-block a (scale, min) fit —
// the range, then a few rounds of least-squares refits — the 8 scales and 8
// mins quantized to 6 bits against super-block maxima, then the codes
// recomputed with the quantized scales (ADR 0014).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "dtype_convert.h"
#include "quant/formats.h"

namespace tandem::kernels {
namespace {

void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

void quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  store_f16(out, d);
  for (int i = 0; i < 32; ++i) {
    // np_roundf: half away from zero, as std::round. The clamp only matters
    // for non-finite input (a NaN weight must not be undefined behaviour).
    const float v = std::round(x[i] * id);
    out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(v == v ? std::clamp(v, -128.0f, 127.0f) : 0.0f));
  }
}

void quantize_q4_0(const float* x, uint8_t* out) {
  // The signed value of largest magnitude (first one on ties, as np.argmax).
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  store_f16(out, d);
  uint8_t q[32];
  for (int i = 0; i < 32; ++i) {
    const float t = std::trunc(x[i] * id + 8.5f);
    q[i] = static_cast<uint8_t>(t == t ? std::clamp(t, 0.0f, 15.0f) : 0.0f);  // NaN: see quantize_q8_0
  }
  for (int i = 0; i < 16; ++i) out[2 + i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
}

int clamp_round(float v, int hi) {
  if (!(v > 0.0f)) return 0;
  return static_cast<int>(std::min(std::nearbyint(v), static_cast<float>(hi)));
}

// x ≈ scale·q − min over 32 values, q in 0..15, min >= 0: starts from the
// range (lo <= 0 <= hi), then alternates rounding q with a least-squares
// refit of (scale, min) twice, keeping the fit with the smallest squared error.
void fit_sub_block(const float* x, float lo, float hi, float* scale_out, float* min_out) {
  float scale = (hi - lo) / 15.0f, min = -lo;
  float q[32];
  // Rounds q for (scale, min) and returns the squared error.
  auto round_q = [&](float a, float b) {
    const float inv = 1.0f / a;
    float e = 0;
    for (int i = 0; i < 32; ++i) {
      q[i] = std::clamp(std::nearbyint((x[i] + b) * inv), 0.0f, 15.0f);
      const float d = x[i] - (a * q[i] - b);
      e += d * d;
    }
    return e;
  };
  *scale_out = scale;
  *min_out = min;
  if (!(scale > 0)) return;
  float best = round_q(scale, min);
  for (int iter = 0; iter < 2; ++iter) {
    float sq = 0, sx = 0, sqq = 0, sqx = 0;
    for (int i = 0; i < 32; ++i) sq += q[i], sx += x[i], sqq += q[i] * q[i], sqx += q[i] * x[i];
    const float det = 32 * sqq - sq * sq;
    if (!(det > 0)) break;
    scale = (32 * sqx - sq * sx) / det;
    min = (scale * sq - sx) / 32;  // x ≈ scale·q − min
    if (min < 0) {                 // the format subtracts the min: keep it >= 0
      min = 0;
      scale = sqx / sqq;
    }
    if (!(scale > 0)) break;
    const float e = round_q(scale, min);
    if (!(e < best)) break;
    best = e;
    *scale_out = scale;
    *min_out = min;
  }
}

void quantize_q4_k(const float* x, uint8_t* out) {
  float scale[8], min[8];  // per sub-block: x ≈ scale·q − min, min >= 0
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < 32; ++i) {
      lo = std::min(lo, x[32 * j + i]);
      hi = std::max(hi, x[32 * j + i]);
    }
    fit_sub_block(x + 32 * j, lo, hi, &scale[j], &min[j]);
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  store_f16(out, d);
  store_f16(out + 2, dmin);
  const float dq = f16_to_f32(f32_to_f16(d)), dminq = f16_to_f32(f32_to_f16(dmin));
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(dq > 0.0f ? clamp_round(scale[j] / dq, 63) : 0);
    m[j] = static_cast<uint8_t>(dminq > 0.0f ? clamp_round(min[j] / dminq, 63) : 0);
  }
  uint8_t* s = out + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float dl = dq * static_cast<float>(sc[j]), ml = dminq * static_cast<float>(m[j]);
    for (int i = 0; i < 32; ++i)
      q[32 * j + i] = static_cast<uint8_t>(dl > 0.0f ? clamp_round((x[32 * j + i] + ml) / dl, 15) : 0);
  }
  uint8_t* qs = out + 16;
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 32; ++i)
      qs[32 * c + i] = static_cast<uint8_t>(q[64 * c + i] | (q[64 * c + 32 + i] << 4));
  }
}

}  // namespace

void quantize(const float* src, DType dtype, int64_t count, void* dst) {
  const int64_t be = dtype_block_elems(dtype);
  const size_t bb = dtype_block_bytes(dtype);
  TANDEM_CHECK(count % be == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < count / be; ++b, src += be, out += bb) {
    switch (dtype) {
      case DType::q8_0:
        quantize_q8_0(src, out);
        break;
      case DType::q4_0:
        quantize_q4_0(src, out);
        break;
      case DType::q4_k:
        quantize_q4_k(src, out);
        break;
      default:
        TANDEM_CHECK(false && "quantize: supported targets are q8_0, q4_0, q4_k");
    }
  }
}

}  // namespace tandem::kernels
