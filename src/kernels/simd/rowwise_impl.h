// simd/rowwise_impl.h — row-wise and element-wise kernels written once over
// a vector wrapper V (simd/vec512.h or simd/vec256.h) and instantiated in
// each ISA's translation unit. Internal linkage.
//
// Invariance: reductions (rmsnorm, softmax) use a fixed number of lane
// accumulators, visited in index order, with tails loaded as partial vectors
// into the same accumulators and a fixed final shuffle tree — the order
// depends only on the row length. Element-wise ops compute every element with
// the same vector instructions whether it sits in a full or a partial vector,
// so an element's bits do not depend on the call's length or offset.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernel_table.h"

namespace tandem::kernels {
namespace {

template <class V>
struct RowwiseKernels {
  using F = typename V::F;
  static constexpr int L = V::kLanes;

  static void rmsnorm_row(const float* x, const float* weight, float* y, int64_t dim, float eps) {
    F acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
    int64_t i = 0;
    for (; i + 4 * L <= dim; i += 4 * L) {
      for (int j = 0; j < 4; ++j) {
        const F v = V::load(x + i + j * L);
        acc[j] = V::fmadd(v, v, acc[j]);
      }
    }
    for (int j = 0; i < dim; i += L, ++j) {
      const F v = V::load_partial(x + i, dim - i);
      acc[j] = V::fmadd(v, v, acc[j]);
    }
    const float sum = V::reduce_add(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    const F vinv = V::set1(inv);
    for (i = 0; i < dim; i += L) {
      const int64_t n = dim - i;
      const F v = V::mul(V::mul(V::load_partial(x + i, n), vinv), V::load_partial(weight + i, n));
      if (n >= L) {
        V::store(y + i, v);
      } else {
        V::store_partial(y + i, v, n);
      }
    }
  }

  static void softmax_row(float* x, int64_t n) {
    F vmax = V::set1(-INFINITY);
    for (int64_t i = 0; i < n; i += L) vmax = V::max(vmax, V::load_partial(x + i, n - i, -INFINITY));
    const F m = V::set1(V::reduce_max(vmax));
    F sum[2] = {V::zero(), V::zero()};
    for (int64_t i = 0, j = 0; i < n; i += L, j ^= 1) {
      const int64_t c = n - i;
      const F e = V::exp(V::sub(V::load_partial(x + i, c, -INFINITY), m));
      sum[j] = V::add(sum[j], e);
      store_any(x + i, e, c);
    }
    const F inv = V::set1(1.0f / V::reduce_add(V::add(sum[0], sum[1])));
    for (int64_t i = 0; i < n; i += L) store_any(x + i, V::mul(V::load_partial(x + i, n - i), inv), n - i);
  }

  static F silu_times(F g, F u) {
    return V::mul(V::div(g, V::add(V::set1(1.0f), V::exp(V::sub(V::zero(), g)))), u);
  }

  // gelu_tanh(g) = 0.5 g (1 + tanh(z)) = g / (1 + e^(-2z)), z = sqrt(2/pi) (g + 0.044715 g^3).
  static F gelu_times(F g, F u) {
    const F g3 = V::mul(V::mul(g, g), g);
    const F z = V::mul(V::set1(0.7978845608028654f), V::fmadd(V::set1(0.044715f), g3, g));
    const F e = V::exp(V::mul(V::set1(-2.0f), z));
    return V::mul(V::div(g, V::add(V::set1(1.0f), e)), u);
  }

  static void store_any(float* p, F v, int64_t count) {
    if (count >= L) {
      V::store(p, v);
    } else {
      V::store_partial(p, v, count);
    }
  }

  static void swiglu(const float* gate, const float* up, float* out, int64_t count) {
    for (int64_t i = 0; i < count; i += L) {
      const int64_t c = count - i;
      store_any(out + i, silu_times(V::load_partial(gate + i, c), V::load_partial(up + i, c)), c);
    }
  }

  static void gelu_tanh_gate(const float* gate, const float* up, float* out, int64_t count) {
    for (int64_t i = 0; i < count; i += L) {
      const int64_t c = count - i;
      store_any(out + i, gelu_times(V::load_partial(gate + i, c), V::load_partial(up + i, c)), c);
    }
  }

  static void add_inplace(float* y, const float* x, int64_t count) {
    for (int64_t i = 0; i < count; i += L) {
      const int64_t c = count - i;
      store_any(y + i, V::add(V::load_partial(y + i, c), V::load_partial(x + i, c)), c);
    }
  }

  static void to_f32(const void* src, DType dtype, int64_t count, float* dst) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < count; i += L) {
      const int64_t c = count - i;
      F v;
      switch (dtype) {
        case DType::f32:
          v = V::load_partial(static_cast<const float*>(src) + i, c);
          break;
        case DType::bf16:
          v = V::load_bf16_partial(h + i, c);
          break;
        default:
          v = V::load_f16_partial(h + i, c);
          break;
      }
      store_any(dst + i, v, c);
    }
  }

  // out_a = a*c - b*s, out_b = b*c + a*s with each product rounded (no FMA),
  // bitwise what the reference and transformers compute.
  static void rope_row(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                       int rotary_dim, RopeLayout layout) {
    const int half = rotary_dim / 2;
    if (layout == RopeLayout::neox) {
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;
        for (int i = 0; i < half; i += L) {
          const int c = half - i;
          const F a = V::load_partial(v + i, c), b = V::load_partial(v + half + i, c);
          const F co = V::load_partial(cos + i, c), si = V::load_partial(sin + i, c);
          store_any(v + i, V::sub(V::mul(a, co), V::mul(b, si)), c);
          store_any(v + half + i, V::add(V::mul(b, co), V::mul(a, si)), c);
        }
      }
      return;
    }
    // Interleaved: duplicate cos to (c0, c0, c1, c1, ...) and sin to
    // (-s0, s0, -s1, s1, ...); out = v*cos2 + swap_pairs(v)*sin2. Adding a
    // negated rounded product equals subtracting it, so the bits match.
    float cos2[kMaxHeadDim], sin2[kMaxHeadDim];
    for (int i = 0; i < half; ++i) {
      cos2[2 * i] = cos2[2 * i + 1] = cos[i];
      sin2[2 * i] = -sin[i];
      sin2[2 * i + 1] = sin[i];
    }
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<int64_t>(h) * head_dim;
      for (int i = 0; i < rotary_dim; i += L) {
        const int c = rotary_dim - i;
        const F a = V::load_partial(v + i, c);
        const F out = V::add(V::mul(a, V::load_partial(cos2 + i, c)),
                             V::mul(V::swap_pairs(a), V::load_partial(sin2 + i, c)));
        store_any(v + i, out, c);
      }
    }
  }
};

}  // namespace
}  // namespace tandem::kernels
