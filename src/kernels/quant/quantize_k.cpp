// quant/quantize_k.cpp — q4_k, q6_k and q5_0 blocks exactly as llama.cpp's
// reference quantizers make them (quant/quantize_blocks.h, ADR 0046).
//
// Every sum below runs in index order in f32 and every product and quotient
// is written in the order the reference evaluates it: f32 addition is not
// associative, so a reordered sum can round a code or a scale differently.
#include <cmath>
#include <cstring>

#include "dtype_convert.h"
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

// Four f32 lanes (GCC / Clang vector extension, SSE on any x86-64):
// lane-wise IEEE operations, so each lane rounds exactly as the scalar
// expression would.
using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));

inline F4 splat(float v) { return F4{v, v, v, v}; }
// m ? a : b per lane (m: all ones or all zeros, as comparisons give).
inline F4 select(I4 m, F4 a, F4 b) {
  return reinterpret_cast<F4>((m & reinterpret_cast<I4>(a)) | (~m & reinterpret_cast<I4>(b)));
}
// Per lane: round_like_ggml(inv · (x − offset)) clamped to 0..15, as a float
// (exact: every such integer is below 2^23).
inline F4 codes_of(F4 x, F4 inv, F4 offset) {
  const F4 shifted = inv * (x - offset) + splat(12582912.0f);
  const I4 l = (reinterpret_cast<I4>(shifted) & 0x007fffff) - 0x00400000;
  const F4 f = __builtin_convertvector(l, F4);
  return select(f < splat(0.0f), splat(0.0f), select(f > splat(15.0f), splat(15.0f), f));
}

// The 8 sub-blocks of a q4_k super-block in lock step: sub-block 4h + l in
// lane l of group h (two groups: two dependency chains in flight).
struct Q4kLanes {
  static constexpr int kN = 32, kG = 2;
  F4 x[kN][kG], w[kN][kG];  // values and weights, [i][group]
  F4 lo[kG], hi[kG];        // range (lo <= 0)
  F4 sum_w[kG], sum_x[kG];  // Σw, Σw·x in index order
  I4 flat[kG];              // max == min: no fit (codes 0, scale 0, min −lo)
  F4 offset[kG], scale[kG], best[kG];
  F4 codes[kN][kG], trial[kN][kG];
};

// One least-squares refit per lane from the codes of 1/step `steps / (hi −
// offset)`: kept where the weighted squared error falls, and then also the
// offset the next trials round against (as in the reference).
void refit_q4_k_lanes(Q4kLanes& f, float steps) {
  constexpr int kN = Q4kLanes::kN, kG = Q4kLanes::kG;
  const F4 zero = splat(0.0f), one = splat(1.0f);
  F4 inv[kG], sum_l[kG], sum_l2[kG], sum_xl[kG], err[kG], s[kG], o[kG];
  I4 fits[kG];
  for (int h = 0; h < kG; ++h) {
    inv[h] = splat(steps) / select(f.flat[h], one, f.hi[h] - f.offset[h]);
    sum_l[h] = sum_l2[h] = sum_xl[h] = err[h] = zero;
  }
  for (int i = 0; i < kN; ++i) {
    for (int h = 0; h < kG; ++h) {
      const F4 l = codes_of(f.x[i][h], inv[h], f.offset[h]);
      f.trial[i][h] = l;
      const F4 wl = f.w[i][h] * l;
      sum_l[h] += wl;
      sum_l2[h] += wl * l;
      sum_xl[h] += wl * f.x[i][h];
    }
  }
  for (int h = 0; h < kG; ++h) {
    const F4 det = f.sum_w[h] * sum_l2[h] - sum_l[h] * sum_l[h];
    fits[h] = (det > zero) & ~f.flat[h];
    const F4 d = select(fits[h], det, one);
    s[h] = (f.sum_w[h] * sum_xl[h] - f.sum_x[h] * sum_l[h]) / d;
    o[h] = (sum_l2[h] * f.sum_x[h] - sum_l[h] * sum_xl[h]) / d;
    const I4 positive = o[h] > zero;  // the format subtracts a non-negative min
    o[h] = select(positive, zero, o[h]);
    s[h] = select(positive, sum_xl[h] / select(fits[h], sum_l2[h], one), s[h]);
  }
  for (int i = 0; i < kN; ++i) {
    for (int h = 0; h < kG; ++h) {
      const F4 diff = s[h] * f.trial[i][h] + o[h] - f.x[i][h];
      err[h] += f.w[i][h] * (diff * diff);
    }
  }
  I4 win[kG];
  for (int h = 0; h < kG; ++h) {
    win[h] = fits[h] & (err[h] < f.best[h]);
    f.best[h] = select(win[h], err[h], f.best[h]);
    f.scale[h] = select(win[h], s[h], f.scale[h]);
    f.offset[h] = select(win[h], o[h], f.offset[h]);
  }
  for (int i = 0; i < kN; ++i) {
    for (int h = 0; h < kG; ++h) f.codes[i][h] = select(win[h], f.trial[i][h], f.codes[i][h]);
  }
}

