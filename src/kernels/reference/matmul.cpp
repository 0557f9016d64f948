// reference/matmul.cpp — scalar matmul over the packed panel layout.
#include <algorithm>
#include <cmath>
#include <limits>

#include "dtype_convert.h"
#include "reference/reference.h"

namespace tandem::kernels::reference {
namespace {

float weight_at(const uint8_t* w, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::f32:
      return reinterpret_cast<const float*>(w)[index];
    case DType::bf16:
      return bf16_to_f32(reinterpret_cast<const uint16_t*>(w)[index]);
    case DType::f16:
      return f16_to_f32(reinterpret_cast<const uint16_t*>(w)[index]);
    default:  // quantized weights take matmul_quant
      break;
  }
  return 0.0f;
}

}  // namespace

void matmul_panels(const MatmulArgs& a) {
  float acc[kPanel], w[kPanel];
  int64_t slot[kPanel];
  for (int64_t j = 0; j < kPanel; ++j) slot[j] = packed_slot(a.dtype, j);
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
    const int64_t panel_base = p * a.k * kPanel;
    for (int64_t r = 0; r < a.m; ++r) {
      const float* xr = a.x + r * a.ldx;
      std::fill(acc, acc + kPanel, 0.0f);
      for (int64_t kk = a.k_begin; kk < a.k_end; ++kk) {
        const float xv = xr[kk];
        const int64_t base = panel_base + kk * kPanel;
        for (int64_t j = 0; j < cols; ++j) w[j] = weight_at(a.w, a.dtype, base + slot[j]);
        for (int64_t j = 0; j < cols; ++j) acc[j] += xv * w[j];
      }
      std::copy(acc, acc + cols, a.y + r * a.ldy + p * kPanel);
    }
  }
}

namespace {

// A denormal reads (and is flushed) as a zero of its sign: vdpbf16ps's DAZ / FTZ.
float flush(float v) { return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v; }

float step(float acc, float x, float w) { return flush(std::fma(flush(x), flush(w), flush(acc))); }

}  // namespace

void matmul_bf16_pairs(const MatmulArgs& a) {
  const auto* w = reinterpret_cast<const uint16_t*>(a.w);
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int64_t cols = std::min<int64_t>(kPanel, a.n - p * kPanel);
    const int64_t panel_base = p * a.k * kPanel;
    for (int64_t r = 0; r < a.m; ++r) {
      const uint16_t* xr = a.xb + r * a.ldxb;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t slot = packed_slot(DType::bf16, j);
        auto weight = [&](int64_t kk) { return bf16_to_f32(w[panel_base + kk * kPanel + slot]); };
        float acc = 0.0f;
        for (int64_t kk = a.k_begin; kk < a.k_end; kk += 2) {
          const bool last = kk + 1 == a.k_end;
          acc = last ? step(acc, 0.0f, 0.0f) : step(acc, bf16_to_f32(xr[kk + 1]), weight(kk + 1));
          acc = step(acc, bf16_to_f32(xr[kk]), weight(kk));
        }
        a.y[r * a.ldy + p * kPanel + j] = acc;
      }
    }
  }
}

}  // namespace tandem::kernels::reference
