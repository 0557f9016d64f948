// dtype.cpp — dtype helpers and the small ops that only convert or scan:
// to_f32, embedding, argmax.
#include <cmath>

#include "core/check.h"
#include "kernel_table.h"

namespace tandem::kernels {

size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

void to_f32(const void* src, DType dtype, int64_t count, float* dst) {
  // Widening conversions are exact, so every variant gives the same bits.
  kernels_for(active_isa()).to_f32(src, dtype, count, dst);
}

void embedding(const Ctx& ctx, const void* table, DType dtype, int64_t dim, const int32_t* ids, int64_t rows,
               float* out) {
  const KernelTable& kt = kernels_for(ctx.isa);
  const auto* base = static_cast<const uint8_t*>(table);
  const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(dtype);
  for (int64_t r = 0; r < rows; ++r) {
    TANDEM_CHECK(ids[r] >= 0);
    kt.to_f32(base + static_cast<size_t>(ids[r]) * row_bytes, dtype, dim, out + r * dim);
  }
}

int32_t argmax(const float* x, int64_t n) {
  int32_t best_index = 0;
  float best = -INFINITY;
  bool found = false;
  for (int64_t i = 0; i < n; ++i) {
    // Strict '>' keeps the lowest index on ties; NaN compares false, never wins.
    if (x[i] > best || (!found && x[i] == best)) {
      best = x[i];
      best_index = static_cast<int32_t>(i);
      found = true;
    }
  }
  return best_index;
}

}  // namespace tandem::kernels