// The 8 sub-blocks of a q4_k super-block, each 32 values: x ≈ scale·q +
// offset with offset <= 0 and q in 0..15, the weighted squared error
// minimised over the range fit and 21 least-squares refits whose codes come
// from trial steps (15 + (−1 + 0.1·s)) across the range (llama.cpp's
// make_qkx2_quants with q4_k's arguments). Writes each sub-block's codes,
// scale and −offset (the format's min, >= 0).
//
// The reference's trials depend on each other (through the offset), so one
// sub-block is a serial chain; the 8 sub-blocks are independent and run in
// SSE lanes (Q4kLanes). Each lane performs the reference's operations in its
// order (sums over i stay sequential per lane): the bits are those of one
// sub-block at a time.
void fit_q4_k_sub_blocks(const float* x, const float* weights, uint8_t* q, float* scale_out, float* min_out) {
  constexpr int kN = Q4kLanes::kN, kG = Q4kLanes::kG;
  Q4kLanes f;
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < 8; ++j) {
      f.x[i][j / 4][j % 4] = x[kN * j + i];
      f.w[i][j / 4][j % 4] = weights[kN * j + i];
    }
  }
  const F4 zero = splat(0.0f), one = splat(1.0f);
  for (int h = 0; h < kG; ++h) {
    f.lo[h] = f.hi[h] = f.x[0][h];
    f.sum_w[h] = f.w[0][h];
    f.sum_x[h] = f.w[0][h] * f.x[0][h];
  }
  for (int i = 1; i < kN; ++i) {
    for (int h = 0; h < kG; ++h) {
      f.lo[h] = select(f.x[i][h] < f.lo[h], f.x[i][h], f.lo[h]);
      f.hi[h] = select(f.x[i][h] > f.hi[h], f.x[i][h], f.hi[h]);
      f.sum_w[h] += f.w[i][h];
      f.sum_x[h] += f.w[i][h] * f.x[i][h];
    }
  }
  // A flat lane computes on a unit range and is discarded at the end.
  F4 inv[kG];
  for (int h = 0; h < kG; ++h) {
    f.lo[h] = select(f.lo[h] > zero, zero, f.lo[h]);
    f.flat[h] = f.hi[h] == f.lo[h];
    f.offset[h] = f.lo[h];
    inv[h] = splat(15.0f) / select(f.flat[h], one, f.hi[h] - f.offset[h]);
    f.scale[h] = one / inv[h];
    f.best[h] = zero;
  }
  for (int i = 0; i < kN; ++i) {
    for (int h = 0; h < kG; ++h) {
      f.codes[i][h] = codes_of(f.x[i][h], inv[h], f.offset[h]);
      const F4 diff = f.scale[h] * f.codes[i][h] + f.offset[h] - f.x[i][h];
      f.best[h] += f.w[i][h] * (diff * diff);
    }
  }
  for (int step = 0; step <= 20; ++step) refit_q4_k_lanes(f, -1.0f + 0.1f * static_cast<float>(step) + 15.0f);
  for (int j = 0; j < 8; ++j) {
    const int h = j / 4, l = j % 4;
    const bool flat = f.flat[h][l] != 0;
    scale_out[j] = flat ? 0.0f : f.scale[h][l];
    min_out[j] = -(flat ? f.lo[h][l] : f.offset[h][l]);
    for (int i = 0; i < kN; ++i) q[kN * j + i] = flat ? 0 : static_cast<uint8_t>(f.codes[i][h][l]);
  }
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

void quantize_block_q4_k(const float* x, uint8_t* out) {
  uint8_t q[256];
  float scale[8], min[8], w[256];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    // Weights |x| + rms(x): large values count more, small ones still count.
    float sum_x2 = 0;
    for (int i = 0; i < 32; ++i) sum_x2 += xs[i] * xs[i];
    const float rms = std::sqrt(sum_x2 / 32.0f);
    for (int i = 0; i < 32; ++i) w[32 * j + i] = rms + std::fabs(xs[i]);
  }
  fit_q4_k_sub_blocks(x, w, q, scale, min);
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
