// reference/rowwise.cpp — scalar row-wise and element-wise ops. Sums use a
// double accumulator in index order; transcendental ops evaluate in double and
// round once, so the reference is also the most accurate variant.
#include <cmath>
#include <cstring>

#include "dtype_convert.h"
#include "reference/reference.h"

namespace tandem::kernels::reference {

void rmsnorm_row(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
  for (int64_t i = 0; i < dim; ++i) y[i] = (x[i] * inv) * weight[i];
}

void softmax_row(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(static_cast<double>(x[i]) - max);
    x[i] = static_cast<float>(e);
    sum += e;
  }
  const double inv = 1.0 / sum;
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] * inv);
}

void swiglu(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_tanh_gate(const float* gate, const float* up, float* out, int64_t count) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    const double inner = kSqrt2OverPi * (g + 0.044715 * g * g * g);
    out[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(inner)) * up[i]);
  }
}

void add_inplace(float* y, const float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] += x[i];
}

// `src` may be unaligned (mmapped safetensors), so elements are read with memcpy.
void to_f32(const void* src, DType dtype, int64_t count, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&dst[i], bytes + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes + i * 2, 2);
      dst[i] = dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
}

void rope_row(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int rotary_dim,
              RopeLayout layout) {
  const int half = rotary_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      // Pair (a, b): neox pairs i with i + half, interleaved pairs 2i with 2i+1.
      const int ia = layout == RopeLayout::neox ? i : 2 * i;
      const int ib = layout == RopeLayout::neox ? i + half : 2 * i + 1;
      const float a = v[ia], b = v[ib];
      const float ac = a * cos[i], bs = b * sin[i];
      const float bc = b * cos[i], as = a * sin[i];
      v[ia] = ac - bs;
      v[ib] = bc + as;
    }
  }
}

}  // namespace tandem::kernels::reference
