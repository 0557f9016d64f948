// reference/matmul.cpp — scalar matmul over the packed panel layout.
#include <algorithm>

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

}  // namespace tandem::kernels::reference
