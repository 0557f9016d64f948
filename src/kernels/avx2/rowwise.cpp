// avx2/rowwise.cpp — AVX2 instantiation of simd/rowwise_impl.h.
#include "avx2/avx2.h"
#include "simd/rowwise_impl.h"
#include "simd/vec256.h"

namespace tandem::kernels::avx2 {

using K = RowwiseKernels<Vec256>;

void rmsnorm_row(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  K::rmsnorm_row(x, weight, y, dim, eps);
}
void softmax_row(float* x, int64_t n) { K::softmax_row(x, n); }
void swiglu(const float* gate, const float* up, float* out, int64_t count) {
  K::swiglu(gate, up, out, count);
}
void gelu_tanh_gate(const float* gate, const float* up, float* out, int64_t count) {
  K::gelu_tanh_gate(gate, up, out, count);
}
void add_inplace(float* y, const float* x, int64_t count) { K::add_inplace(y, x, count); }
void to_f32(const void* src, DType dtype, int64_t count, float* dst) { K::to_f32(src, dtype, count, dst); }
void rope_row(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int rotary_dim,
              RopeLayout layout) {
  K::rope_row(x, n_heads, head_dim, cos, sin, rotary_dim, layout);
}

}  // namespace tandem::kernels::avx2
