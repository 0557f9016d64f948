// kernels/bf16_terms.h — f16 and f32 weights as sums of bf16 terms (ADR 0083),
// so that the CUDA backend's one bf16-weight GEMM runs them: a weight w is
// stored as t0 + t1 (+ t2), each term bf16, and W·x as the same GEMM over
// k' = bf16_terms_k(k, terms) against x repeated terms times.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels {

// How many bf16 terms a weight of `dtype` is split into: bf16 1, f16 2 (the
// sum is the f16 value exactly), f32 3 (the sum is the f32 value exactly for
// |v| >= 2^-110, within 2^-24 |v| below, where the last terms reach bf16's
// denormals); 0 for the quantized types.
int bf16_terms(DType dtype);

// The GEMM's k over split rows: terms blocks of k rounded up to a multiple
// of 8 (the GEMM's k % 8 == 0), so terms · ⌈k / 8⌉ · 8.
int64_t bf16_terms_k(int64_t k, int terms);

// The GPU's rule for a float matrix of `dtype` with rows of k: the GEMM's k'
// when it is stored as terms — f16, f32, or bf16 whose k is not a multiple of
// 8 (one padded term) — else 0 (bf16 rows as they are, or a quantized type).
int64_t bf16_split_k(DType dtype, int64_t k);

// Row r of `w` (rows × k f32 values, each exactly a value of the source
// dtype) becomes `terms` consecutive blocks of bf16_terms_k(k, 1) values in
// out row r (bf16_terms_k(k, terms) long; zero past k in each block):
// t0 = bf16(v) rounded to nearest even, then
// t_i = bf16(v − t0 − … − t_{i−1}), each difference exact in f32. Infinite or
// NaN values keep t0 = bf16(v) and zero further terms.
void split_bf16_terms(const float* w, int64_t rows, int64_t k, int terms, uint16_t* out);

}  // namespace tandem::kernels
