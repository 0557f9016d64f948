// quant/quantize_k.cpp — q4_k, q6_k and q5_0 blocks exactly as llama.cpp's
// reference quantizers make them (quant/quantize_blocks.h, ADR 0046).
//
// Every sum below runs in index order in f32 and every product and quotient
// is written in the order the reference evaluates it: f32 addition is not
// associative, so a reordered sum can round a code or a scale differently.
#include <cmath>
#include <cstring>

#include "dtype_convert.h"
#include "quant/q4_k_fit.h"
#include "quant/quantize_blocks.h"

namespace tandem::kernels::quant {

int round_like_ggml(float v) {
  const float shifted = v + 12582912.0f;  // 1.5 · 2^23
  int32_t bits = 0;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

namespace {

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

float load_f16(const uint8_t* p) {
  uint16_t h = 0;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// One 16-value sub-block of q6_k: x ≈ scale·(q − 32), q in 0..63, weights
// x², the best of −32/max and 18 trials −(32 + 0.1·s)/max, s = ±1..±9
// (llama.cpp's make_qx_quants, rmse_type 1). Writes the codes; returns the scale.
float fit_q6_k_sub_block(const float* x, uint8_t* q) {
  constexpr int kN = 16;
  float amax = 0, max = 0;
  for (int i = 0; i < kN; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {  // all zero
    std::memset(q, 0, kN);
    return 0.0f;
  }
  float inv = -32.0f / max;
  // Sums of w·x·l and w·l·l for the codes of `inv` (w = x²).
  float sum_lx = 0, sum_l2 = 0;
  auto accumulate = [&](float scale_inv, uint8_t* codes) {
    sum_lx = 0;
    sum_l2 = 0;
    for (int i = 0; i < kN; ++i) {
      const int l = clamp_int(round_like_ggml(scale_inv * x[i]), -32, 31);
      if (codes != nullptr) codes[i] = static_cast<uint8_t>(l + 32);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  accumulate(inv, q);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    inv = -(32.0f + 0.1f * static_cast<float>(step)) / max;
    accumulate(inv, nullptr);
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < kN; ++i)
        q[i] = static_cast<uint8_t>(32 + clamp_int(round_like_ggml(inv * x[i]), -32, 31));
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

}  // namespace

void quantize_block_q5_0(const float* x, uint8_t* out) {
  // The signed value of largest magnitude (the first one on ties).
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -16.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  store_f16(out, d);
  // The reference truncates x·id + 16.5 to an integer and takes min(31, ·);
  // for finite input that is 0..31. The clamp keeps NaN / inf defined.
  auto code = [&](float v) {
    const float t = std::trunc(v * id + 16.5f);
    return static_cast<uint32_t>(t == t ? (t < 0.0f ? 0.0f : t > 31.0f ? 31.0f : t) : 0.0f);
  };
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    const uint32_t lo = code(x[i]), hi = code(x[i + 16]);
    out[6 + i] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
    qh |= ((lo >> 4) & 1) << i;
    qh |= ((hi >> 4) & 1) << (i + 16);
  }
  std::memcpy(out + 2, &qh, 4);
}

// Weights |x| + rms(x) per 32-value sub-block: large values count more,
// small ones still count.
void q4_k_weights(const float* x, float* w) {
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int i = 0; i < 32; ++i) sum_x2 += xs[i] * xs[i];
    const float rms = std::sqrt(sum_x2 / 32.0f);
    for (int i = 0; i < 32; ++i) w[32 * j + i] = rms + std::fabs(xs[i]);
  }
}

void q4_k_finish(const float* x, uint8_t* q, const float* scale, const float* min, uint8_t* out) {
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    if (scale[j] > max_scale) max_scale = scale[j];
    if (min[j] > max_min) max_min = min[j];
  }
  // 6-bit scales and mins against the super-block maxima. The reference
  // narrows the rounded value to 8 bits before min(63, ·): kept as such.
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    const auto ls = static_cast<uint8_t>(round_like_ggml(inv_scale * scale[j]));
    const auto lm = static_cast<uint8_t>(round_like_ggml(inv_min * min[j]));
    sc[j] = ls < 63 ? ls : 63;
    m[j] = lm < 63 ? lm : 63;
  }
  store_f16(out, max_scale / 63.0f);
  store_f16(out + 2, max_min / 63.0f);
  uint8_t* s = out + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  // The codes again against the stored (f16, 6-bit) scale and min. A
  // sub-block whose scale rounds to 0 keeps the fit's codes, as in the reference.
  const float d = load_f16(out), dmin = load_f16(out + 2);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * static_cast<float>(sc[j]);
    if (dl == 0) continue;
    const float ml = dmin * static_cast<float>(m[j]);
    for (int i = 0; i < 32; ++i)
      q[32 * j + i] = static_cast<uint8_t>(clamp_int(round_like_ggml((x[32 * j + i] + ml) / dl), 0, 15));
  }
  uint8_t* qs = out + 16;
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 32; ++i)
      qs[32 * c + i] = static_cast<uint8_t>(q[64 * c + i] | (q[64 * c + 32 + i] << 4));
  }
}

void quantize_q4_k_reference(const float* x, int64_t blocks, uint8_t* out) {
  quantize_q4_k_blocks<4>(x, blocks, out);
}

void quantize_block_q6_k(const float* x, uint8_t* out) {
  uint8_t q[256];
  float scale[16];
  float max_scale = 0, max_abs = 0;
  for (int b = 0; b < 16; ++b) {
    scale[b] = fit_q6_k_sub_block(x + 16 * b, q + 16 * b);
    if (std::fabs(scale[b]) > max_abs) {
      max_abs = std::fabs(scale[b]);
      max_scale = scale[b];
    }
  }
  std::memset(out, 0, 210);
  if (max_abs < 1e-15f) return;  // every code, scale and d zero
  // 8-bit signed scales: the largest-magnitude one maps to −128.
  const float inv = -128.0f / max_scale;
  store_f16(out + 208, 1 / inv);
  auto* sc = reinterpret_cast<int8_t*>(out + 192);
  for (int b = 0; b < 16; ++b) {
    const int r = round_like_ggml(inv * scale[b]);
    sc[b] = static_cast<int8_t>(r < 127 ? r : 127);
  }
  const float d = load_f16(out + 208);
  for (int b = 0; b < 16; ++b) {
    const float db = d * static_cast<float>(sc[b]);
    if (db == 0) continue;  // keeps the fit's codes, as in the reference
    for (int i = 0; i < 16; ++i)
      q[16 * b + i] = static_cast<uint8_t>(32 + clamp_int(round_like_ggml(x[16 * b + i] / db), -32, 31));
  }
  // Element h·128 + r: low 4 bits in ql[h·64 + r % 64] (high nibble for r >= 64),
  // high 2 bits in qh[h·32 + r % 32] at shift 2·(r / 32).
  for (int h = 0; h < 2; ++h) {
    const uint8_t* e = q + 128 * h;
    uint8_t* ql = out + 64 * h;
    uint8_t* qh = out + 128 + 32 * h;
    for (int r = 0; r < 32; ++r) {
      ql[r] = static_cast<uint8_t>((e[r] & 15) | ((e[r + 64] & 15) << 4));
      ql[r + 32] = static_cast<uint8_t>((e[r + 32] & 15) | ((e[r + 96] & 15) << 4));
      qh[r] = static_cast<uint8_t>((e[r] >> 4) | ((e[r + 32] >> 4) << 2) | ((e[r + 64] >> 4) << 4) |
                                   ((e[r + 96] >> 4) << 6));
    }
  }
}

}  // namespace tandem::kernels::quant
