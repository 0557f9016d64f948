// quant/q4_k_fit.h — the q4_k sub-block fit (llama.cpp's make_qkx2_quants
// with q4_k's arguments) for W f32 lanes: the 8 sub-blocks of W / 4
// super-blocks in lock step, two groups of W lanes (two dependency chains in
// flight). Internal to tandem_kernels (ADR 0046, ADR 0064).
//
// Each lane performs the reference's operations on one sub-block in the
// reference's order — sums over i stay sequential per lane; products,
// quotients and the rounding trick are lane-wise IEEE operations, so a lane
// rounds exactly as the scalar expression would. The bits therefore do not
// depend on W or on which lane a sub-block lands in: the reference table
// instantiates W = 4 (SSE, one super-block per call), the AVX2 one W = 8 and
// the AVX-512 one W = 16, each in its own translation unit with its own
// target flags.
//
// Everything here has internal linkage (unnamed namespace): the same
// template compiled with different target flags in different translation
// units must not be merged by the linker into one instantiation.
//
// Must be compiled without floating-point contraction (-ffp-contract=off, as
// all of tandem_kernels is): a fused a·b+c rounds once where the reference
// rounds twice.
#pragma once

#include <cstdint>
#include <cstring>

namespace tandem::kernels::quant {

// The per-block steps around the fit (quantize_k.cpp, scalar): the fit's
// weights |x| + rms(x) of each sub-block, and the super-block's 6-bit
// scales, mins and final codes from the fit's results.
void q4_k_weights(const float* x, float* w);  // 256 values -> 256 weights
void q4_k_finish(const float* x, uint8_t* q, const float* scale, const float* min, uint8_t* out);

namespace {

// W f32 / i32 lanes (GCC / Clang vector extension). Spelled out per W:
// GCC drops a vector_size that depends on a template parameter.
template <int W>
struct Lanes;
template <>
struct Lanes<4> {
  typedef float F __attribute__((vector_size(16)));
  typedef int32_t I __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
};

template <int W>
struct Q4kFit {
  using F = typename Lanes<W>::F;
  using I = typename Lanes<W>::I;
  static constexpr int kN = 32, kG = 2;
  static constexpr int kBlocks = kG * W / 8;  // super-blocks per call

  static F splat(float v) {
    F r;
    for (int l = 0; l < W; ++l) r[l] = v;
    return r;
  }
  // m ? a : b per lane (m: all ones or all zeros, as comparisons give).
  static F select(I m, F a, F b) {
    return reinterpret_cast<F>((m & reinterpret_cast<I>(a)) | (~m & reinterpret_cast<I>(b)));
  }
  // Per lane: round_like_ggml(inv · (x − offset)) clamped to 0..15, as a
  // float (exact: every such integer is below 2^23).
  static F codes_of(F x, F inv, F offset) {
    const F shifted = inv * (x - offset) + splat(12582912.0f);
    const I l = (reinterpret_cast<I>(shifted) & 0x007fffff) - 0x00400000;
    const F f = __builtin_convertvector(l, F);
    return select(f < splat(0.0f), splat(0.0f), select(f > splat(15.0f), splat(15.0f), f));
  }

  F x[kN][kG], w[kN][kG];  // values and weights, [i][group]
  F lo[kG], hi[kG];        // range (lo <= 0)
  F sum_w[kG], sum_x[kG];  // Σw, Σw·x in index order
  I flat[kG];              // max == min: no fit (codes 0, scale 0, min −lo)
  F offset[kG], scale[kG], best[kG];
  F codes[kN][kG], trial[kN][kG];

  // One least-squares refit per lane from the codes of 1/step `steps / (hi −
  // offset)`: kept where the weighted squared error falls, and then also the
  // offset the next trials round against (as in the reference).
  void refit(float steps) {
    const F zero = splat(0.0f), one = splat(1.0f);
    F inv[kG], sum_l[kG], sum_l2[kG], sum_xl[kG], err[kG], s[kG], o[kG];
    I fits[kG];
    for (int h = 0; h < kG; ++h) {
      inv[h] = splat(steps) / select(flat[h], one, hi[h] - offset[h]);
      sum_l[h] = sum_l2[h] = sum_xl[h] = err[h] = zero;
    }
    for (int i = 0; i < kN; ++i) {
      for (int h = 0; h < kG; ++h) {
        const F l = codes_of(x[i][h], inv[h], offset[h]);
        trial[i][h] = l;
        const F wl = w[i][h] * l;
        sum_l[h] += wl;
        sum_l2[h] += wl * l;
        sum_xl[h] += wl * x[i][h];
      }
    }
    for (int h = 0; h < kG; ++h) {
      const F det = sum_w[h] * sum_l2[h] - sum_l[h] * sum_l[h];
      fits[h] = (det > zero) & ~flat[h];
      const F d = select(fits[h], det, one);
      s[h] = (sum_w[h] * sum_xl[h] - sum_x[h] * sum_l[h]) / d;
      o[h] = (sum_l2[h] * sum_x[h] - sum_l[h] * sum_xl[h]) / d;
      const I positive = o[h] > zero;  // the format subtracts a non-negative min
      o[h] = select(positive, zero, o[h]);
      s[h] = select(positive, sum_xl[h] / select(fits[h], sum_l2[h], one), s[h]);
    }
    for (int i = 0; i < kN; ++i) {
      for (int h = 0; h < kG; ++h) {
        const F diff = s[h] * trial[i][h] + o[h] - x[i][h];
        err[h] += w[i][h] * (diff * diff);
      }
    }
    I win[kG];
    for (int h = 0; h < kG; ++h) {
      win[h] = fits[h] & (err[h] < best[h]);
      best[h] = select(win[h], err[h], best[h]);
      scale[h] = select(win[h], s[h], scale[h]);
      offset[h] = select(win[h], o[h], offset[h]);
    }
    for (int i = 0; i < kN; ++i) {
      for (int h = 0; h < kG; ++h) codes[i][h] = select(win[h], trial[i][h], codes[i][h]);
    }
  }

