// reference/reference.h — the scalar reference kernels: plain C++, no
// intrinsics, written for clarity. They define what every SIMD variant must
// compute (within the tolerances in docs/kernels.md) and are the fallback on
// CPUs without AVX2. Each is batch invariant for the same reason as the SIMD
// variants: every output's reduction order depends only on its length.
#pragma once

#include "kernel_table.h"

namespace tandem::kernels::reference {

void matmul_panels(const MatmulArgs& args);
void matmul_bf16_pairs(const MatmulArgs& args);
void rmsnorm_row(const float* x, const float* weight, float* y, int64_t dim, float eps);
void softmax_row(float* x, int64_t n);
void swiglu(const float* gate, const float* up, float* out, int64_t count);
void gelu_tanh_gate(const float* gate, const float* up, float* out, int64_t count);
void add_inplace(float* y, const float* x, int64_t count);
void to_f32(const void* src, DType dtype, int64_t count, float* dst);
void rope_row(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int rotary_dim,
              RopeLayout layout);
void attend(const AttendArgs& args);
void matmul_quant(const quant::QuantMatmulArgs& args);

// Address of key/value (position pos, kv head h) in a paged pool plane.
inline const float* kv_row(const float* plane, const KvPool& pool, const int32_t* block_table, int32_t pos,
                           int kv_head) {
  const int64_t block = block_table[pos / pool.tokens_per_block];
  const int64_t slot = pos % pool.tokens_per_block;
  return plane + ((block * pool.tokens_per_block + slot) * pool.n_kv_heads + kv_head) * pool.head_dim;
}

}  // namespace tandem::kernels::reference
