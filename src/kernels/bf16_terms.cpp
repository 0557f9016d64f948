// bf16_terms.cpp — kernels/bf16_terms.h.
#include "kernels/bf16_terms.h"

#include <cmath>

#include "dtype_convert.h"

namespace tandem::kernels {

int bf16_terms(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return 1;
    case DType::f16:
      return 2;
    case DType::f32:
      return 3;
    default:
      return 0;
  }
}

int64_t bf16_terms_k(int64_t k, int terms) { return terms * ((k + 7) / 8 * 8); }

int64_t bf16_split_k(DType dtype, int64_t k) {
  const int terms = bf16_terms(dtype);
  return terms == 0 || (terms == 1 && k % 8 == 0) ? 0 : bf16_terms_k(k, terms);
}

void split_bf16_terms(const float* w, int64_t rows, int64_t k, int terms, uint16_t* out) {
  const int64_t pitch = bf16_terms_k(k, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = w + r * k;
    uint16_t* dst = out + r * pitch * terms;
    for (int t = 0; t < terms; ++t)
      for (int64_t i = k; i < pitch; ++i) dst[t * pitch + i] = 0;
    for (int64_t i = 0; i < k; ++i) {
      float rest = src[i];
      const bool finite = std::isfinite(rest);
      for (int t = 0; t < terms; ++t) {
        const uint16_t term = t == 0 || finite ? f32_to_bf16(rest) : uint16_t{0};
        dst[t * pitch + i] = term;
        // rest − term is exact: term is rest rounded to 8 significant bits, so
        // the difference is a multiple of rest's ulp below term's half ulp.
        if (finite) rest -= bf16_to_f32(term);
      }
    }
  }
}

}  // namespace tandem::kernels
