// avx512/attention.cpp — AVX-512 instantiation of simd/attention_impl.h.
#include "avx512/avx512.h"
#include "simd/attention_impl.h"
#include "simd/vec512.h"

namespace tandem::kernels::avx512 {

void attend(const AttendArgs& args) { AttentionKernel<Vec512>::attend(args); }

}  // namespace tandem::kernels::avx512