  // The 8 sub-blocks of each of kBlocks super-blocks (xs, weights: 256
  // values each, consecutive), each 32 values: x ≈ scale·q + offset with
  // offset <= 0 and q in 0..15, the weighted squared error minimised over the
  // range fit and 21 least-squares refits whose codes come from trial steps
  // (15 + (−1 + 0.1·s)) across the range. Writes each sub-block's codes,
  // scale and −offset (the format's min, >= 0), sub-block j of super-block b
  // at index 8·b + j. Sub-block t (of all 8·kBlocks) runs in lane t % W of
  // group t / W.
  void run(const float* xs, const float* weights, uint8_t* q, float* scale_out, float* min_out) {
    for (int i = 0; i < kN; ++i) {
      for (int t = 0; t < 8 * kBlocks; ++t) {
        x[i][t / W][t % W] = xs[kN * t + i];
        w[i][t / W][t % W] = weights[kN * t + i];
      }
    }
    const F zero = splat(0.0f), one = splat(1.0f);
    for (int h = 0; h < kG; ++h) {
      lo[h] = hi[h] = x[0][h];
      sum_w[h] = w[0][h];
      sum_x[h] = w[0][h] * x[0][h];
    }
    for (int i = 1; i < kN; ++i) {
      for (int h = 0; h < kG; ++h) {
        lo[h] = select(x[i][h] < lo[h], x[i][h], lo[h]);
        hi[h] = select(x[i][h] > hi[h], x[i][h], hi[h]);
        sum_w[h] += w[i][h];
        sum_x[h] += w[i][h] * x[i][h];
      }
    }
    // A flat lane computes on a unit range and is discarded at the end.
    F inv[kG];
    for (int h = 0; h < kG; ++h) {
      lo[h] = select(lo[h] > zero, zero, lo[h]);
      flat[h] = hi[h] == lo[h];
      offset[h] = lo[h];
      inv[h] = splat(15.0f) / select(flat[h], one, hi[h] - offset[h]);
      scale[h] = one / inv[h];
      best[h] = zero;
    }
    for (int i = 0; i < kN; ++i) {
      for (int h = 0; h < kG; ++h) {
        codes[i][h] = codes_of(x[i][h], inv[h], offset[h]);
        const F diff = scale[h] * codes[i][h] + offset[h] - x[i][h];
        best[h] += w[i][h] * (diff * diff);
      }
    }
    for (int step = 0; step <= 20; ++step) refit(-1.0f + 0.1f * static_cast<float>(step) + 15.0f);
    for (int t = 0; t < 8 * kBlocks; ++t) {
      const int h = t / W, l = t % W;
      const bool is_flat = flat[h][l] != 0;
      scale_out[t] = is_flat ? 0.0f : scale[h][l];
      min_out[t] = -(is_flat ? lo[h][l] : offset[h][l]);
      for (int i = 0; i < kN; ++i) q[kN * t + i] = is_flat ? 0 : static_cast<uint8_t>(codes[i][h][l]);
    }
  }
};

// `blocks` q4_k super-blocks (256 values -> 144 bytes each), kBlocks at a
// time; a last partial group is fitted padded with zero blocks (flat lanes,
// discarded), so every block's bytes are those of the reference.
template <int W>
void quantize_q4_k_blocks(const float* x, int64_t blocks, uint8_t* out) {
  using Fit = Q4kFit<W>;
  constexpr int kB = Fit::kBlocks;
  alignas(64) float xs[256 * kB], w[256 * kB], scale[8 * kB], min[8 * kB];
  uint8_t q[256 * kB];
  Fit fit;
  for (int64_t b = 0; b < blocks; b += kB) {
    const int count = blocks - b < kB ? static_cast<int>(blocks - b) : kB;
    const float* src = x + 256 * b;
    if (count < kB) {
      std::memset(xs, 0, sizeof xs);
      std::memcpy(xs, src, sizeof(float) * 256 * count);
      src = xs;
    }
    for (int j = 0; j < kB; ++j) q4_k_weights(src + 256 * j, w + 256 * j);
    fit.run(src, w, q, scale, min);
    for (int j = 0; j < count; ++j)
      q4_k_finish(src + 256 * j, q + 256 * j, scale + 8 * j, min + 8 * j, out + 144 * (b + j));
  }
}

}  // namespace
}  // namespace tandem::kernels::quant
